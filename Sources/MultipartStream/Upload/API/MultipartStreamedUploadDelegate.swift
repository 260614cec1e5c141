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
/// Stop a task with `session.cancelMultipartUpload(task)` (or ``cancel(_:)``), never its own `cancel()`, which on
/// Linux traps the process when it meets the task's end.
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
    /// The gates every cancel of a task passes through, this delegate's and the caller's (``cancel(_:)``): kept
    /// apart from the exchanges, since a cancel may come before a task's first event, and kept past the task's end
    /// until URLSession has marked it completed, when a cancel can no longer race it.
    private var gates: [ObjectIdentifier: (task: WeakTask, gate: CancelGate)] = [:]

    /// What one task has shown so far. Its decisions are the request machine's, as for every other way to send
    /// (``UploadRequest/StateMachine``, in the role of a task handed to the caller); this delegate keeps only what
    /// URLSession's delegate API forces on it: the stream it handed out, and the progress it reports.
    private struct Exchange {
        var machine: UploadRequest.StateMachine
        /// The last stream handed to URLSession: the one whose bytes went out.
        var stream: MultipartBodyStream?
        var progress: ProgressCoalescer?
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

    /// Applies `change` to `task`'s exchange under the lock: the one place that takes it. The exchange is made at
    /// the task's first event, its machine told of the task; `body` is the length of the stream the task sends (of
    /// unknown length where it has none), where its first event is the ask for one. A task whose first event is
    /// another sends a body that is not this delegate's to count, taken as whole.
    private func modify<Result>(
        _ task: URLSessionTask, body: MultipartBodyStream? = nil, _ change: (inout Exchange) -> Result
    ) -> Result {
        lock.withLock {
            let id = ObjectIdentifier(task)
            var exchange: Exchange
            if let existing = tasks.removeValue(forKey: id) {
                exchange = existing
            } else {
                // No content type: the machine plans no task here (the caller made it), and only a plan frames one.
                var machine = UploadRequest.StateMachine(
                    role: .callerTask(.stream), contentLength: body?.contentLength ?? 0, contentType: "",
                    reception: reception, lengthIsKnown: body == nil || body?.contentLength != nil)
                _ = machine.taskMade()
                exchange = Exchange(machine: machine)
            }
            defer { tasks[id] = exchange }
            return change(&exchange)
        }
    }

    /// What the task's latest stream handed out, read outside the lock: the stream may still be read meanwhile. A
    /// stream of unknown length is whole once it handed out its last byte: at its end, or closed after it (a stream
    /// closed early still has bytes to give).
    private func count(of stream: MultipartBodyStream?) -> UploadRequest.StateMachine.BodyCount {
        guard let stream else { return .init(lastByte: true) }
        let handedOut = stream.bytesRead
        return .init(last: handedOut, furthest: handedOut, failure: stream.failure, lastByte: !stream.hasBytesAvailable)
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
        let (stream, made) = modify(task, body: original) { exchange in
            // The request's own stream, copied: the machine's body is the form's, whole.
            _ = exchange.machine.bodyRequested()
            if exchange.progress == nil, let progress {
                exchange.progress = ProgressCoalescer(totalBytes: original.contentLength) { [weak task] reported in
                    if let task { progress(task, reported) }
                }
            }
            let stream = original.copy(progressHandler: exchange.progress?.report)
            exchange.stream = stream
            return (stream, exchange.machine.streamMade())
        }
        if case .close = made { stream.close() }
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
        let sent = task.currentRequest ?? task.originalRequest
        let location = response.value(forHTTPHeaderField: "Location")
        // Made as every request is, by the origin rule (``RequestMaker``): this delegate has no headers hook.
        let requests = RequestMaker(
            hook: nil, origin: task.originalRequest?.url, trustsOtherOrigins: credentialsToOtherOrigins)
        let answer = modify(task) { exchange -> URLRequest? in
            guard
                case .make(let resolved) = exchange.machine.redirectMet(
                    proposed: request, location: location, from: sent?.url)
            else { return nil }
            switch exchange.machine.redirectAnswered(
                statusCode: response.statusCode, answer: requests.judged(resolved), sent: sent)
            {
            case .follow(let request): return request
            case .refuse: return nil
            }
        }
        task.redirectAnswer(completionHandler)(answer)
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
        let chosen = modify(task) {
            $0.machine.challengeAnswered(
                caller: .init(disposition: .performDefaultHandling, credential: nil),
                fallback: .init(disposition: disposition, credential: credential))
        }
        completionHandler(chosen.disposition, chosen.credential)
    }

    /// Starts the answer's body afresh (Linux URLSession hands over a 401's body before the answer that follows it)
    /// and notes how much of the body was handed out when the answer's head came.
    public func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        let stream = modify(dataTask) { $0.stream }
        let count = count(of: stream)
        modify(dataTask) { $0.machine.responseBegan(count, response: response) }
        completionHandler(.allow)
    }

    /// Collects the answer's body, up to its bound: past it, the task stops (or, for an answer another may follow,
    /// the rest is dropped).
    public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        if case .stop = modify(dataTask, { $0.machine.received(data) }) { gate(for: dataTask).cancel(dataTask) }
    }

    /// Cancels `task`, one of this delegate's session, without ever trapping the process: call it in place of the
    /// task's own `cancel()`, which on Linux traps when it meets the task's natural end (see <doc:LinuxNotes>).
    /// `URLSession.cancelMultipartUpload(_:)` calls it for a session whose delegate this is.
    ///
    /// The task ends as a cancelled one does (`URLError(.cancelled)` to `completion`), or, when it had already
    /// ended, as it ended.
    public func cancel(_ task: URLSessionTask) {
        gate(for: task).cancel(task)
    }

    /// The gate of `task`, made at its first use; the gates of tasks URLSession has marked completed are dropped
    /// meanwhile.
    private func gate(for task: URLSessionTask) -> CancelGate {
        lock.withLock {
            let id = ObjectIdentifier(task)
            if let (known, gate) = gates[id], known.task === task { return gate }
            gates = gates.filter { _, entry in entry.task.task.map { $0.state != .completed } ?? false }
            let gate = CancelGate()
            gates[id] = (WeakTask(task: task), gate)
            return gate
        }
    }

    /// Hands the task's outcome to `completion`, judged as every upload's request is: a failed
    /// part's ``MultipartError`` before URLSession's own error, and a 2xx that came before the whole body a failure.
    public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        // First, while URLSession still holds the task: a cancel under way then ends before URLSession lets it go.
        gate(for: task).taskEnded(task)
        let stream = modify(task) { $0.stream }
        let count = count(of: stream)
        let (ended, progress) = lock.withLock { () -> (UploadRequest.StateMachine.EndAction?, ProgressCoalescer?) in
            guard var exchange = tasks.removeValue(forKey: ObjectIdentifier(task)) else { return (nil, nil) }
            return (exchange.machine.taskEnded(error: error, response: task.response, body: count), exchange.progress)
        }
        guard case .finish(let finish) = ended else { return }
        if let progress {
            if case .success = finish.result { progress.settle(at: finish.bytesSent) }
            progress.finish()
        }
        switch finish.result {
        case .success(let (data, response)): completion(task, data, response, nil)
        case .failure(let failure): completion(task, nil, task.response, failure)
        }
    }
}

/// A task the delegate does not keep alive.
private struct WeakTask {
    weak var task: URLSessionTask?
}
