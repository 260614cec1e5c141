import Foundation

extension ResumableUpload {
    /// The decisions of a resumable upload (draft-ietf-httpbis-resumable-upload, interop version 6, as Apple's
    /// URLSession and SwiftNIO's `NIOResumableUpload` speak it), without I/O: each answer or failure of a request is
    /// an event, and each event gives the next action. The requests and answers are typed in
    /// `ResumableUpload+Protocol.swift`.
    ///
    /// Support is detected before any part of the form goes out: an `OPTIONS` answered with `Upload-Limit`, then a
    /// creation request with no body and `Upload-Complete: ?0` answered with `Location`. A server that does neither
    /// gets the whole form in one request, as `.stream` sends it, and never a part of it.
    ///
    /// Every answer is untrusted: the upload ends in the application's answer only when the server says
    /// `Upload-Complete: ?1` (or, as older servers do, answers an append with a 2xx and no `Upload-Complete`), an
    /// offset must lie between what the server acknowledged before and what was sent, and a failure after the
    /// upload resource exists deletes it.
    struct StateMachine {
        enum Action {
            /// Send this request.
            case send(Step)
            /// The server does not speak the draft: send the whole form in one request, as `.stream` does.
            case sendWhole
            /// Wait, then send this request.
            case wait(seconds: Double, then: Step)
            /// The last answer is the upload's answer.
            case answer
            /// Give up; delete the upload resource at `deleting` first, when there is one.
            case fail(MultipartError, deleting: URL?)
            /// The saved upload cannot go on: say why, then send this request (deleting the old upload, or creating a
            /// new one).
            case startOver(MultipartResumption.StartOverReason, then: Step)
        }

        enum Event {
            case answered(Answer)
            /// The request failed in a way that another may not: the connection dropped, was reset or timed out.
            case connectionFailed(any Error)
        }

        let contentLength: UInt64
        let policy: MultipartResumption
        /// The caller's request URL: an upload resource on `http:` for an `https:` request is refused.
        let requestURL: URL?
        /// The request under way.
        private(set) var step = Step.detect
        /// Where the upload lives, once created.
        private(set) var location: URL?
        /// The bytes of the form the server said it has.
        private(set) var acknowledged: UInt64 = 0
        /// The most bytes of the form the server can have: none after the creation, which carries none; the end of
        /// the furthest append that went out, or less where fewer bytes were handed out (``bodyHandedOut(upTo:)``).
        private(set) var sent: UInt64 = 0
        /// What the server said it takes, from the `OPTIONS` and creation answers.
        private(set) var limits = Limits()
        /// Retries made so far, of ``MultipartResumption/maximumAttempts``.
        private(set) var retries = 0
        /// The wait before the next retry; back to the initial one after a retry that moved the offset on.
        private var delay: Double
        /// Whether the upload expired once already and was created again.
        private var restarted = false
        /// The upload another process saved, until the server says where it stands.
        private var saved: (location: URL, acknowledged: UInt64)?
        /// A wait drawn from a range: at random (full jitter), or a fixed point of it in tests.
        private let jitter: (ClosedRange<Double>) -> Double

        /// A machine for a new upload, or for one another process saved at `location` with `acknowledged` bytes.
        init(
            contentLength: UInt64,
            policy: MultipartResumption,
            requestURL: URL? = nil,
            resuming saved: (location: URL, acknowledged: UInt64)? = nil,
            jitter: @escaping (ClosedRange<Double>) -> Double = { .random(in: $0) }
        ) {
            self.contentLength = contentLength
            self.policy = policy
            self.requestURL = requestURL
            self.saved = saved
            self.jitter = jitter
            delay = policy.wait(policy.initialDelay)
        }

        /// The form's bytes handed out so far reach `end`: the server cannot have more, whatever an append's length.
        mutating func bodyHandedOut(upTo end: UInt64) {
            sent = min(sent, max(end, acknowledged))
        }

        /// The first action: detect support, or ask a saved upload's offset. The saved upload's server may have any
        /// byte of the form, up to every one: how far the other process got is not known.
        mutating func start() -> Action {
            guard let saved else { return send(.detect) }
            location = saved.location
            acknowledged = saved.acknowledged
            sent = contentLength
            return send(.askOffset)
        }

        /// The upload ran out of the total time the policy allows.
        func outOfTime(after seconds: Double) -> Action {
            let reason = MultipartError.Reason.resumeTimeExceeded(
                seconds: seconds, bytesAcknowledged: acknowledged, contentLength: contentLength)
            return fail(MultipartError(reason))
        }

        private mutating func send(_ step: Step) -> Action {
            self.step = step
            if case .append(_, let end) = step { sent = max(sent, end) }
            return .send(step)
        }

        /// The next action after `event`, the outcome of the request under way.
        mutating func handle(_ event: Event) -> Action {
            switch (step, event) {
            case (.detect, .answered(let answer)):
                return detected(answer)
            case (.create, .answered(let answer)):
                return created(answer)
            case (.append, .answered(let answer)):
                return appended(answer)
            case (.askOffset, .answered(let answer)):
                return offsetAnswered(answer)
            case (.delete, _):
                // The saved upload that could not go on is gone, whatever the answer: a new one starts.
                location = nil
                return send(.create)
            case (.detect, .connectionFailed(let error)), (.create, .connectionFailed(let error)):
                return retry(step, because: error)
            case (.append, .connectionFailed(let error)), (.askOffset, .connectionFailed(let error)):
                return retry(.askOffset, because: error)
            }
        }

        // MARK: Answers

        private mutating func detected(_ answer: Answer) -> Action {
            guard (200..<300).contains(answer.statusCode), let limits = answer.limits else { return .sendWhole }
            self.limits = limits
            if let tooLarge = overMaxSize() { return tooLarge }
            if let minSize = limits.minSize, contentLength < minSize { return .sendWhole }
            return send(.create)
        }

        private mutating func created(_ answer: Answer) -> Action {
            if isTransient(answer) { return retry(.create, because: UnexpectedAnswer(answer, to: .create)) }
            guard (200..<300).contains(answer.statusCode) else {
                // A refusal (a 4xx) is the application's answer; a redirect that was not followed is no answer.
                if (300..<400).contains(answer.statusCode) {
                    return fail(MultipartError(.redirectNotFollowed(statusCode: answer.statusCode, location: nil)))
                }
                return .answer
            }
            // The creation carries none of the form: a server that calls it complete has an empty form.
            guard let location = answer.location, answer.isComplete != true || contentLength == 0 else {
                return fail(MultipartError(.resumptionRefused(statusCode: answer.statusCode)))
            }
            if let refused = refusal(of: location) { return fail(refused) }
            self.location = location
            limits = limits.merging(answer.limits)
            if let tooLarge = overMaxSize() { return tooLarge }
            return acknowledge(answer.offset ?? 0, answer: answer)
        }

        /// The failure of a form over the server's `max-size`, before or after the upload exists.
        private func overMaxSize() -> Action? {
            guard let maxSize = limits.maxSize, contentLength > maxSize else { return nil }
            return fail(MultipartError(.formOverUploadLimit(maxSize: maxSize, contentLength: contentLength)))
        }

        private mutating func appended(_ answer: Answer) -> Action {
            if answer.isComplete == true {
                // The application's answer, whatever its status: the form is complete, unless the server counts
                // another length than the form's.
                if let offset = answer.offset, offset != contentLength {
                    let whole = contentLength...contentLength
                    return fail(MultipartError(.offsetOutOfRange(offset: offset, allowed: whole)))
                }
                return .answer
            }
            if let moved = movedUpload(answer) { return moved }
            if answer.isComplete == false {
                // Not complete, whatever the status: a 2xx with an offset is a partial acceptance to go on from.
                guard let offset = answer.offset else {
                    return retry(.askOffset, because: UnexpectedAnswer(answer, to: step))
                }
                return resume(at: offset, answer: answer)
            }
            switch answer.statusCode {
            case 404, 410:
                return restart(statusCode: answer.statusCode)
            case 413:
                // Too large: never the same size again. Halve what one append carries and ask where the server
                // stands; an append of one byte that is too large is the server's refusal.
                guard case .append(let offset, let end) = step, end - offset > 1 else { return .answer }
                limits.maxAppendSize = (end - offset) / 2
                return retry(.askOffset, because: UnexpectedAnswer(answer, to: step))
            case 409:
                // Conflict: the server says where it stands.
                guard let offset = answer.offset else {
                    return retry(.askOffset, because: UnexpectedAnswer(answer, to: step))
                }
                return resume(at: offset, answer: answer)
            case _ where isTransient(answer):
                return retry(.askOffset, because: UnexpectedAnswer(answer, to: step))
            default:
                if case .append(_, let end) = step, end < contentLength, (200..<300).contains(answer.statusCode) {
                    // A success for a part that was sent as incomplete: where the server stands says how it went.
                    if let offset = answer.offset { return resume(at: offset, answer: answer) }
                    return send(.askOffset)
                }
                // An application answer from a server that does not echo `Upload-Complete`, or a refusal.
                return .answer
            }
        }

        private mutating func offsetAnswered(_ answer: Answer) -> Action {
            if let saved = saved.take() {
                if let startOver = startOver(saved, answer: answer) { return startOver }
            }
            if answer.statusCode == 404 || answer.statusCode == 410 { return restart(statusCode: answer.statusCode) }
            if let moved = movedUpload(answer) { return moved }
            if isTransient(answer) { return retry(.askOffset, because: UnexpectedAnswer(answer, to: .askOffset)) }
            guard (200..<300).contains(answer.statusCode), let offset = answer.offset else {
                return fail(because: UnexpectedAnswer(answer, to: .askOffset))
            }
            if let breach = breach(offset: offset, answer: answer) { return fail(breach) }
            if answer.isComplete == true || offset == contentLength && answer.isComplete == nil {
                // The application has the form (or, with every byte and no word, may have it), but its answer went
                // with the connection.
                return fail(MultipartError(.answerLost(contentLength: contentLength)))
            }
            // Every byte but not complete (`?0`): an empty append with `?1` completes it.
            return acknowledge(offset, answer: answer)
        }

        /// The first answer about a saved upload: start over when the server no longer has it, or has less of it
        /// than it acknowledged before; `nil` to go on as with any answer.
        private mutating func startOver(_ saved: (location: URL, acknowledged: UInt64), answer: Answer) -> Action? {
            if answer.statusCode == 404 || answer.statusCode == 410 {
                (location, acknowledged, sent, step) = (nil, 0, 0, .create)
                return .startOver(.uploadGone(statusCode: answer.statusCode), then: .create)
            }
            guard (200..<300).contains(answer.statusCode), let offset = answer.offset, offset < saved.acknowledged
            else { return nil }
            (acknowledged, sent, step) = (0, 0, .delete)
            return .startOver(.offsetLost(serverOffset: offset, savedOffset: saved.acknowledged), then: .delete)
        }

        // MARK: Offsets

        /// The server has `offset` bytes: send the rest, once the offset is checked.
        private mutating func acknowledge(_ offset: UInt64, answer: Answer) -> Action {
            if let breach = breach(offset: offset, answer: answer) { return fail(breach) }
            if offset > acknowledged { delay = policy.wait(policy.initialDelay) }
            acknowledged = offset
            return send(.append(from: offset, upTo: appendEnd(from: offset)))
        }

        /// Where an append from `offset` ends: the form's end, or sooner when `max-append-size` says so.
        private func appendEnd(from offset: UInt64) -> UInt64 {
            guard let most = limits.maxAppendSize, most > 0 else { return contentLength }
            return offset + min(most, contentLength - offset)
        }

        /// Why `offset` (and the answer's `Upload-Length`) cannot be the server's: an offset never goes down, is
        /// never more than was sent, nor more than the form.
        private func breach(offset: UInt64, answer: Answer) -> MultipartError? {
            if let length = answer.length, length != contentLength {
                return MultipartError(.uploadLengthMismatch(serverLength: length, contentLength: contentLength))
            }
            let allowed = acknowledged...max(acknowledged, min(sent, contentLength))
            guard allowed.contains(offset) else {
                return MultipartError(.offsetOutOfRange(offset: offset, allowed: allowed))
            }
            return nil
        }

        /// The server said where it stands (a conflict, or an answer that the form is incomplete): an answer rather
        /// than a drop, so the rest goes at once from there; a retry, unless the offset moved on.
        private mutating func resume(at offset: UInt64, answer: Answer) -> Action {
            if offset <= acknowledged, let giveUp = countRetry(because: UnexpectedAnswer(answer, to: step)) {
                return giveUp
            }
            return acknowledge(offset, answer: answer)
        }

        // MARK: Where the upload lives

        /// A 307 or 308 from the upload resource moves it (refused as a `Location` would be); any other redirect
        /// that was not followed ends the upload. Never the upload's answer.
        private mutating func movedUpload(_ answer: Answer) -> Action? {
            guard (300..<400).contains(answer.statusCode) else { return nil }
            guard answer.statusCode == 307 || answer.statusCode == 308, let moved = answer.location else {
                return fail(MultipartError(.redirectNotFollowed(statusCode: answer.statusCode, location: nil)))
            }
            if let refused = refusal(of: moved) { return fail(refused) }
            if let giveUp = countRetry(because: UnexpectedAnswer(answer, to: step)) { return giveUp }
            location = moved
            return send(.askOffset)
        }

        /// Why the upload cannot live at `url`: plain `http:` for an `https:` request.
        private func refusal(of url: URL) -> MultipartError? {
            let scheme = url.scheme?.lowercased()
            guard scheme == "https" || scheme == "http" && requestURL?.scheme?.lowercased() != "https" else {
                return MultipartError(.insecureUploadLocation(url))
            }
            return nil
        }

        // MARK: Retries

        /// 408, 429, 503 and other 5xx: the server may take the request later.
        private func isTransient(_ answer: Answer) -> Bool {
            answer.statusCode == 408 || answer.statusCode == 429 || (500..<600).contains(answer.statusCode)
        }

        /// Counts a retry; the failure to give up with when the retries are spent.
        private mutating func countRetry(because failure: any Error) -> Action? {
            guard retries < policy.maximumAttempts else { return fail(because: failure) }
            retries += 1
            return nil
        }

        /// Gives up, with where the upload stood and the last failure beneath.
        private func fail(because failure: any Error) -> Action {
            let reason = MultipartError.Reason.resumeFailed(
                retries: retries, bytesAcknowledged: acknowledged, contentLength: contentLength)
            return fail(MultipartError(reason, underlying: failure))
        }

        /// Gives up with `error`, deleting the upload resource if there is one.
        private func fail(_ error: MultipartError) -> Action {
            .fail(error, deleting: location)
        }

        /// Another try at `step` after the backoff (or the server's `Retry-After`), unless the retries are spent.
        private mutating func retry(_ step: Step, because failure: any Error) -> Action {
            if let giveUp = countRetry(because: failure) { return giveUp }
            // The server's own wait as it is (bounded); else one drawn up to the ceiling.
            let retryAfter = (failure as? UnexpectedAnswer)?.retryAfter
            let wait = retryAfter.map(policy.wait) ?? jitter(min(policy.wait(policy.initialDelay), delay)...delay)
            delay = policy.wait(delay * 2)
            self.step = step
            return .wait(seconds: wait, then: step)
        }

        /// The upload expired: create it again from byte 0, once.
        private mutating func restart(statusCode: Int) -> Action {
            guard !restarted else { return fail(MultipartError(.uploadExpired(statusCode: statusCode))) }
            restarted = true
            acknowledged = 0
            sent = 0
            location = nil
            return send(.create)
        }
    }

    /// An answer of the server that a resumable upload could not go on from: the underlying error of its failure.
    struct UnexpectedAnswer: Error, CustomStringConvertible, LocalizedError {
        let description: String
        /// The answer's `Retry-After`, in seconds.
        var retryAfter: Double?

        init(_ description: String) {
            self.description = description
        }

        init(_ answer: Answer, to step: Step) {
            var text = "\(step.name) answered \(answer.statusCode)"
            if let isComplete = answer.isComplete { text += isComplete ? ", complete" : ", incomplete" }
            if let offset = answer.offset { text += " at \(offset)" }
            description = text
            retryAfter = answer.retryAfter
        }

        var errorDescription: String? { description }
    }
}
