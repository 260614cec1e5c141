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
            /// Give up.
            case fail(MultipartError.Reason)
        }

        enum Event: Equatable {
            case answered(Answer)
            /// The request failed in a way that another may not: the connection dropped, was reset or timed out.
            case connectionFailed(description: String)
        }

        let contentLength: UInt64
        let policy: MultipartResumption
        /// The request under way.
        private(set) var step = Step.detect
        /// Where the upload lives, once created.
        private(set) var location: URL?
        /// The bytes of the form the server said it has.
        private(set) var acknowledged: UInt64 = 0
        /// Retries made so far, of ``MultipartResumption/maximumAttempts``.
        private(set) var retries = 0
        /// The wait before the next retry; back to the initial one after a retry that moved the offset on.
        private var delay: Double
        /// Whether the upload expired once already and was created again.
        private var restarted = false

        init(contentLength: UInt64, policy: MultipartResumption) {
            self.contentLength = contentLength
            self.policy = policy
            delay = policy.initialDelay
        }

        /// The first action.
        mutating func start() -> Action {
            send(.detect)
        }

        private mutating func send(_ step: Step) -> Action {
            self.step = step
            return .send(step)
        }

        /// The next action after `event`, the outcome of the request under way.
        mutating func handle(_ event: Event) -> Action {
            switch (step, event) {
            case (.detect, .answered(let answer)):
                let speaksDraft = (200..<300).contains(answer.statusCode) && answer.hasUploadLimit
                return speaksDraft ? send(.create) : .sendWhole
            case (.create, .answered(let answer)):
                guard (200..<300).contains(answer.statusCode) else { return .answer }
                guard let location = answer.location, answer.isComplete == false else {
                    // It said it speaks the draft, then answered the creation as a plain request: it has an empty form.
                    return .fail(.resumptionRefused(statusCode: answer.statusCode))
                }
                self.location = location
                return acknowledge(answer.offset ?? 0)
            case (.append, .answered(let answer)) where answer.statusCode == 409:
                // Conflict: the server says where it stands.
                guard let offset = answer.offset else { return retry(.askOffset, because: "409 without Upload-Offset") }
                return resume(at: offset, because: "409 Conflict at \(offset)")
            case (.append, .answered(let answer)):
                if answer.statusCode == 404 || answer.statusCode == 410 {
                    return restart(statusCode: answer.statusCode)
                }
                // The application's answer, unless the server says the form is still incomplete.
                guard answer.isComplete == false, let offset = answer.offset else { return .answer }
                return resume(at: offset, because: "incomplete at \(offset)")
            case (.askOffset, .answered(let answer)):
                if answer.statusCode == 404 || answer.statusCode == 410 {
                    return restart(statusCode: answer.statusCode)
                }
                guard (200..<300).contains(answer.statusCode), let offset = answer.offset else {
                    return .fail(
                        .resumeFailed(
                            retries: retries, bytesAcknowledged: acknowledged, contentLength: contentLength,
                            underlying: "HEAD answered \(answer.statusCode)"))
                }
                if answer.isComplete == true || offset == contentLength {
                    // Everything arrived, but the answer to it went with the connection.
                    return .fail(.answerLost(contentLength: contentLength))
                }
                return acknowledge(offset)
            case (.detect, .connectionFailed(let description)), (.create, .connectionFailed(let description)):
                return retry(step, because: description)
            case (.append, .connectionFailed(let description)), (.askOffset, .connectionFailed(let description)):
                return retry(.askOffset, because: description)
            }
        }

        /// The server has `offset` bytes: send the rest.
        private mutating func acknowledge(_ offset: UInt64) -> Action {
            guard offset <= contentLength else {
                return .fail(
                    .resumeFailed(
                        retries: retries, bytesAcknowledged: offset, contentLength: contentLength,
                        underlying: "the server has more bytes than the form"))
            }
            if offset > acknowledged { delay = policy.initialDelay }
            acknowledged = offset
            return send(.append(from: offset))
        }

        /// Counts a retry; the failure to give up with when the retries are spent.
        private mutating func countRetry(because description: String) -> Action? {
            guard retries < policy.maximumAttempts else {
                return .fail(
                    .resumeFailed(
                        retries: retries, bytesAcknowledged: acknowledged, contentLength: contentLength,
                        underlying: description))
            }
            retries += 1
            return nil
        }

        /// The server said where it stands (a conflict, or an answer that the form is incomplete): an answer rather
        /// than a drop, so the rest goes at once from there, as a retry.
        private mutating func resume(at offset: UInt64, because description: String) -> Action {
            if let giveUp = countRetry(because: description) { return giveUp }
            return acknowledge(offset)
        }

        /// Another try at `step` after the backoff, unless the retries are spent.
        private mutating func retry(_ step: Step, because description: String) -> Action {
            if let giveUp = countRetry(because: description) { return giveUp }
            let wait = delay
            delay = min(delay * 2, policy.maximumDelay)
            self.step = step
            return .wait(seconds: wait, then: step)
        }

        /// The upload expired: create it again from byte 0, once.
        private mutating func restart(statusCode: Int) -> Action {
            guard !restarted else { return .fail(.uploadExpired(statusCode: statusCode)) }
            restarted = true
            acknowledged = 0
            location = nil
            return send(.create)
        }
    }
}
