import Foundation
import MultipartStream

/// The events the queue meets, as the schedule takes them: each changes the schedule and returns the actions the
/// queue's actor carries out, in order (``MultipartUploadQueue/perform(_:known:on:)``): what to write, which send to
/// cancel, which upload to forget, what to tell and whom to answer, and when to look again. The schedule decides; the
/// actor asks, then acts, and decides nothing of an upload itself.
extension QueueSchedule {
    /// What the queue's actor does for an event.
    enum Action: Equatable {
        /// Write `change` of the upload's record.
        case write(ID, QueueRecord.Change)
        /// Stop the upload's send: its end comes as ``finished(_:_:speaksNone:at:)``.
        case cancel(ID)
        /// Tell every reader of the queue's events, once the progress counts what it says.
        case emit(MultipartUploadQueue.Event)
        /// The upload left the schedule: its record and saved state go, and, `givingUp` one that never completed, its
        /// upload resource on the server.
        case forget(Upload, givingUp: Bool)
        /// The completed uploads `ids` left the schedule: their records go in one transaction, and their saved state.
        case clear([ID])
        /// Answer the removes that wait for the upload's send to end.
        case answerRemovers(ID, MultipartUploadQueue.Removal)
        /// Write the upload's completion with the next starts, in one commit; then its saved state goes and its
        /// event is told (``MultipartUploadQueue/recordCompletions(with:)``).
        case complete(ID, MultipartUploadQueue.Answer)
        /// The server answered: an outage of it is over.
        case serverAnswered(Origin)
        /// The server gave no answer: its uploads wait out an outage together.
        case serverOut(Origin)
        /// The server turned out to speak no draft: what an earlier upload found of it goes.
        case speaksNone(Origin)
        /// Look again by then: the run's sleep ends where it would sleep past it; `nil`, now.
        case wake(by: Date?)
    }

    /// How one send of an upload ended, as the upload layer says it (``MultipartStream/FailureMeaning``): the one
    /// verdict, read nowhere else.
    enum Verdict: Equatable, Sendable {
        /// The server has the form, and answered so.
        case completed(MultipartUploadQueue.Answer)
        /// The upload is over without it.
        case failed(MultipartUploadQueue.Failure)
        /// The network (`outage`: no answer) or a busy server failed it for now.
        case waiting(outage: Bool)
        /// Cancelled: the upload is kept, for the next run.
        case stopped
    }

    // MARK: Uploads come and go

    /// Uploads added, in this process or another, their records written: each joins, and is told.
    mutating func added(_ new: [Upload]) -> [Action] {
        var actions: [Action] = []
        for upload in new where uploads[upload.id] == nil {
            add(upload)
            actions.append(.emit(.added(upload.id)))
        }
        return actions.isEmpty ? [] : actions + [.wake(by: nil)]
    }

    /// The upload `id`, not in flight, leaves the queue now: its record goes (`recordGone`: another process removed
    /// it, and deleted what the server held), and what the server holds of a form it never completed.
    mutating func removeNow(_ id: ID, recordGone: Bool = false) -> [Action] {
        guard let upload = remove(id) else { return [] }
        let forget: [Action] = recordGone ? [] : [.forget(upload, givingUp: upload.state != .completed)]
        return forget + [.emit(.removed(id))]
    }

    /// The caller's removal of `id`: one in flight is stopped, and its send's end removes it; `nil` for one that is
    /// not in flight, which the caller removes at once (``removeNow(_:recordGone:)``), where it may.
    mutating func removeAsked(_ id: ID) -> [Action]? {
        stop(id, for: .remove) ? [.cancel(id)] : nil
    }

    /// Every completed upload leaves the queue, in one pass.
    mutating func clearCompleted() -> [Action] {
        let cleared = removeCompleted().map(\.id)
        return cleared.isEmpty ? [] : [.clear(cleared)] + cleared.map { .emit(.removed($0)) }
    }

    // MARK: The caller's moves

    /// A move the caller makes of an upload, written to its record first.
    enum Move: Equatable {
        case pause, resume, prioritize
    }

    /// What the caller's `move` of `id` writes to its record before ``take(_:_:)`` takes it; `nil` where it changes
    /// nothing. A pause of an upload whose removal is under way changes nothing: its remover waits for that.
    func change(for move: Move, of id: ID) -> QueueRecord.Change? {
        guard let upload = uploads[id] else { return nil }
        switch move {
        case .pause:
            // One pausing already, or being removed, stays so.
            guard upload.stopping == nil else { return nil }
            switch upload.state {
            case .completed, .failed, .paused: return nil
            case .pending, .running, .waiting: return .pauseAsked
            }
        case .resume:
            return isPaused(id) ? .resumeAsked : nil
        case .prioritize:
            return upload.sequence == nil ? nil : .moved(priority: frontPriority)
        }
    }

    /// The caller's `move` of `id`, written (by this process, or another whose write the run found).
    mutating func take(_ move: Move, _ id: ID) -> [Action] {
        guard change(for: move, of: id) != nil else { return [] }
        switch move {
        case .pause:
            return (pause(id) ? [.cancel(id)] : []) + [.emit(.paused(id))]
        case .resume:
            return (resume(id) ? [.wake(by: nil)] : []) + [.emit(.resumed(id))]
        case .prioritize:
            prioritize(id)
            return [.emit(.prioritized(id)), .wake(by: nil)]
        }
    }

    /// A failed upload was retried, its record rewritten, its form now `contentLength` long where a file changed.
    mutating func retried(_ id: ID, contentLength: UInt64? = nil) -> [Action] {
        guard case .failed? = uploads[id]?.state else { return [] }
        retry(id, contentLength: contentLength)
        return [.emit(.retried(id)), .wake(by: nil)]
    }

    // MARK: What another process wrote

    /// An upload as another process (or this one) last wrote it, which the run found: what the caller's calls there
    /// would have done here.
    mutating func seen(_ summary: QueueRecord.Summary, origin: Origin?) -> [Action] {
        let id = ID(rawValue: summary.id)
        guard let upload = uploads[id] else {
            return added([Upload(summary, origin: origin)])
        }
        var actions: [Action] = []
        if (summary.priority ?? 0) > upload.rank.priority { actions += take(.prioritize, id) }
        switch summary.standing {
        case .removing:
            actions += removeAsked(id) ?? removeNow(id)
        case .paused:
            actions += take(.pause, id)
        case .pending where upload.isInFlight:
            // Its own send's write, or a resume of a pause not yet taken: the send's end decides.
            break
        case .pending:
            actions += isPaused(id) ? take(.resume, id) : retried(id, contentLength: summary.contentLength)
        case .completed, .failed:
            break
        }
        return actions
    }

    /// Another process removed the upload `id`, and deleted what the server held of it.
    mutating func seenRemoved(_ id: ID) -> [Action] {
        removeAsked(id) ?? removeNow(id, recordGone: true)
    }

    // MARK: Sends

    /// Why a start the schedule made (``next(at:out:)``) did not go: another process paused the upload, asked for its
    /// removal, or removed it, since the run last looked.
    enum Decline: Equatable {
        case paused, removalAsked, gone
    }

    /// The start of `id` was declined: the upload is paused, removed, or gone, and it is told.
    mutating func declined(_ id: ID, because decline: Decline, at now: Date) -> [Action] {
        guard uploads[id]?.isInFlight == true else { return [] }
        switch decline {
        case .paused, .removalAsked:
            _ = stop(id, for: .pause)
            _ = end(id, .stopped, speaksNone: false, at: now)
            return decline == .paused ? [.emit(.paused(id))] : removeNow(id)
        case .gone:
            _ = stop(id, for: .remove)
            _ = end(id, .stopped, speaksNone: false, at: now)
            return [.emit(.removed(id))]
        }
    }

    /// The upload `id` in flight handed out `bytes` of its form.
    mutating func sent(_ bytes: UInt64, by id: ID) -> [Action] {
        guard let length = handedOut(bytes, by: id) else { return [] }
        return [.emit(.progress(id, bytesSent: bytes, of: length))]
    }

    /// The upload `id` in flight waits between its own tries until `until`, or (`nil`) tries again; `turn` orders
    /// one send's reports. Looked at again then: one still parked at its server's outage gate says when it next tries.
    mutating func waits(_ id: ID, until: Date?, turn: Int) -> [Action] {
        guard case .waiting(let until)? = inFlight(id, waitsUntil: until, turn: turn) else { return [] }
        return [.emit(.waiting(id, until: until)), .wake(by: until.addingTimeInterval(Self.parkedAfter))]
    }

    /// The send of `id` ended as `verdict` says at `now`; `speaksNone` when its server turned out to speak no draft.
    mutating func finished(_ id: ID, _ verdict: Verdict, speaksNone: Bool, at now: Date) -> [Action] {
        guard let upload = uploads[id] else { return [] }
        // A server that went whole speaks no draft now, whatever an earlier upload found.
        var actions: [Action] = speaksNone ? upload.origin.map { [.speaksNone($0)] } ?? [] : []
        guard let ending = end(id, verdict, speaksNone: speaksNone, at: now) else { return actions }
        switch (ending, verdict) {
        case (.forget, _):
            // A send that completed as the remove came leaves the form to the server, and the remove says so.
            var answer: MultipartUploadQueue.Answer?
            if case .completed(let completed) = verdict { answer = completed }
            actions += [.forget(upload, givingUp: answer == nil), .emit(.removed(id))]
            actions.append(.answerRemovers(id, answer.map(MultipartUploadQueue.Removal.completed) ?? .removed))
        case (.paused, _):
            // Its saved state kept: the server's word, and its own, come at the resume.
            actions.append(.write(id, .paused))
        case (.completed, .completed(let answer)):
            // A server that speaks no draft says it is back this way.
            actions += upload.origin.map { [.serverAnswered($0)] } ?? []
            actions.append(.complete(id, answer))
        case (.failed(let reason), _):
            var failure = MultipartUploadQueue.Failure(reason: reason)
            if case .failed(let whole) = verdict { failure = whole }
            if upload.sequence != nil { actions.append(.write(id, .failed(failure))) }
            actions.append(.emit(.failed(id, failure)))
        case (.waiting(let until), _):
            if let origin = upload.origin {
                actions.append(verdict == .waiting(outage: true) ? .serverOut(origin) : .serverAnswered(origin))
            }
            actions += [.write(id, .stopped), .emit(.waiting(id, until: until))]
        case (.pending, _), (.completed, _):
            // Stopped by a cancel: its record no longer names this process.
            actions.append(.write(id, .stopped))
        }
        return actions
    }

    /// The waits whose time came by `now` (``due(at:out:)``), each upload that waits on told.
    mutating func dueWaits(at now: Date, out: Set<Origin>) -> [Action] {
        due(at: now, out: out).map { .emit(.waiting($0, until: $1)) }
    }

    /// `origin` answered after an outage: its uploads that wait go now.
    mutating func back(_ origin: Origin) -> [Action] {
        serverBack(origin)
        return [.wake(by: nil)]
    }
}

extension QueueSchedule.Upload {
    /// The upload a record's summary says, sent to `origin`.
    init(_ summary: QueueRecord.Summary, origin: Origin?) {
        self.init(
            id: QueueSchedule.ID(rawValue: summary.id), sequence: summary.sequence, key: summary.key,
            priority: summary.priority ?? 0, origin: origin, state: summary.standing.scheduled,
            contentLength: summary.contentLength)
    }
}
