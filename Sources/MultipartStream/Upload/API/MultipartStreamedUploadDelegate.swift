import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension MultipartBodyStream {
    /// The answer to `urlSession(_:task:needNewBodyStream:)` for a task whose request streams a form: a new copy of
    /// the request's ``MultipartBodyStream``, or `nil` when its body is not one.
    ///
    /// URLSession asks for the body of a task made with `uploadTask(withStreamedRequest:)` only this way (the
    /// request's own stream is never read), and asks again to resend it after a 401:
    ///
    /// ```swift
    /// func urlSession(_ session: URLSession, task: URLSessionTask,
    ///                 needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void) {
    ///     completionHandler(MultipartBodyStream.bodyStream(for: task))
    /// }
    /// ```
    ///
    /// - Parameter task: The task that asks.
    /// - Returns: A new, unopened stream of the same bytes.
    public static func bodyStream(for task: URLSessionTask) -> MultipartBodyStream? {
        (task.originalRequest?.httpBodyStream as? MultipartBodyStream)?.copy() as? MultipartBodyStream
    }
}

/// A session delegate for `uploadTask(withStreamedRequest:)`, for callers who have no delegate of their own: it
/// answers `needNewBodyStream` with a copy of the request's ``MultipartBodyStream``, reports progress from the stream
/// URLSession reads, collects each task's answer and hands it to `completion`.
///
/// It also does what an upload needs on Linux, where URLSession would otherwise lose the body: a 307 or 308 is not
/// followed (Linux URLSession would send the new request an empty body and report success) but ends the task with
/// ``MultipartError/Reason/redirectNotFollowed(statusCode:location:)``; a 301, 302 or 303 becomes a GET without the
/// `Content-Length` of the form; a challenge is answered with the configuration's stored credential once, or else
/// cancelled so that the 401 or 407 is the answer (Linux URLSession crashes on the default answer). On Apple
/// platforms redirects and challenges get URLSession's default handling, which resends the body with a new stream.
/// Everywhere, a redirect to another origin loses the `Authorization`, `Cookie` and `Proxy-Authorization` headers.
///
/// A task fails with the stream's ``MultipartError`` when a part failed while streaming, and with
/// ``MultipartError/Reason/answeredBeforeBodySent(statusCode:bytesSent:contentLength:)`` when a 2xx arrived before
/// the whole body was handed out: such a server never read the form.
public final class MultipartStreamedUploadDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: `tasks` is guarded by `lock`, which only `modifyTasks` takes; the rest are constants.
    /// What a finished task hands back: its task, the answer's body and head, or the error that ended it.
    public typealias Completion = @Sendable (URLSessionTask, Data?, URLResponse?, (any Error)?) -> Void

    private let progress: (@Sendable (URLSessionTask, MultipartUploadProgress) -> Void)?
    private let completion: Completion
    /// How an answer's body is kept: in memory, up to the bound.
    private let reception: ResponseReception
    /// Whether credentials go along to another origin.
    private let credentialsToOtherOrigins: Bool
    private let lock = Lock()
    private var tasks: [ObjectIdentifier: Exchange] = [:]

    /// Applies `change` to the tasks' exchanges under the lock: the one place that takes it.
    private func modifyTasks<Result>(_ change: (inout [ObjectIdentifier: Exchange]) -> Result) -> Result {
        lock.withLock { change(&tasks) }
    }

    /// What one task has shown so far.
    private struct Exchange {
        /// The last stream handed to URLSession: the one whose bytes went out.
        var stream: MultipartBodyStream?
        var progress: ProgressCoalescer?
        /// The latest answer's body, within its bound.
        var answer = ReceivedBody()
        /// A redirect the task could not follow.
        var stopReason: MultipartError?
        /// A challenge was cancelled for want of a credential.
        var gaveUpChallenge = false
        /// The stream's count when the latest answer's head arrived, and whether it had handed out its last byte:
        /// a server cannot have read more before it answered.
        var atResponse: (handedOut: UInt64, lastByte: Bool)?
    }

    /// A delegate that calls `completion` once for every task of its session, and `progress` as body bytes go out.
    ///
    /// - Parameters:
    ///   - progress: Called on URLSession's reading thread with the bytes handed out of the form so far, at most 10
    ///     times a second, only rising, with 100% once; `nil` for none.
    ///   - responseLimit: The most bytes of an answer's body held in memory: 16 MiB unless raised. A task whose
    ///     answer is longer is stopped and fails with ``MultipartError/Reason/responseTooLarge(statusCode:limit:)``.
    ///   - credentialsToOtherOrigins: Whether a task's credentials (`Authorization`, `Cookie`,
    ///     `Proxy-Authorization`, a user and password in its URL) go along on a redirect to another origin, as curl's
    ///     `--location-trusted`; `false` (the default) keeps them to its own.
    ///   - completion: Called on the session's delegate queue when a task ends: the answer's body and response, or
    ///     the error (`nil` body then), as `dataTask(with:completionHandler:)` gives them.
    public init(
        progress: (@Sendable (URLSessionTask, MultipartUploadProgress) -> Void)? = nil,
        responseLimit: Int = MultipartResponseBody.defaultLimit,
        credentialsToOtherOrigins: Bool = false,
        completion: @escaping Completion
    ) {
        self.progress = progress
        self.credentialsToOtherOrigins = credentialsToOtherOrigins
        self.completion = completion
        reception = .answer(accepting: nil, body: .inMemory(upTo: responseLimit), sink: nil)
    }

    /// A new copy of the request's stream, whose reads this delegate counts.
    public func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void
    ) {
        guard let original = task.originalRequest?.httpBodyStream as? MultipartBodyStream else {
            return completionHandler((task.originalRequest?.httpBodyStream as? NSCopying)?.copy() as? InputStream)
        }
        let stream = modifyTasks { tasks -> MultipartBodyStream in
            var exchange = tasks[ObjectIdentifier(task)] ?? Exchange()
            if exchange.progress == nil, let progress {
                exchange.progress = ProgressCoalescer(totalBytes: original.contentLength) { [weak task] reported in
                    if let task { progress(task, reported) }
                }
            }
            let stream = original.copy(progressHandler: exchange.progress?.report)
            exchange.stream = stream
            tasks[ObjectIdentifier(task)] = exchange
            return stream
        }
        completionHandler(stream)
    }

    /// Follows what URLSession can resend whole; see the type's description.
    public func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        // Made as every request is, by the origin rule (``RequestMaker``): this delegate has no headers hook.
        let proposal = RequestMaker(
            hook: nil, origin: task.originalRequest?.url, trustsOtherOrigins: credentialsToOtherOrigins
        ).judged(
            RedirectPolicy.resolving(
                request, to: response.value(forHTTPHeaderField: "Location"), from: task.currentRequest?.url))
        switch RedirectPolicy.decide(
            statusCode: response.statusCode, answer: proposal, sent: task.currentRequest, canResend: false)
        {
        case .follow(let request):
            completionHandler(request)
        case .fail(let error):
            stop(task, because: error)
            completionHandler(nil)
        case .resend:
            // Not asked for: this task is the caller's, and cannot be replaced.
            stop(
                task,
                because: MultipartError(.redirectNotFollowed(statusCode: response.statusCode, location: request.url)))
            completionHandler(nil)
        case .keepResponse:
            completionHandler(nil)
        }
    }

    /// The configuration's stored credential once, else the answer that makes the 401 or 407 the task's answer.
    public func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        let (disposition, credential) = ChallengePolicy.defaultAnswer(
            to: challenge, storage: session.configuration.urlCredentialStorage)
        if disposition == .cancelAuthenticationChallenge {
            modifyTasks { tasks in tasks[ObjectIdentifier(task), default: Exchange()].gaveUpChallenge = true }
        }
        completionHandler(disposition, credential)
    }

    /// Starts the answer's body afresh (Linux URLSession hands over a 401's body before the answer that follows it)
    /// and notes how much of the body was handed out when the answer's head came.
    public func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        let stream = modifyTasks { tasks in tasks[ObjectIdentifier(dataTask)]?.stream }
        // Read outside the lock, once: the stream may still be read while this runs. A stream of unknown length is
        // whole once it handed out its last byte: at its end, or closed after it (a stream closed early still has
        // bytes to give).
        let count = stream.map { ($0.bytesRead, !$0.hasBytesAvailable) }
        let answer = ReceivedBody(response, handedOut: count?.0 ?? 0, as: reception)
        modifyTasks { tasks in
            guard var exchange = tasks[ObjectIdentifier(dataTask)] else { return }
            exchange.answer = answer
            exchange.atResponse = count
            tasks[ObjectIdentifier(dataTask)] = exchange
        }
        completionHandler(.allow)
    }

    /// Collects the answer's body, up to its bound: past it, the task stops (or, for an answer another may follow,
    /// the rest is dropped).
    public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let stops = modifyTasks { tasks in
            // In place: a copy of the exchange would copy its body on every piece.
            tasks[ObjectIdentifier(dataTask), default: Exchange()].answer.take(data) == .stop
        }
        if stops { dataTask.cancel() }
    }

    /// Hands the task's outcome to `completion`, judged as every upload's request is: a failed part's
    /// ``MultipartError`` before URLSession's own error, and a 2xx that came before the whole body a failure.
    public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let exchange = modifyTasks { tasks in tasks.removeValue(forKey: ObjectIdentifier(task)) } ?? Exchange()
        let stream = exchange.stream
        let atEnd = stream.map { ($0.bytesRead, !$0.hasBytesAvailable) } ?? (0, true)
        let handedOut = exchange.atResponse ?? atEnd
        let outcome = RequestOutcome(
            bodyFailure: stream?.failure,
            stopReason: exchange.stopReason, response: task.response, error: error,
            gaveUpChallenge: exchange.gaveUpChallenge, handedOut: handedOut.handedOut,
            // A body that is not the form's (another stream) is not counted: it is taken as whole.
            bodyEnd: stream == nil ? 0 : stream?.contentLength, handedOutLastByte: handedOut.lastByte,
            formLength: stream?.contentLength, received: exchange.answer.data,
            cutShort: exchange.answer.cutShort, passedLimit: exchange.answer.passedLimit)
        let verdict = outcome.verdict
        if let progress = exchange.progress {
            if case .success = verdict { progress.settle(at: atEnd.0) }
            progress.finish()
        }
        switch verdict {
        case .success(let (data, response)): completion(task, data, response, nil)
        case .failure(let failure): completion(task, nil, task.response, failure)
        }
    }

    private func stop(_ task: URLSessionTask, because reason: MultipartError) {
        modifyTasks { tasks in tasks[ObjectIdentifier(task), default: Exchange()].stopReason = reason }
    }
}
