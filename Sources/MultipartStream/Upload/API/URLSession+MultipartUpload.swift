import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSession {
    /// Uploads `form` with `request` (POST unless it says otherwise) and returns the response once it has arrived.
    ///
    /// The body streams lazily (or, with `.file`, from a temporary file that is removed afterwards), with its exact
    /// `Content-Length` and no chunked framing on every platform. `progress` is called on URLSession's reading
    /// thread as body bytes go out, a bounded number of times, only rising, and with 100% once; keep it quick.
    /// Cancelling the surrounding task cancels the upload at once and closes the file being read, and throws
    /// `CancellationError`. A part that fails while streaming throws its ``MultipartError``, and so does a 2xx that
    /// came before the whole body was handed out
    /// (``MultipartError/Reason/answeredBeforeBodySent(statusCode:bytesSent:contentLength:)``).
    ///
    /// The uploads of one session run on one private session made from its configuration, and share its
    /// connections. This session's delegate is asked as URLSession asks it about its own tasks, on this session's
    /// `delegateQueue`: it answers authentication challenges (session-wide ones through the session-level method
    /// when it has no task-level one), and decides redirects (`nil` from `willPerformHTTPRedirection` makes the 3xx
    /// the answer; the request it returns is the one sent). A redirect to another origin carries none of the
    /// request's `Authorization`, `Cookie` and `Proxy-Authorization` headers unless the delegate puts them back. A
    /// retry after a 401 or a 307/308 redirect sends the whole body again. Background sessions cannot be used: see
    /// ``MultipartUploadStrategy/file``.
    ///
    /// - Parameters:
    ///   - form: The form to send. Its `Content-Type` and `Content-Length` replace the request's.
    ///   - request: The URL, method (POST when it is GET) and other headers.
    ///   - strategy: `.automatic` (the default) streams, or sends a small form held in memory as bytes; `.stream`
    ///     always reads the parts as they are sent; `.file` writes the body to a temporary file first; `.resumable`
    ///     streams and, against a server that speaks the resumable-upload draft, sends only what the server lacks
    ///     after a dropped connection.
    ///   - resumption: How `.resumable` retries; unused by the other strategies.
    ///   - pacing: How fast the body goes out; `nil` (the default) for as fast as URLSession reads it. The `.file`
    ///     strategy's body is never paced.
    ///   - progress: Called with the bytes handed to URLSession so far; `nil` for none.
    /// - Returns: The response's body and the response, whatever its status.
    /// - Throws: ``MultipartError`` when a part fails, the form has an ``MultipartFormData/appendError``, the
    ///   session is a background one, the server answered before the body was sent, or a resumable upload gave up;
    ///   `CancellationError` when the task is cancelled; URLSession's error when the transfer fails.
    public func upload(
        _ form: MultipartFormData,
        with request: URLRequest,
        strategy: MultipartUploadStrategy = .automatic,
        resumption: MultipartResumption = MultipartResumption(),
        pacing: MultipartPacing? = nil,
        progress: (@Sendable (MultipartUploadProgress) -> Void)? = nil
    ) async throws -> (Data, URLResponse) {
        guard configuration.identifier == nil else { throw MultipartError(.backgroundSession) }
        if let appendError = form.appendError { throw appendError }
        var form = form
        var spools: [URL] = []
        defer { for file in spools { try? FileManager.default.removeItem(at: file) } }
        if form.contentLength == nil, strategy != .resumable {
            // Every strategy but `.resumable` sends an exact Content-Length before the first byte.
            (form, spools) = try await form.spooled()
        }
        let progress = progress.map { ProgressCoalescer(totalBytes: form.contentLength, handler: $0) }
        if strategy == .resumable {
            return try await ResumableUpload(
                form: form, request: request, session: self, policy: resumption, pacing: pacing, progress: progress
            ).run()
        }
        let body: UploadBody
        switch strategy {
        case .file: body = .file(try await Self.writeTemporaryFile(of: form))
        case .automatic: body = .automatic(for: form, paced: pacing != nil)
        case .stream, .resumable: body = .stream
        }
        if Task.isCancelled {
            if let file = body.temporaryFile { try? FileManager.default.removeItem(at: file) }
            throw CancellationError()
        }
        let result = PendingResponse()
        let upload = MultipartUpload(
            form: form, role: .wholeForm(body), callerSession: self, origin: request.url, pacing: pacing,
            progress: progress, completion: result.resolve)
        return try await perform(request, upload, answeredTo: result)
    }

    /// Runs `upload`, whose completion resolves `result`, and returns its answer. Cancelling the surrounding task
    /// cancels it at once and throws `CancellationError`.
    func perform(
        _ request: URLRequest,
        _ upload: MultipartUpload,
        answeredTo result: PendingResponse
    ) async throws -> (Data, URLResponse) {
        // Made on a dispatch thread: making a task waits for URLSession's queue, which a caller stream blocked in
        // another upload's `read` may hold, and the concurrency pool's few threads must not wait with it. This
        // session is alive (it is `self`), so there is a task.
        let task = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: upload.makeTask(for: request)!) }
        }
        do {
            return try await withTaskCancellationHandler {
                try await result.value { task.resume() }
            } onCancel: {
                upload.cancel()
                // Answer now: URLSession handles the cancel on the queue that reads the body, which a caller stream
                // blocked in `read` holds until it returns. The task ends, and closes everything, on its own.
                result.resolve(.failure(CancellationError()))
            }
        } catch let error as URLError where error.code == .cancelled && Task.isCancelled {
            throw CancellationError()
        }
    }

    /// A suspended upload task for `form` (call `resume()`); `completionHandler` gets the response as
    /// `dataTask(with:completionHandler:)` would, or the error, a ``MultipartError`` when a part failed.
    ///
    /// With `.file` the body is written to a temporary file when the task starts (a task never resumed leaves
    /// none) and removed when it ends; if writing fails, the task fails with that ``MultipartError``. `progress` is
    /// called as in ``upload(_:with:strategy:resumption:pacing:progress:)``, and this session's delegate is asked on its
    /// `delegateQueue` as there, with the same rule for credentials on redirects. Cancelling the task stops reading
    /// at once and closes any open file. A task never resumed keeps neither this session nor its connections
    /// alive. On Linux a 307/308 redirect fails the task with
    /// ``MultipartError/Reason/redirectNotFollowed(statusCode:location:)``, since the task cannot be replaced.
    ///
    /// - Parameters:
    ///   - request: The URL, method (POST when it is GET) and other headers.
    ///   - form: The form to send. Its `Content-Type` and `Content-Length` replace the request's.
    ///   - strategy: `.automatic` (the default), `.stream` or `.file`, as in
    ///     ``upload(_:with:strategy:resumption:pacing:progress:)`` (a task always streams for `.automatic`);
    ///     `.resumable` streams as `.stream` does, since a task cannot be replaced.
    ///   - pacing: How fast the body goes out; `nil` (the default) for as fast as URLSession reads it.
    ///   - progress: Called with the bytes handed to URLSession so far; `nil` for none.
    ///   - completionHandler: Called once with the body and response, or with the error: a ``MultipartError`` when a
    ///     part failed or the form cannot be sent.
    /// - Returns: The task, suspended.
    public func multipartUploadTask(
        with request: URLRequest,
        form: MultipartFormData,
        strategy: MultipartUploadStrategy = .automatic,
        pacing: MultipartPacing? = nil,
        progress: (@Sendable (MultipartUploadProgress) -> Void)? = nil,
        completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void
    ) -> URLSessionUploadTask {
        // What keeps the body from being sent goes into the form's appendError: the task fails with it when resumed.
        var form = form
        if configuration.identifier != nil {
            form.appendError = MultipartError(.backgroundSession)
        } else if form.appendError == nil, let index = form.partOfUnknownLength {
            // A task's `Content-Length` is set before it starts, and nothing would remove a spool of a task that
            // never does.
            form.appendError = MultipartError(.lengthUnknown, partIndex: index, partName: form.bodyParts[index].name)
        }
        let body =
            strategy == .file && form.appendError == nil
            ? UploadBody.fileToWrite(Self.temporaryBodyURL()) : .stream
        let upload = MultipartUpload(
            form: form, role: .callerTask(body), callerSession: self, origin: request.url, pacing: pacing,
            progress: progress.map { ProgressCoalescer(totalBytes: form.contentLength, handler: $0) }
        ) { result in
            switch result {
            case .success(let (data, response)): completionHandler(data, response, nil)
            case .failure(let error): completionHandler(nil, nil, error)
            }
        }
        // This session is alive (it is `self`), so there is a task.
        return upload.makeUploadTask(for: request)!
    }

    /// A new name in the temporary directory, with the process's identifier: whose a file left there is shows.
    private static func temporaryBodyURL() -> URL {
        let name = "MultipartStream-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString).multipart"
        return FileManager.default.temporaryDirectory.appendingPathComponent(name)
    }

    /// Writes the body on a dispatch queue: a long blocking write must not hold a thread of the cooperative pool.
    private static func writeTemporaryFile(of form: MultipartFormData) async throws -> URL {
        let url = temporaryBodyURL()
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .utility).async {
                do {
                    try form.writeEncodedData(to: url)
                    continuation.resume(returning: url)
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}
