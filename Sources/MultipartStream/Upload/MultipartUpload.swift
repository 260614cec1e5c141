import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One upload of a form, over one or more tasks (a redirect the upload follows itself makes a new one) of the
/// caller session's ``UploadSession``, which hands it its tasks' events (``UploadTaskEvents``).
///
/// The shell that carries out what the policies and the state machine decide: it makes a fresh body for every send,
/// keeps the response body, applies ``RedirectPolicy`` and ``ChallengePolicy`` (asking the caller's delegate first,
/// through ``CallerDelegate``), reports progress, and at the end closes every stream and tells the caller what
/// ``UploadStateMachine`` makes of how the task ended.
final class MultipartUpload: UploadTaskEvents, @unchecked Sendable {
    // @unchecked: every mutable property is guarded by `lock`; the rest are constants.
    typealias Completion = @Sendable (Result<(Data, URLResponse), any Error>) -> Void

    /// The form; its `appendError` is also why no body can be sent (a background session), and then every stream
    /// fails with it.
    private let form: MultipartFormData
    private let progress: ProgressCoalescer?
    /// Whether the upload's end ends its progress; not for one request of a resumable upload, whose progress goes
    /// on with the next.
    private let finishesProgress: Bool
    /// The body's `Content-Type`: the form's, or the resumable-upload protocol's for a part of it.
    private let contentType: String
    /// Whether the body may go out once only (a part of a resumable upload, which the server has counted as it
    /// arrived): a resend URLSession starts by itself fails the request instead, with
    /// ``MultipartError/Reason/notReplayable``.
    let sendsBodyOnce: Bool
    /// The caller's session and its delegate, which decides redirects and challenges first.
    let caller: CallerDelegate
    /// Whether this object owns the whole exchange (the async API), rather than handing its task to the caller.
    /// Then it sends the form again itself where Linux URLSession cannot (a 307 or 308), with a new task, and
    /// streams through a data task, whose every 64 KiB Linux URLSession does not report to the delegate queue as it
    /// does an upload task's. A task handed to the caller is an upload task and must be the one that sends.
    private let ownsTask: Bool
    private let completion: Completion
    /// The origin of the first request: the caller's credentials go to it and nowhere else by themselves.
    private let origin: Origin?

    private let lock = Lock()
    private var body: UploadBody
    private var task: URLSessionTask?
    private var streams: [MultipartBodyStream] = []
    private var received = Data()
    /// Body bytes of the current task that URLSession reported sent, where it reads the body file itself.
    private var fileBytesSent: UInt64 = 0
    private var machine = UploadStateMachine()

    /// Whether the caller cancelled (guarded by `lock`).
    private var isCancelled: Bool {
        if case .cancelled = machine.state { return true }
        return false
    }

    init(
        form: MultipartFormData,
        body: UploadBody,
        contentType: String? = nil,
        sendsBodyOnce: Bool = false,
        callerSession: URLSession,
        origin: URL?,
        ownsTask: Bool,
        progress: ProgressCoalescer?,
        finishesProgress: Bool = true,
        completion: @escaping Completion
    ) {
        self.ownsTask = ownsTask
        self.finishesProgress = finishesProgress
        self.form = form
        self.body = body
        self.contentType = contentType ?? form.contentType
        self.sendsBodyOnce = sendsBodyOnce
        caller = CallerDelegate(callerSession)
        self.origin = Origin(origin)
        self.progress = progress
        self.completion = completion
    }

    /// The first byte of the form this upload sends.
    private var firstByte: UInt64 {
        if case .stream(let offset) = body { return offset }
        return 0
    }

    /// The bytes this upload's body holds: none, the form's, or the form's from an offset.
    private var bodyLength: UInt64 {
        if case .none = body { return 0 }
        return form.contentLength - min(firstByte, form.contentLength)
    }

    /// A suspended task, on the caller session's private session, that sends `request` with the form: when this
    /// object owns the exchange and streams, a data task; else an upload task.
    func makeTask(for request: URLRequest) -> URLSessionTask? {
        let body = lock.withLock { self.body }
        guard ownsTask, !body.isReadByURLSession else { return makeUploadTask(for: request) }
        guard let session = caller.session else { return nil }
        var request = prepared(request)
        if case .none = body {} else { request.httpBodyStream = makeStream(of: body) }
        let task = SessionPool.makeTask(for: self, of: session, singleUse: sendsBodyOnce, started: true) {
            $0.dataTask(with: request)
        }
        caller.pin()
        return started(task)
    }

    /// A suspended upload task that sends `request` with the form, from the temporary file or streamed.
    func makeUploadTask(for request: URLRequest) -> URLSessionUploadTask? {
        guard let session = caller.session else { return nil }
        let request = prepared(request)
        let body = lock.withLock { self.body }
        let task = SessionPool.makeTask(for: self, of: session, singleUse: sendsBodyOnce, started: ownsTask) {
            session -> URLSessionUploadTask in
            if body.isReadByURLSession, let file = body.temporaryFile {
                session.uploadTask(with: request, fromFile: file)
            } else {
                session.uploadTask(withStreamedRequest: request)
            }
        }
        if ownsTask { caller.pin() }
        return started(task)
    }

    /// `request` as the form's: POST unless it names another method, the body's headers, no body of its own. A
    /// request without a body is sent as it is.
    private func prepared(_ request: URLRequest) -> URLRequest {
        if case .none = body { return request }
        var request = request
        if request.httpMethod == nil || request.httpMethod == "GET" { request.httpMethod = "POST" }
        request.httpBody = nil
        request.httpBodyStream = nil
        request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        request.setBodyLength(bodyLength)
        return request
    }

    /// Makes `task` the current one, and cancels it at once if the upload was cancelled meanwhile (a redirect's
    /// new task would otherwise run).
    private func started<Task: URLSessionTask>(_ task: Task) -> Task {
        let isCancelled = lock.withLock {
            self.task = task
            fileBytesSent = 0
            return self.isCancelled
        }
        if isCancelled { task.cancel() }
        return task
    }

    /// The task began: from now on it keeps the caller's session alive, as URLSession keeps a task's session.
    func taskBegan() {
        caller.pin()
    }

    /// A new stream of the body, reporting progress, closed at once if the upload was cancelled. The stream of a
    /// body that could not be written fails at once with the reason.
    private func makeStream(of body: UploadBody) -> MultipartBodyStream {
        let stream: MultipartBodyStream
        switch body {
        case .none, .fileToWrite:
            stream = form.makeBodyStream()
        case .stream(let offset):
            stream = form.makeBodyStream(startingAt: offset)
        case .file(let url):
            stream = MultipartBodyStream(encodedFile: url, length: form.contentLength)
        case .failed(let error):
            var failing = form
            failing.appendError = error
            stream = failing.makeBodyStream()
        }
        if let progress {
            let offset = firstByte
            stream.progressHandler = { progress.report(offset + $0) }
        }
        stream.startsOverWhenReopened = !sendsBodyOnce
        let isCancelled = lock.withLock {
            streams.append(stream)
            return self.isCancelled
        }
        if isCancelled { stream.close() }
        return stream
    }

    /// Stops progress, closes every body stream at once, which closes the file being read, and cancels the task.
    /// Returns at once, and no progress is reported after it returns: Linux URLSession cancels a task on the queue
    /// that reads the body, which a caller stream blocked in `read` holds until it returns, so the task is cancelled
    /// from another thread.
    func cancel() {
        progress?.finish()
        let (task, streams) = lock.withLock {
            _ = machine.cancel()
            return (self.task, self.streams)
        }
        for stream in streams { stream.close() }
        if let task {
            DispatchQueue.global().async { task.cancel() }
        }
    }

    // MARK: Body

    /// A body for the task, which asks for one when it starts and again when URLSession resends it by itself (a
    /// 401 answered, or on Linux a reused connection that died).
    func bodyStream(for task: URLSessionTask) -> InputStream {
        // A part of a resumable upload must not go out twice at the same offset: that resend fails, and the
        // upload asks the server instead.
        if sendsBodyOnce, lock.withLock({ !streams.isEmpty }) {
            return makeStream(of: .failed(MultipartError(.notReplayable)))
        }
        return makeStream(of: writtenBody())
    }

    /// The body, its temporary file written first if it is still to be written. Written outside the lock, which
    /// cancel() must never wait for; the delegate queue is serial, so a second ask (a resend) comes after this one.
    /// Only a file written whole counts as written; a failure is kept for every later ask.
    private func writtenBody() -> UploadBody {
        let body = lock.withLock { self.body }
        guard case .fileToWrite(let url) = body else { return body }
        let written: UploadBody
        do throws(MultipartError) {
            try form.writeEncodedData(to: url)
            written = .file(url)
        } catch {
            written = .failed(error)
        }
        lock.withLock { self.body = written }
        return written
    }

    /// URLSession's count of body bytes sent, which only a file it reads itself needs: streams count their own,
    /// since URLSession's counts for them are 0 on Linux.
    func sentBody(totalBytesSent: Int64) {
        guard lock.withLock({ body.isReadByURLSession }) else { return }
        let sent = UInt64(max(0, totalBytesSent))
        lock.withLock { fileBytesSent = sent }
        progress?.report(sent)
    }

    // MARK: Response

    /// A response began; a 401's or a redirect's body comes before the response that counts.
    func receivedResponse() {
        lock.withLock { received = Data() }
    }

    func received(_ data: Data) {
        lock.withLock { received.append(data) }
    }

    /// The caller's delegate decides first, as it would for its own tasks, and is shown the request without the
    /// caller's credentials when it leaves the first request's origin: it may put them back on purpose.
    func redirect(
        task: URLSessionTask,
        response: HTTPURLResponse,
        proposed: URLRequest,
        answer: @escaping @Sendable (URLRequest?) -> Void
    ) {
        let proposal = RedirectPolicy.proposal(proposed, leaving: origin)
        let sent = task.currentRequest ?? task.originalRequest
        caller.redirect(response, to: proposal, task: task) { request in
            let decision = self.lock.withLock {
                let decision = RedirectPolicy.decide(
                    statusCode: response.statusCode, answer: request, sent: sent,
                    canResend: self.machine.canResend(owningTasks: self.ownsTask))
                self.machine.redirected(decision)
                return decision
            }
            switch decision {
            case .follow(let request): answer(request)
            case .resend, .fail, .keepResponse: answer(nil)
            }
        }
    }

    /// The caller's delegate answers first; what it leaves to the default, ``ChallengePolicy`` answers.
    func challenge(
        _ challenge: URLAuthenticationChallenge,
        task: URLSessionTask,
        storage: URLCredentialStorage?,
        answer: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        caller.challenge(challenge, task: task) { disposition, credential in
            guard disposition == .performDefaultHandling else { return answer(disposition, credential) }
            let (fallback, stored) = ChallengePolicy.defaultAnswer(to: challenge, storage: storage)
            if fallback == .cancelAuthenticationChallenge { self.lock.withLock { self.machine.gaveUpChallenge() } }
            answer(fallback, stored)
        }
    }

    func collected(_ metrics: URLSessionTaskMetrics, task: URLSessionTask) {
        caller.metrics(metrics, task: task)
    }

    #if canImport(Darwin)
        func waitingForConnectivity(task: URLSessionTask) {
            caller.waitingForConnectivity(task: task)
        }
    #endif

    // MARK: Completion

    /// The task ended: close its streams, and send the form again or tell the caller, as the state machine says.
    func taskCompleted(_ task: URLSessionTask, error: (any Error)?) {
        let (streams, data, body, fileBytesSent) = lock.withLock {
            defer { self.streams = [] }
            return (self.streams, received, self.body, self.fileBytesSent)
        }
        var end = UploadStateMachine.TaskEnd(
            error: error, response: task.response, data: data, bodyLength: bodyLength, bodyStart: firstByte,
            contentLength: form.contentLength)
        // A failed stream's error names the part and the reason; URLSession only says the upload was aborted.
        end.streamFailure = streams.lazy.compactMap { $0.streamStatus == .error ? $0.streamError : nil }.first
        // Read before closing, which ends the count: the latest stream is the one the last request read.
        end.bodyBytesSent = body.isReadByURLSession ? fileBytesSent : streams.last?.bytesRead ?? 0
        if case .failed(let failure) = body { end.bodyFailure = failure }
        for stream in streams { stream.close() }
        var action = lock.withLock { machine.taskEnded(end) }
        if case .startTask(let request) = action {
            if let next = makeTask(for: request) { return next.resume() }
            // The caller's session is gone, and with it the private session to send on.
            let statusCode = (task.response as? HTTPURLResponse)?.statusCode ?? 307
            let failure = MultipartError(.redirectNotFollowed(statusCode: statusCode, location: request.url))
            action = lock.withLock { machine.resendFailed(failure) }
        }
        guard case .finish(let result) = action else { return }
        if finishesProgress { progress?.finish() }
        caller.unpin()
        if let file = body.temporaryFile { try? FileManager.default.removeItem(at: file) }
        completion(result)
    }
}
