import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The one place the queue carries out what its schedule decided, and the one place it writes to its store (a send's
// notes write their facts through the same `QueueStore.update`).
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

    /// Carries out `action` without waiting.
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
        case .forget:
            // A removal waits for the server's `DELETE`: on a task of the queue's (`perform(_:known:on:)` and
            // `performNow(_:)` wait for it where its order counts).
            Task { await self.perform([action]) }
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
    func write(_ changes: [(id: ID, change: QueueRecord.Change)]) throws(MultipartError) -> [QueueRecord.State?] {
        try store.update(changes.map { ($0.id.rawValue, $0.change) })
    }

    /// Writes a caller's `change` of `upload`'s state before the schedule takes the move: an error, and nothing
    /// changed, where it cannot be written or the record is gone.
    func writeMove(_ change: QueueRecord.Change, of upload: QueueSchedule.Upload) throws {
        try changeRecord(of: upload) { () throws(MultipartError) in try write([(upload.id, change)])[0] }
    }

    /// Writes new uploads' records, in one transaction. Committed to the write-ahead log, not synced: a commit there
    /// outlives a kill of the process (SQLite's WAL with `synchronous = NORMAL`, what Android gives apps and
    /// WorkManager's enqueue relies on); a sync would cost each add as long as a small upload, and only a power cut can
    /// lose it, which adding again by key restores.
    func writeAdded(_ records: [QueueRecord]) throws {
        try store.write(records, syncing: false)
    }

    /// Writes the retry of the failed `upload`: its outcome gone, and where a file changed, its form's `parts` as they
    /// are now, `contentLength` long, under a key of its own (another form for the server). The saved state stays: it
    /// is of the old file, and the next run, finding the form changed, deletes the server's upload of it and starts
    /// over.
    func writeRetry(of upload: QueueSchedule.Upload, parts: [QueueRecord.Form.Part]?, contentLength: UInt64) throws {
        try changeRecord(of: upload) { () throws(MultipartError) in
            try store.rewrite(upload.id.rawValue) {
                if let parts {
                    $0.form.parts = parts
                    $0.contentLength = contentLength
                    $0.state.generation = ($0.state.generation ?? 0) + 1
                }
                $0.state.outcome = nil
            }
        }
    }

    /// Keeps what `origin`'s server was found to speak, for every later run.
    func writeKnown(_ server: ResumableUpload.KnownServer, for origin: Origin) {
        store.keep(server, for: origin.serialized)
    }

    /// Removes the saved state of a completed upload, once its completion is written.
    func removeState(of id: ID) {
        store.removeState(of: id.rawValue)
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
