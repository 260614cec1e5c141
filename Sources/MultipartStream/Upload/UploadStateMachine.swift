import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The life of one upload across its tasks, without I/O: what it does when a redirect is decided, a challenge is
/// given up, the caller cancels, or a task ends, and what the caller is told at the end.
struct UploadStateMachine {
    enum State {
        /// A task sends the form; `resends` tasks were started after the first.
        case sending(resends: Int)
        /// The current task was stopped so that the form goes again, with this request, once it ends.
        case awaitingResend(URLRequest, resends: Int)
        /// The caller cancelled; the task ends by itself.
        case cancelled
        /// The caller has been told.
        case finished
    }

    /// How a task ended, as the upload saw it.
    struct TaskEnd {
        var error: (any Error)?
        var response: URLResponse?
        /// The response's body.
        var data = Data()
        /// Body bytes handed to URLSession by the task's last stream (or that it reported sent from a file).
        var bodyBytesSent: UInt64 = 0
        /// The bytes the task's body holds, and the byte of the form it starts at.
        var bodyLength: UInt64 = 0
        var bodyStart: UInt64 = 0
        var contentLength: UInt64 = 0
        /// Why a body stream failed, naming the part; URLSession only says the upload was aborted.
        var streamFailure: (any Error)?
        /// Why the body could not be prepared (a temporary file that could not be written).
        var bodyFailure: MultipartError?
    }

    enum Action {
        /// Send the form again with this request, on a new task.
        case startTask(URLRequest)
        /// Tell the caller.
        case finish(Result<(Data, URLResponse), any Error>)
        /// Nothing: the caller has been told already.
        case none
    }

    private(set) var state = State.sending(resends: 0)
    /// Why the upload stopped its task (a redirect it could not follow).
    private var stopReason: MultipartError?
    /// Whether the upload cancelled a challenge for want of a credential: the 401 or 407 is then the answer.
    private var cancelledChallenge = false

    /// Whether a redirect may be followed by sending the form again: the upload owns its tasks and has resends left.
    func canResend(owningTasks: Bool) -> Bool {
        guard owningTasks, case .sending(let resends) = state else { return false }
        return resends < RedirectPolicy.maximumResends
    }

    /// Records a decided redirect.
    mutating func redirected(_ decision: RedirectPolicy.Decision) {
        guard case .sending(let resends) = state else { return }
        switch decision {
        case .resend(let request): state = .awaitingResend(request, resends: resends)
        case .fail(let error): stopReason = error
        case .follow, .keepResponse: break
        }
    }

    /// Records a challenge the upload cancelled for want of a credential.
    mutating func gaveUpChallenge() {
        cancelledChallenge = true
    }

    /// The caller cancelled. Returns whether this is the first cancel of a running upload.
    mutating func cancel() -> Bool {
        switch state {
        case .sending, .awaitingResend:
            state = .cancelled
            return true
        case .cancelled, .finished:
            return false
        }
    }

    /// The current task ended: send the form again, or tell the caller.
    mutating func taskEnded(_ end: TaskEnd) -> Action {
        switch state {
        case .awaitingResend(let request, let resends) where end.error == nil && end.streamFailure == nil:
            state = .sending(resends: resends + 1)
            return .startTask(request)
        case .finished:
            return .none
        case .sending, .awaitingResend, .cancelled:
            let result = verdict(end)
            state = .finished
            return .finish(result)
        }
    }

    /// A resend could not start (the caller's session is gone): tell the caller why.
    mutating func resendFailed(_ error: MultipartError) -> Action {
        if case .finished = state { return .none }
        state = .finished
        return .finish(.failure(error))
    }

    /// What the caller is told: the first reason in this order that applies.
    private func verdict(_ end: TaskEnd) -> Result<(Data, URLResponse), any Error> {
        if case .cancelled = state { return .failure(URLError(.cancelled)) }
        if let bodyFailure = end.bodyFailure { return .failure(bodyFailure) }
        if let streamFailure = end.streamFailure { return .failure(streamFailure) }
        if let stopReason { return .failure(stopReason) }
        let http = end.response as? HTTPURLResponse
        if let http, end.error != nil, cancelledChallenge, http.statusCode == 401 || http.statusCode == 407 {
            // The upload cancelled the challenge for want of a credential: the response is the answer, as Apple's
            // URLSession gives it. Any other error after a 401's headers (a reset) is a failure.
            return .success((end.data, http))
        }
        if let error = end.error { return .failure(error) }
        if let http, (200..<300).contains(http.statusCode), end.bodyBytesSent < end.bodyLength {
            // The server cannot have read bytes it was never given: it answered without the form. After a 301-303
            // the count is the first request's (the GET reads no stream): a server that redirected without reading
            // the form never got it either.
            let reason = MultipartError.Reason.answeredBeforeBodySent(
                statusCode: http.statusCode, bytesSent: end.bodyStart + end.bodyBytesSent,
                contentLength: end.contentLength)
            return .failure(MultipartError(reason))
        }
        if let response = end.response { return .success((end.data, response)) }
        return .failure(URLError(.badServerResponse))
    }
}
