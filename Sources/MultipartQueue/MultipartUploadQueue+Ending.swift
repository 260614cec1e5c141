import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The ends of sends, their progress and waits, and an upload's leaving the queue.
extension MultipartUploadQueue {
    /// An upload gone from the queue, which every reader of ``events`` hears, counts as done: the caller gave it up.
    func ended(_ upload: QueueSchedule.Upload) {
        if upload.state != .completed {
            inFlightBytes -= min(inFlightBytes, upload.sent)
            endedBytes += upload.contentLength
        }
        eventSink.yield(.removed(upload.id))
        report()
    }

    /// An upload in flight waits between its own tries until `until`, said at once (`waiting`, and its event), or
    /// (`nil`) tries again. `turn` orders one send's reports, which reach the queue each on a task of its own.
    func inFlight(_ id: ID, waitsUntil until: Date?, turn: Int) {
        if case .waiting(let until)? = schedule.inFlight(id, waitsUntil: until, turn: turn) {
            eventSink.yield(.waiting(id, until: until))
            // The run looks again then: one still parked at its server's outage gate says when it next tries.
            if let sleep, until.addingTimeInterval(QueueSchedule.parkedAfter) < sleep.until { sleep.alarm.ring() }
        }
    }

    /// A server is back: its uploads that wait go now.
    func outageEnded(at origin: Origin) {
        schedule.serverBack(origin)
        wake()
    }

    func sent(_ bytes: UInt64, by id: ID) {
        guard let upload = schedule.uploads[id], upload.isInFlight else { return }
        let length = upload.contentLength
        // Its last byte counts when the server's answer says it has the form: a form handed out whole and refused
        // keeps the queue short of done.
        let counted = min(bytes, length.subtractingSaturated(1))
        if counted > upload.sent {
            inFlightBytes += counted - upload.sent
            schedule.update(id) { $0.sent = counted }
            report()
        }
        // After the progress, which a reader of the event finds up to date.
        eventSink.yield(.progress(id, bytesSent: bytes, of: length))
    }

    /// Sets the progress from what ended and what is in flight: never less than before.
    func report() {
        let completed = Int64(clamping: endedBytes + inFlightBytes)
        if completed > progress.completedUnitCount { progress.completedUnitCount = completed }
    }

    /// Records how an upload's send ended, as the schedule says.
    func finish(_ finished: Finished, session: URLSession, headers: MultipartHeaders?) async {
        cancels[finished.id] = nil
        guard let upload = schedule.uploads[finished.id] else { return }
        let outcome: QueueSchedule.Outcome =
            switch finished.outcome {
            case .completed: .completed
            case .failed(let failure): .failed(reason: failure.reason)
            case .waiting(let outage): .waiting(outage: outage)
            case .stopped: .stopped
            }
        // A server that went whole speaks no draft now, whatever an earlier upload found.
        if finished.speaksNone, let origin = upload.origin?.serialized, knownServers[origin] != nil {
            knownServers[origin] = nil
            store.forgetServer(origin)
        }
        guard let ending = schedule.finished(finished.id, outcome, speaksNone: finished.speaksNone, at: clock.now())
        else {
            return
        }
        let gate = upload.origin.flatMap { gates[$0] }
        switch ending {
        case .forget:
            // A send that completed as the remove came leaves the form to the server, and the remove says so.
            var answer: Answer?
            if case .completed(let completed) = finished.outcome { answer = completed }
            // Its record as the send had it: another process's remove took the one on disk.
            await forget(
                upload, session: session, headers: headers, givingUp: answer == nil, record: finished.record)
            for remover in removers.removeValue(forKey: finished.id) ?? [] {
                remover.resume(returning: answer.map(Removal.completed) ?? .removed)
            }
        case .paused:
            // Its saved state kept: the server's word, and its own, come at the resume.
            _ = try? write([(finished.id, .paused)])
        case .completed:
            // A server that speaks no draft says it is back this way.
            gate?.answered()
            // Written with the next start, in one commit (``recordCompletions(with:)``).
            if case .completed(let answer) = finished.outcome { completing.append((upload, answer)) }
        case .failed(let reason):
            // The upload's own failure, whole; the schedule keeps its words.
            if case .failed(let failure) = finished.outcome {
                fail(finished.id, because: failure)
            } else {
                fail(finished.id, because: Failure(reason: reason))
            }
        case .waiting(let until):
            if case .waiting(outage: true) = outcome { gate?.markOut() } else { gate?.answered() }
            _ = try? write([(finished.id, .stopped)])
            eventSink.yield(.waiting(finished.id, until: until))
        case .pending:
            // Stopped by a cancel: its record no longer names this process.
            _ = try? write([(finished.id, .stopped)])
        }
    }

    /// Writes the uploads that completed since the last write as completed, with `starts` (the next uploads' starts)
    /// in the same transaction, not synced: a power cut that loses one sends the form again, under the same key, and
    /// counts it. Then each completed upload's saved state goes, and its event: a kill before the write resumes it,
    /// and the server says it has the form. The state each start wrote, or found and left, in order; `nil` for an
    /// upload gone.
    ///
    /// - Throws: The starts' failure to write; the completions are written alone then.
    @discardableResult
    func recordCompletions(with starts: [(ID, QueueRecord.Change)] = []) throws -> [QueueRecord.State?] {
        let ended = completing
        completing = []
        let changes = ended.map { upload, answer in (upload.id, QueueRecord.Change.completed(answer.stored)) }
        guard !changes.isEmpty || !starts.isEmpty else { return [] }
        var written: [QueueRecord.State?] = []
        var failure: (any Error)?
        do {
            written = try write(changes + starts)
        } catch {
            failure = error
            if !starts.isEmpty { written = (try? write(changes)) ?? [] }
        }
        for (index, (upload, answer)) in ended.enumerated() {
            if index < written.count, written[index] != nil { store.removeState(of: upload.id.rawValue) }
            inFlightBytes -= min(inFlightBytes, upload.sent)
            endedBytes += upload.contentLength
            report()
            eventSink.yield(.completed(upload.id, answer))
        }
        if let failure, !starts.isEmpty { throw failure }
        return Array(written.dropFirst(changes.count))
    }

    /// Writes the run's `changes` of records in one transaction, synced where one of them is: the run's one way to
    /// change a record. The state each wrote, or found and left, in order; `nil` for an upload gone.
    func write(_ changes: [(id: ID, change: QueueRecord.Change)]) throws -> [QueueRecord.State?] {
        try store.update(
            changes.map { id, change in
                QueueStore.StateChange(id: id.rawValue, declines: change.declines, change: change.apply)
            },
            syncing: changes.contains { $0.change.isSynced })
    }

    /// The upload failed, and its record says so (where it can be read).
    func fail(_ id: ID, because failure: Failure) {
        // What it handed out stays counted, and what it did not keeps the progress short of done.
        if schedule.uploads[id]?.sequence != nil { _ = try? write([(id, .failed(failure))]) }
        eventSink.yield(.failed(id, failure))
    }

    /// Removes `upload`'s record and state; `givingUp` an upload that has not completed deletes its upload resource.
    func forget(
        _ upload: QueueSchedule.Upload, session: URLSession, headers: MultipartHeaders?, givingUp: Bool,
        record known: QueueRecord? = nil
    ) async {
        let record = givingUp ? known ?? (try? record(of: upload)) : nil
        schedule.remove(upload.id)
        store.removeRecord(upload.id.rawValue)
        if let record, let form = try? record.form.rebuilt() {
            var policy = MultipartResumption()
            policy.stateDirectory = store.stateDirectory(of: upload.id.rawValue)
            _ = try? await session.abandonUpload(
                form, with: record.request.urlRequest, resumption: policy, headers: headers)
        }
        store.removeState(of: upload.id.rawValue)
        ended(upload)
    }
}
