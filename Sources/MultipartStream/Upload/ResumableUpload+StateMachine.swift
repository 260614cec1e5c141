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
            case fail(MultipartError)
        }

        enum Event {
            case answered(Answer)
            /// The request failed in a way that another may not: the connection dropped, was reset or timed out.
            case connectionFailed(any Error)
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
                    return .fail(MultipartError(.resumptionRefused(statusCode: answer.statusCode)))
                }
                self.location = location
                return acknowledge(answer.offset ?? 0)
            case (.append, .answered(let answer)) where answer.statusCode == 409:
                // Conflict: the server says where it stands.
                guard let offset = answer.offset else {
                    return retry(.askOffset, because: UnexpectedAnswer("409 without Upload-Offset"))
                }
                return resume(at: offset, because: UnexpectedAnswer("409 Conflict at \(offset)"))
            case (.append, .answered(let answer)):
                if answer.statusCode == 404 || answer.statusCode == 410 {
                    return restart(statusCode: answer.statusCode)
                }
                // The application's answer, unless the server says the form is still incomplete.
                guard answer.isComplete == false, let offset = answer.offset else { return .answer }
                return resume(at: offset, because: UnexpectedAnswer("incomplete at \(offset)"))
            case (.askOffset, .answered(let answer)):
                if answer.statusCode == 404 || answer.statusCode == 410 {
                    return restart(statusCode: answer.statusCode)
                }
                guard (200..<300).contains(answer.statusCode), let offset = answer.offset else {
                    return fail(because: UnexpectedAnswer("HEAD answered \(answer.statusCode)"))
                }
                if answer.isComplete == true || offset == contentLength {
                    // Everything arrived, but the answer to it went with the connection.
                    return .fail(MultipartError(.answerLost(contentLength: contentLength)))
                }
                return acknowledge(offset)
            case (.detect, .connectionFailed(let error)), (.create, .connectionFailed(let error)):
                return retry(step, because: error)
            case (.append, .connectionFailed(let error)), (.askOffset, .connectionFailed(let error)):
                return retry(.askOffset, because: error)
            }
        }

        /// The server has `offset` bytes: send the rest.
        private mutating func acknowledge(_ offset: UInt64) -> Action {
            guard offset <= contentLength else {
                acknowledged = offset
                return fail(because: UnexpectedAnswer("the server has more bytes than the form"))
            }
            if offset > acknowledged { delay = policy.initialDelay }
            acknowledged = offset
            return send(.append(from: offset))
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
            return .fail(MultipartError(reason, underlying: failure))
        }

        /// The server said where it stands (a conflict, or an answer that the form is incomplete): an answer rather
        /// than a drop, so the rest goes at once from there, as a retry.
        private mutating func resume(at offset: UInt64, because failure: any Error) -> Action {
            if let giveUp = countRetry(because: failure) { return giveUp }
            return acknowledge(offset)
        }

        /// Another try at `step` after the backoff, unless the retries are spent.
        private mutating func retry(_ step: Step, because failure: any Error) -> Action {
            if let giveUp = countRetry(because: failure) { return giveUp }
            let wait = delay
            delay = min(delay * 2, policy.maximumDelay)
            self.step = step
            return .wait(seconds: wait, then: step)
        }

        /// The upload expired: create it again from byte 0, once.
        private mutating func restart(statusCode: Int) -> Action {
            guard !restarted else { return .fail(MultipartError(.uploadExpired(statusCode: statusCode))) }
            restarted = true
            acknowledged = 0
            location = nil
            return send(.create)
        }
    }

    /// An answer of the server that a resumable upload could not go on from: the underlying error of its failure.
    struct UnexpectedAnswer: Error, CustomStringConvertible, LocalizedError {
        let description: String

        init(_ description: String) {
            self.description = description
        }

        var errorDescription: String? { description }
    }
}
