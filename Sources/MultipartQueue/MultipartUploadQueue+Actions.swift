import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The one place the queue carries out what its schedule decided, and writes to its store.
extension MultipartUploadQueue {
    /// Carries out `actions`, in order, as the schedule returned them for an event. `known` is the record a send
    /// ended with, which forgetting its upload uses where another process's remove took the one on disk; the server's
    /// upload resource of a form given up is deleted through the run's session, or `session` outside a run.
    func perform(
        _ actions: [QueueSchedule.Action], known: QueueRecord? = nil,
        on session: (URLSession, MultipartHeaders?)? = nil
    ) async {
        for action in actions {
            switch action {
            case .forget(let upload, let givingUp):
                let record = known?.id == upload.id.rawValue ? known : nil
                await forget(upload, givingUp: givingUp, record: record, on: session ?? running)
            default:
                perform(action)
            }
        }
        report()
    }

    /// Carries out `action`, which needs no wait: all but ``QueueSchedule/Action/forget(_:givingUp:)``.
    func perform(_ action: QueueSchedule.Action) {
        switch action {
        case .write(let id, let change):
            // The run's writes of an upload's state are not the caller's to see fail: one lost is written again at
            // the upload's next end, and a failed end is told all the same.
            _ = try? write([(id, change)])
        case .cancel(let id):
            cancels[id]?.cancel()
        case .emit(let event):
            // After the progress, which a reader of the event finds up to date.
            report()
            eventSink.yield(event)
        case .forget(let upload, let givingUp):
            // Only an async perform can wait for the server; none is asked of this one (see `perform(_:known:on:)`).
            assertionFailure("forget \(upload.id), givingUp \(givingUp), without waiting")
        case .clear(let ids):
            store.removeRecords(ids.map(\.rawValue))
            for id in ids { store.removeState(of: id.rawValue) }
        case .answerRemovers(let id, let removal):
            for remover in removers.removeValue(forKey: id) ?? [] { remover.resume(returning: removal) }
        case .complete(let id, let answer):
            // Written with the next start, in one commit (``recordCompletions(with:)``).
            completing.append((id, answer))
        case .serverAnswered(let origin):
            gates[origin]?.answered()
        case .serverOut(let origin):
            gates[origin]?.markOut()
        case .speaksNone(let origin):
            guard knownServers[origin.serialized] != nil else { return }
            knownServers[origin.serialized] = nil
            store.forgetServer(origin.serialized)
        case .wake(let time):
            guard let sleep else { return }
            if time.map({ $0 < sleep.until }) ?? true { sleep.alarm.ring() }
        }
    }

    /// Writes `changes` of uploads' states in one transaction, synced where one of them is: the queue's one way to
    /// change a state, which a send's own notes share (``QueueStore/update(_:syncing:)``). The state each wrote, or
    /// found and left, in order; `nil` for an upload gone.
    func write(_ changes: [(id: ID, change: QueueRecord.Change)]) throws -> [QueueRecord.State?] {
        try store.update(changes.map { ($0.id.rawValue, $0.change) })
    }

    /// Writes a caller's `change` of `upload`'s state before the schedule takes the move: an error, and nothing
    /// changed, where it cannot be written or the record is gone.
    func writeMove(_ change: QueueRecord.Change, of upload: QueueSchedule.Upload) throws {
        try changeRecord(of: upload) { () throws(MultipartError) in
            try store.update([(upload.id.rawValue, change)])[0]
        }
    }

    /// Writes `upload`'s record with `write`, which gives `nil` where the record is gone: an error then.
    func changeRecord<Written>(
        of upload: QueueSchedule.Upload, _ write: () throws(MultipartError) -> Written?
    ) throws {
        let unwritable = MultipartError.Reason.stateUnwritable(
            store.url.appendingPathComponent(QueueStore.databaseName), errno: EINVAL)
        guard upload.sequence != nil else { throw MultipartError(unwritable) }
        guard try write() != nil else {
            throw MultipartError(unwritable, underlying: QueueRecord.Damage(reason: "it is gone", gone: true))
        }
    }

    /// Removes `upload`'s record and state, which the schedule let go of; `givingUp` an upload that has not
    /// completed deletes its upload resource through `session`.
    private func forget(
        _ upload: QueueSchedule.Upload, givingUp: Bool, record known: QueueRecord?,
        on session: (URLSession, MultipartHeaders?)?
    ) async {
        let record = givingUp ? known ?? (try? record(of: upload)) : nil
        store.removeRecord(upload.id.rawValue)
        if let record, let form = try? record.form.rebuilt(), let (session, headers) = session {
            var policy = MultipartResumption()
            policy.stateDirectory = store.stateDirectory(of: upload.id.rawValue)
            _ = try? await session.abandonUpload(
                form, with: record.request.urlRequest, resumption: policy, headers: headers)
        }
        store.removeState(of: upload.id.rawValue)
    }

    /// Sets the progress from the schedule's counts: its total as it is, what is done never less than before.
    func report() {
        let (total, completed) = (Int64(clamping: schedule.counts.total), Int64(clamping: schedule.counts.completed))
        if progress.totalUnitCount != total { progress.totalUnitCount = total }
        if completed > progress.completedUnitCount { progress.completedUnitCount = completed }
    }
}
