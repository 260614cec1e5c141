import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The caller's moves: retry, remove, pause, resume, prioritize, clear.
extension MultipartUploadQueue {
    /// Sends a failed upload again: it goes back to pending, in its place in the queue, with its files as they are
    /// now. A file that changed since the upload was added, or was deleted and put back, is sent as it is now: the
    /// upload starts over with the file's new length and identity, and the next run deletes the server's upload of the
    /// old file (its saved state says where) before it sends the new one. An upload that has not failed is left as it
    /// is.
    ///
    /// - Throws: The file's error, naming the part (``MultipartStream/MultipartError/Reason/fileNotFound(_:)`` for one still
    ///   missing), and the upload stays failed; ``MultipartStream/MultipartError/Reason/stateUnwritable(_:errno:)`` when the record
    ///   cannot be written.
    public func retry(_ id: ID) throws {
        guard let upload = schedule.uploads[id], case .failed = upload.state, var record = try? record(of: upload)
        else { return }
        var changed = false
        for (place, part) in record.form.parts.enumerated() {
            guard let path = part.file else { continue }
            do throws(MultipartError.Reason) {
                let now = try FileIdentity.current(of: URL(fileURLWithPath: path))
                guard now != part.identity else { continue }
                record.form.parts[place].identity = now
                changed = true
            } catch {
                throw MultipartError(error, partIndex: place, partName: part.name)
            }
        }
        var length = record.contentLength
        if changed {
            guard let rebuilt = try record.form.rebuilt()?.contentLength else {
                throw MultipartError(.stateUnwritable(store.url.appendingPathComponent(record.id), errno: EINVAL))
            }
            length = rebuilt
        }
        // The saved state stays: it is of the old file, and the next run, finding the form changed, deletes the
        // server's upload of it and starts over.
        try changeRecord(of: upload) { () throws(MultipartError) in
            try store.rewrite(id.rawValue) {
                if changed {
                    $0.form.parts = record.form.parts
                    $0.contentLength = length
                    // Another form for the server: a key of its own.
                    $0.state.generation = ($0.state.generation ?? 0) + 1
                }
                $0.state.outcome = nil
            }
        }
        if changed {
            progress.totalUnitCount += Int64(clamping: length) - Int64(clamping: record.contentLength)
            let sent = min(upload.sent, length.subtractingSaturated(1))
            inFlightBytes -= min(inFlightBytes, upload.sent - sent)
            schedule.update(id) { ($0.sent, $0.contentLength) = (sent, length) }
        }
        schedule.retry(id)
        eventSink.yield(.retried(id))
        wake()
    }

    /// Removes an upload from the queue and its record from disk, and says whether the server has its form. One that
    /// has not completed is given up: cancelled if it runs, and its upload resource on the server deleted (through
    /// `session`, with `headers`); this returns once its send has stopped, and no byte of it goes again. One that
    /// completed, or completed as the remove came, is the server's: ``Removal/completed(_:)`` says so, and nothing is
    /// deleted there.
    ///
    /// While another process runs the queue, that run stops and deletes the upload, as its own remove would, and this
    /// returns once it has (within a few seconds; ``Removal/asked`` where it has not yet, or at once when the task
    /// that waits is cancelled: the removal stays asked, and that run carries it out).
    @discardableResult
    public func remove(_ id: ID, on session: URLSession = .shared, headers: MultipartHeaders? = nil) async -> Removal {
        guard let upload = schedule.uploads[id] else { return .notInQueue }
        if schedule.stop(id, for: .remove) {
            cancels[id]?.cancel()
            // Its send's end removes it, and says how (``finish(_:session:headers:)``).
            return await withCheckedContinuation { removers[id, default: []].append($0) }
        }
        // This process's run, or none: the lock keeps another from starting while this one removes.
        let lock = isRunning ? nil : try? store.lock()
        if isRunning || lock != nil {
            let removal = await removing(upload, session: session, headers: headers)
            lock?.release()
            return removal
        }
        // Another process runs the queue: it may be sending this upload, with its saved state.
        if (try? change(upload, { $0.removing = true })) != nil {
            let deadline = clock.now().addingTimeInterval(Self.removalWait)
            // The clock's sleep returns at once when cancelled, and would spin here until the deadline: a cancel ends
            // the wait.
            while !Task.isCancelled, clock.now() < deadline, store.listing(of: id.rawValue) != nil {
                await clock.sleep(min(deadline, clock.now().addingTimeInterval(0.02)))
            }
            guard store.listing(of: id.rawValue) == nil else { return .asked }
        }
        if let upload = schedule.remove(id) { ended(upload) }
        switch store.removal(of: id.rawValue) {
        case .completed(let answer)?:
            return .completed(answer.map(Answer.init) ?? Answer(statusCode: nil, headers: [:], body: Data()))
        case .removed?, nil:
            return .removed
        }
    }

    /// Removes `upload`, not in flight, as ``remove(_:on:headers:)`` says.
    func removing(
        _ upload: QueueSchedule.Upload, session: URLSession, headers: MultipartHeaders?
    ) async -> Removal {
        let answer =
            upload.state == .completed ? store.listing(of: upload.id.rawValue)?.answer.map(Answer.init) : nil
        await forget(upload, session: session, headers: headers, givingUp: upload.state != .completed)
        return answer.map(Removal.completed) ?? .removed
    }

    /// How long a remove waits for another process's run to stop and delete the upload: its look for changes, a
    /// cancel, and the server's `DELETE`.
    static let removalWait: TimeInterval = 10

    /// Pauses an upload that has not ended: it stays as it is, in this process and the next, until ``resume(_:)``;
    /// one that runs is stopped, its saved state kept for the resume. A ``run(on:headers:pacing:)`` returns once every
    /// upload is completed, failed or paused. An upload whose ``remove(_:on:headers:)`` is under way is removed all
    /// the same.
    ///
    /// - Throws: ``MultipartStream/MultipartError/Reason/stateUnwritable(_:errno:)`` when the record cannot be written: then nothing
    ///   changed.
    public func pause(_ id: ID) throws {
        // One being removed stays so: its record goes, and its remover waits for the send's end.
        guard let upload = schedule.uploads[id], upload.stopping != .remove else { return }
        switch upload.state {
        case .completed, .failed, .paused: return
        case .pending, .waiting, .running: break
        }
        try change(upload) { $0.paused = true }
        if schedule.pause(id) { cancels[id]?.cancel() }
        eventSink.yield(.paused(id))
    }

    /// Changes the state of `upload`'s record as it stands on disk.
    func change(_ upload: QueueSchedule.Upload, _ change: (inout QueueRecord.State) -> Void) throws {
        try changeRecord(of: upload) { () throws(MultipartError) in try store.update(upload.id.rawValue, change) }
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

    /// Resumes a paused upload: it goes again in its place in the queue, from where the server stands, at once if
    /// the queue runs.
    ///
    /// - Throws: ``MultipartStream/MultipartError/Reason/stateUnwritable(_:errno:)`` when the record cannot be written.
    public func resume(_ id: ID) throws {
        // A pause that has not yet stopped the upload is taken back too, on disk as here.
        guard let upload = schedule.uploads[id], schedule.isPaused(id) else { return }
        try change(upload) { $0.paused = nil }
        if schedule.resume(id) { wake() }
        eventSink.yield(.resumed(id))
    }

    /// Moves an upload to the front of the queue, in this process and the next: it is the next to start (an upload
    /// moved later goes before it).
    ///
    /// - Throws: ``MultipartStream/MultipartError/Reason/stateUnwritable(_:errno:)`` when the record cannot be written.
    public func prioritize(_ id: ID) throws {
        guard let upload = schedule.uploads[id], upload.sequence != nil else { return }
        let priority = schedule.frontPriority
        try change(upload) { $0.priority = priority }
        schedule.prioritize(id)
        eventSink.yield(.prioritized(id))
        wake()
    }

    /// Removes every completed upload from the queue, its record and saved state: what a backup that went through
    /// leaves behind. Uploads in any other state stay.
    public func removeCompleted() async {
        // One pass for all of them: a hundred thousand go at once.
        let removed = schedule.removeCompleted()
        store.removeRecords(removed.map(\.id.rawValue))
        for upload in removed {
            store.removeState(of: upload.id.rawValue)
            eventSink.yield(.removed(upload.id))
        }
    }
}
