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
        try writeRetry(of: upload, parts: changed ? record.form.parts : nil, contentLength: length)
        performNow(schedule.retried(id, contentLength: length))
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
        await removeLetsGo()
        guard let upload = schedule.uploads[id] else { return .notInQueue }
        if let stopping = schedule.removeAsked(id) {
            performNow(stopping)
            // Its send's end removes it, and says how (``QueueSchedule/finished(_:_:speaksNone:at:)``).
            return await withCheckedContinuation { removers[id, default: []].append($0) }
        }
        // This process's run, or none: the lock keeps another from starting while this one removes.
        let lock = isRunning ? nil : try? store.lock()
        if isRunning || lock != nil {
            if lock != nil { removeHolds.held = true }
            let removal = await removeNow(upload, on: (session, headers))
            if let lock {
                lock.release()
                let waiting = removeHolds.waiting
                removeHolds = (false, [])
                for waiter in waiting { waiter.resume() }
            }
            return removal
        }
        // Another process runs the queue: it may be sending this upload, with its saved state.
        if (try? writeMove(.removalAsked, of: upload)) != nil {
            let deadline = clock.now().addingTimeInterval(Self.removalWait)
            // The clock's sleep returns at once when cancelled, and would spin here until the deadline: a cancel ends
            // the wait.
            while !Task.isCancelled, clock.now() < deadline, store.listing(of: id.rawValue) != nil {
                await clock.sleep(min(deadline, clock.now().addingTimeInterval(0.02)))
            }
            guard store.listing(of: id.rawValue) == nil else { return .asked }
        }
        // Removed there, or gone: what the server held of it went with it.
        performNow(schedule.removeNow(id, recordGone: true))
        switch store.removal(of: id.rawValue) {
        case .completed(let answer)?:
            return .completed(answer.map(Answer.init) ?? Answer(statusCode: nil, headers: [:], body: Data()))
        case .removed?, nil:
            return .removed
        }
    }

    /// Returns once no remove of this process holds the queue's lock: it holds it across the server's `DELETE`, and
    /// a run or a remove that came meanwhile is this process's, not another's.
    func removeLetsGo() async {
        while removeHolds.held {
            await withCheckedContinuation { removeHolds.waiting.append($0) }
        }
    }

    /// Removes `upload`, not in flight, as ``remove(_:on:headers:)`` says, what the server holds of a form it never
    /// completed deleted through `session`.
    func removeNow(_ upload: QueueSchedule.Upload, on session: (URLSession, MultipartHeaders?)) async -> Removal {
        let answer =
            upload.state == .completed ? store.listing(of: upload.id.rawValue)?.answer.map(Answer.init) : nil
        await perform(schedule.removeNow(upload.id), on: session)
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
        try move(.pause, id)
    }

    /// Writes the caller's `move` of `id` to its record, then carries it out as the schedule says.
    private func move(_ move: QueueSchedule.Move, _ id: ID) throws {
        guard let upload = schedule.uploads[id], let change = schedule.change(for: move, of: id) else { return }
        try writeMove(change, of: upload)
        performNow(schedule.take(move, id))
    }

    /// Resumes a paused upload: it goes again in its place in the queue, from where the server stands, at once if
    /// the queue runs.
    ///
    /// - Throws: ``MultipartStream/MultipartError/Reason/stateUnwritable(_:errno:)`` when the record cannot be written.
    public func resume(_ id: ID) throws {
        // A pause that has not yet stopped the upload is taken back too, on disk as here.
        try move(.resume, id)
    }

    /// Moves an upload to the front of the queue, in this process and the next: it is the next to start (an upload
    /// moved later goes before it).
    ///
    /// - Throws: ``MultipartStream/MultipartError/Reason/stateUnwritable(_:errno:)`` when the record cannot be written.
    public func prioritize(_ id: ID) throws {
        try move(.prioritize, id)
    }

    /// Removes every completed upload from the queue, its record and saved state: what a backup that went through
    /// leaves behind. Uploads in any other state stay.
    public func removeCompleted() async {
        // One pass for all of them: a hundred thousand go at once.
        performNow(schedule.clearCompleted())
    }
}
