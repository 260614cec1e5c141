import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What happened to one request that carried (part of) a form, as values: what every path that sends a form
/// (an upload's own tasks, a caller's task, ``MultipartStreamedUploadDelegate``) hands to ``verdict``, the one
/// judgement of a finished request.
struct RequestOutcome {
    /// The body's own failure: a part that failed while streaming, or the temporary body that could not be written.
    var bodyFailure: MultipartError?
    /// Why the upload stopped the request itself: a redirect it could not follow, the headers hook's error.
    var stopReason: (any Error)?
    /// The caller cancelled.
    var isCancelled = false
    /// The response, where one arrived.
    var response: URLResponse?
    /// URLSession's error.
    var error: (any Error)?
    /// A challenge was cancelled for want of a credential: the 401 or 407 is the answer, as Apple's URLSession gives
    /// it, though Linux URLSession ends the task as cancelled.
    var gaveUpChallenge = false
    /// The form's bytes handed out when the answer's head arrived (else by the task's end), from the form's first
    /// byte: a server cannot have read more before it answered.
    var handedOut: UInt64 = 0
    /// Where the request's body ends in the form; `nil` for a body of unknown length.
    var bodyEnd: UInt64?
    /// For a body of unknown length: whether it had handed out its last byte when the answer's head arrived.
    var handedOutLastByte = false
    /// The form's length, as an early answer's error names it.
    var formLength: UInt64?
    /// Whether a 2xx before the whole body is an answer all the same (an append that the server keeps part of).
    var takesEarlySuccess = false
    /// The answer's body, or as much of it as its bound lets memory hold.
    var received = Data()
    /// The upload stopped the task itself once it had all of the answer it needs (a refused status's prefix): the
    /// task's error is that stop.
    var cutShort = false
    /// The bound the upload's own answer passed in memory, where the caller would otherwise get it cut short.
    var passedLimit: Int?
    /// The answer is the upload's, and the caller does not accept its status (`acceptableStatusCodes`).
    var refusesStatus = false

    /// Whether the body was cut short when the answer came.
    var isShort: Bool {
        bodyEnd.map { handedOut < $0 } ?? !handedOutLastByte
    }

    /// What the caller is told: the first reason in this order that applies. The body's failure names the part and
    /// comes before URLSession's error (which only says the upload was aborted); a 2xx that came before the whole
    /// body is a failure, since the server cannot have read bytes it was never given.
    var verdict: Result<(Data, URLResponse), any Error> {
        if isCancelled { return .failure(URLError(.cancelled)) }
        if let bodyFailure { return .failure(bodyFailure) }
        if let stopReason { return .failure(stopReason) }
        let http = response as? HTTPURLResponse
        if let http, error != nil, gaveUpChallenge, http.statusCode == 401 || http.statusCode == 407 {
            // Any other error after a 401's headers (a reset) is a failure.
            return answer(http)
        }
        if let error, !cutShort { return .failure(error) }
        if let http, (200..<300).contains(http.statusCode), isShort, !takesEarlySuccess {
            let reason = MultipartError.Reason.answeredBeforeBodySent(
                statusCode: http.statusCode, bytesSent: handedOut, contentLength: formLength)
            return .failure(MultipartError(reason))
        }
        guard let response else { return .failure(URLError(.badServerResponse)) }
        return answer(response)
    }

    /// The answer, unless the caller refuses its status (then it fails with the response and its body's prefix, all
    /// that was kept of it) or its body passed its bound (then the caller would get it cut short).
    private func answer(_ response: URLResponse) -> Result<(Data, URLResponse), any Error> {
        let http = response as? HTTPURLResponse
        if refusesStatus, let http {
            let body = received.prefix(MultipartResponseBody.refusedBodyLimit)
            let reason = MultipartError.Reason.unacceptableStatus(statusCode: http.statusCode, body: body)
            return .failure(MultipartError(reason, response: http))
        }
        guard let passedLimit else { return .success((received, response)) }
        let reason = MultipartError.Reason.responseTooLarge(statusCode: http?.statusCode ?? 200, limit: passedLimit)
        return .failure(http.map { MultipartError(reason, response: $0) } ?? MultipartError(reason))
    }
}
