import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSession {
    /// Uploads `form` with `request` (POST unless it says otherwise) and returns the response once it has arrived.
    ///
    /// The body streams lazily (or, with `.file`, from a temporary file that is removed afterwards), with its exact
    /// `Content-Length` and no chunked framing on every platform. Cancelling the surrounding task cancels the upload
    /// at once and closes the file being read, and throws `CancellationError`. A part that fails while streaming
    /// throws its ``MultipartError``, and so does a 2xx that came before the whole body was handed out
    /// (``MultipartError/Reason/answeredBeforeBodySent(statusCode:bytesSent:contentLength:)``). See
    /// <doc:HandlingErrors> for everything it throws.
    ///
    /// The uploads of one session run on one private session made from its configuration, and share its
    /// connections. This session's delegate is asked as URLSession asks it about its own tasks, on this session's
    /// `delegateQueue`: it answers authentication challenges (session-wide ones through the session-level method
    /// when it has no task-level one), and decides redirects (`nil` from `willPerformHTTPRedirection` makes the 3xx
    /// the answer; the request it returns is the one sent). A redirect to another origin carries none of the
    /// request's `Authorization`, `Cookie` and `Proxy-Authorization` headers, nor a user and password in its URL,
    /// unless the delegate puts them back. A retry after a 401 or a 307/308 redirect sends the whole body again.
    /// Background sessions cannot be used: see ``MultipartUploadStrategy/file``.
    ///
    /// ```swift
    /// let (data, response) = try await URLSession.shared.upload(
    ///     form, with: URLRequest(url: url),
    ///     headers: .fresh { _ in ["Authorization": "Bearer \(try await tokens.current())"] },
    ///     acceptableStatusCodes: 200..<300)
    /// ```
    ///
    /// - Parameters:
    ///   - form: The form to send. Its `Content-Type` and `Content-Length` replace the request's.
    ///   - request: The URL, method (POST when it is GET) and other headers.
    ///   - strategy: `.automatic` (the default) streams, or sends a small form held in memory as bytes; `.stream`
    ///     always reads the parts as they are sent (`.stream(pacing:)` paced); `.file` writes the body to a temporary
    ///     file first; `.resumable(policy)` streams and, against a server that speaks the resumable-upload draft,
    ///     sends only what the server lacks after a dropped connection.
    ///   - headers: ``MultipartHeaders`` (`.fresh { request, reason in [...] }`): headers to set on each request
    ///     the upload sends, asked just before each and told why (``MultipartHeaders/Reason``): the form's own, the
    ///     request after a redirect, a resend after a 401 (once, when the headers it gives then differ from the ones
    ///     the 401 answered; a form with a one-shot part throws ``MultipartError/Reason/streamAlreadyConsumed``
    ///     instead), and each request of a resumable upload. They are judged as the request's own headers:
    ///     credentials never reach another origin. An error it throws fails the upload with that error. `nil` (the
    ///     default) sends the request's own headers.
    ///   - credentialsToOtherOrigins: Whether the request's credentials (its `Authorization`, `Cookie` and
    ///     `Proxy-Authorization`, a user and password in its URL, and the same from `headers`) go along where the
    ///     upload is sent to another origin (a redirect, a resumable upload's `Location`), as curl's
    ///     `--location-trusted`. `false` (the default) keeps them to the first URL's origin.
    ///   - acceptableStatusCodes: The statuses that count as success; any other throws
    ///     ``MultipartError/Reason/unacceptableStatus(statusCode:body:)`` with the response
    ///     (``MultipartError/response``) and the first 64 KiB of its body, as soon as it has them. `nil` (the default)
    ///     returns every response, whatever its status, as URLSession does.
    ///   - responseBody: Where the answer's body goes (``MultipartResponseBody``): `.inMemory` (the default) returns
    ///     it, up to 16 MiB, and throws ``MultipartError/Reason/responseTooLarge(statusCode:limit:)`` past that;
    ///     `.inMemory(upTo:)` sets another bound; `.file(url)` and `.chunks { response, data in }` take it as it
    ///     arrives, in bounded memory, and the upload returns empty `Data`.
    ///   - progress: Called with the bytes handed to URLSession so far, on URLSession's reading thread, at most 10
    ///     times a second, rising while one body goes out and back where a body sent again starts (a 401, a
    ///     307/308, a resumable retry); keep it quick. `nil` for none. To observe progress from UI or another task
    ///     without a lock, or to cancel from it, pass a Foundation `Progress` instead.
    /// - Returns: The response's body (empty when `responseBody` takes it elsewhere) and the response.
    /// - Throws: ``MultipartError`` when a part fails, the form has an ``MultipartFormData/appendError``, the
    ///   session is a background one, the server answered before the body was sent, a resumable upload gave up, or
    ///   the status is not acceptable; the `headers` hook's error; `CancellationError` when the task is cancelled;
    ///   URLSession's `URLError` when the transfer fails.
    public func upload(
        _ form: MultipartFormData,
        with request: URLRequest,
        strategy: MultipartUploadStrategy = .automatic,
        headers: MultipartHeaders? = nil,
        credentialsToOtherOrigins: Bool = false,
        acceptableStatusCodes: Range<Int>? = nil,
        responseBody: MultipartResponseBody = .inMemory,
        progress: (@Sendable (MultipartUploadProgress) -> Void)? = nil
    ) async throws -> (Data, URLResponse) {
        try await upload(
            form, with: request, strategy: strategy, headers: headers,
            credentialsToOtherOrigins: credentialsToOtherOrigins, acceptableStatusCodes: acceptableStatusCodes,
            responseBody: responseBody, progress: progress, membership: .alone)
    }

    /// The upload above, as one of an upload queue's: `membership` is what the queue tells a resumable upload.
    package func upload(
        _ form: MultipartFormData,
        with request: URLRequest,
        strategy: MultipartUploadStrategy,
        headers: MultipartHeaders?,
        credentialsToOtherOrigins: Bool,
        acceptableStatusCodes: Range<Int>?,
        responseBody: MultipartResponseBody,
        progress: (@Sendable (MultipartUploadProgress) -> Void)?,
        membership: ResumableUpload.Membership
    ) async throws -> (Data, URLResponse) {
        let sink = ResponseSink(responseBody)
        let reception = ResponseReception.answer(accepting: acceptableStatusCodes, body: responseBody, sink: sink)
        do {
            // A status the caller refuses is the verdict of the request that brought the answer.
            let reply = try await send(
                form, with: request, strategy: strategy, refresh: headers, trusting: credentialsToOtherOrigins,
                reception: reception, progress: progress, membership: membership)
            try sink?.commit()
            return reply
        } catch {
            sink?.discard()
            throw error
        }
    }

    /// `upload(_:with:strategy:headers:credentialsToOtherOrigins:acceptableStatusCodes:responseBody:progress:)` (with a
    /// closure), keeping
    /// `progress` up to date and true: its `totalUnitCount` is the form's length (-1 while a stream's length is
    /// unknown) and its `completedUnitCount` the bytes handed to URLSession, back where a resend starts (a 401, a
    /// 307/308, a resumable retry), and one short of the total until the upload has succeeded: `isFinished` only then.
    /// Cancelling the upload cancels `progress`, and `progress.cancel()` cancels the upload, which throws
    /// `CancellationError`, as `URLSessionTask.progress` does on Apple platforms. A failed upload leaves it neither
    /// finished nor cancelled: await the upload to know how it ended. A `Progress` is safe to read from any thread or
    /// task, and observable where the platform observes it (`UIProgressView.observedProgress`, SwiftUI's
    /// `ProgressView(_:)`, KVO on Apple platforms).
    ///
    /// ```swift
    /// let progress = Progress(totalUnitCount: 0)  // the upload sets the total
    /// let upload = Task { try await URLSession.shared.upload(form, with: request, progress: progress) }
    /// // Elsewhere, any task or the main actor: progress.fractionCompleted; a Cancel button: progress.cancel()
    /// ```
    public func upload(
        _ form: MultipartFormData,
        with request: URLRequest,
        strategy: MultipartUploadStrategy = .automatic,
        headers: MultipartHeaders? = nil,
        credentialsToOtherOrigins: Bool = false,
        acceptableStatusCodes: Range<Int>? = nil,
        responseBody: MultipartResponseBody = .inMemory,
        progress: Progress
    ) async throws -> (Data, URLResponse) {
        progress.totalUnitCount = form.contentLength.map { Int64(clamping: $0) } ?? -1
        // A task of its own, so that `progress.cancel()`, from any thread, can cancel it.
        let work = Task {
            try await upload(
                form, with: request, strategy: strategy, headers: headers,
                credentialsToOtherOrigins: credentialsToOtherOrigins, acceptableStatusCodes: acceptableStatusCodes,
                responseBody: responseBody
            ) { sent in
                let total = sent.totalBytes.map { Int64(clamping: $0) }
                if let total, total != progress.totalUnitCount { progress.totalUnitCount = total }
                // Every byte handed out is not yet an upload that succeeded: finished only once it has.
                let count = Int64(clamping: sent.bytesSent)
                progress.completedUnitCount = total.map { min(count, max($0 - 1, 0)) } ?? count
            }
        }
        // Foundation calls a handler set on a cancelled Progress at once: the caller's is set back only on one that
        // was not cancelled, so that it runs once.
        let callersHandler = progress.cancellationHandler
        if progress.isCancelled {
            work.cancel()
        } else {
            progress.cancellationHandler = {
                work.cancel()
                callersHandler?()
            }
        }
        defer { if !progress.isCancelled { progress.cancellationHandler = callersHandler } }
        do {
            let reply = try await withTaskCancellationHandler {
                try await work.value
            } onCancel: {
                work.cancel()
            }
            if progress.totalUnitCount > 0 { progress.completedUnitCount = progress.totalUnitCount }
            return reply
        } catch let error as CancellationError {
            if !progress.isCancelled { progress.cancel() }
            throw error
        }
    }

    /// Sends `form` as `strategy` says, with the caller's fresh headers where there is a hook.
    private func send(
        _ form: MultipartFormData,
        with request: URLRequest,
        strategy: MultipartUploadStrategy,
        refresh: MultipartHeaders?,
        trusting credentialsToOtherOrigins: Bool,
        reception: ResponseReception,
        progress: (@Sendable (MultipartUploadProgress) -> Void)?,
        membership: ResumableUpload.Membership
    ) async throws -> (Data, URLResponse) {
        guard configuration.identifier == nil else { throw MultipartError(.backgroundSession) }
        if let appendError = form.appendError { throw appendError }
        let progress = progress.map { ProgressCoalescer(totalBytes: form.contentLength, handler: $0) }
        let requests = RequestMaker(
            hook: refresh, origin: request.url,
            trustsOtherOrigins: credentialsToOtherOrigins || strategy.resumption?.credentialsToOtherOrigins == true)
        if case .resumable(let policy, let pacing) = strategy.kind {
            return try await ResumableUpload(
                form: form, request: request, session: self, policy: policy,
                pacer: membership.pacer ?? pacing.map { MultipartPacer($0) },
                requests: requests, reception: reception, progress: progress, membership: membership
            ).run()
        }
        return try await WholeFormUpload(
            form: form, request: request, session: self, body: strategy.kind,
            pacer: strategy.pacing.map { MultipartPacer($0) },
            requests: requests, reception: reception, progress: progress
        ).run()
    }

    /// A suspended upload task for `form` (call `resume()`); `completionHandler` gets the response as
    /// `dataTask(with:completionHandler:)` would, or the error, a ``MultipartError`` when a part failed.
    ///
    /// With `.file` the body is written to a temporary file when the task starts (a task never resumed leaves none) and
    /// removed when it ends; if writing fails, the task fails with that ``MultipartError``. `progress` is called as in
    /// `upload(_:with:strategy:headers:credentialsToOtherOrigins:acceptableStatusCodes:responseBody:progress:)` (with
    /// a closure), and this session's delegate is asked on its `delegateQueue` as there, with the same rule for
    /// credentials on redirects.
    /// Stop the task with ``cancelMultipartUpload(_:)``, which stops reading at once and closes any open file, and
    /// never traps: on Linux, the task's own `cancel()` traps the process when it meets the task's end (see
    /// <doc:LinuxNotes>). A task never resumed keeps neither this
    /// session nor its connections alive. A task is made before its first byte and cannot be replaced: it cannot
    /// resume, nor refresh its headers, and on Linux a 307/308 redirect fails it with
    /// ``MultipartError/Reason/redirectNotFollowed(statusCode:location:)``. A form holding a stream of unknown length
    /// fails it with ``MultipartError/Reason/lengthUnknown``.
    ///
    /// - Parameters:
    ///   - request: The URL, method (POST when it is GET) and other headers.
    ///   - form: The form to send. Its `Content-Type` and `Content-Length` replace the request's.
    ///   - strategy: `.stream` (the default, `.stream(pacing:)` paced) or `.file`.
    ///   - credentialsToOtherOrigins: Whether the request's credentials go along on a redirect to another origin,
    ///     as curl's `--location-trusted`; `false` (the default) keeps them to its own.
    ///   - progress: Called with the bytes handed to URLSession so far; `nil` for none.
    ///   - completionHandler: Called once with the body and response, or with the error: a ``MultipartError`` when a
    ///     part failed or the form cannot be sent.
    /// - Returns: The task, suspended.
    public func multipartUploadTask(
        with request: URLRequest,
        form: MultipartFormData,
        strategy: MultipartTaskStrategy = .stream,
        credentialsToOtherOrigins: Bool = false,
        progress: (@Sendable (MultipartUploadProgress) -> Void)? = nil,
        completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void
    ) -> URLSessionUploadTask {
        // What keeps the body from being sent fails the task when it is resumed: its body stream fails with it.
        let refusal: MultipartError? =
            if configuration.identifier != nil {
                MultipartError(.backgroundSession)
            } else if let appendError = form.appendError {
                appendError
            } else if let index = form.partOfUnknownLength {
                // A task's `Content-Length` is set before it starts, and nothing would remove a spool of a task that
                // never does.
                MultipartError(.lengthUnknown, partIndex: index, partName: form.bodyParts[index].name)
            } else {
                nil
            }
        let body: UploadBody =
            if let refusal { .failed(refusal) } else if strategy.writesFile {
                .fileToWrite(TemporaryBody.url())
            } else { .stream }
        let requests = RequestMaker(hook: nil, origin: request.url, trustsOtherOrigins: credentialsToOtherOrigins)
        let upload = UploadRequest(
            form: form, role: .callerTask(body), callerSession: self, requests: requests,
            pacer: strategy.pacing.map { MultipartPacer($0) },
            reception: .answer(accepting: nil, body: .inMemory, sink: nil),
            progress: progress.map { ProgressCoalescer(totalBytes: form.contentLength, handler: $0) }
        ) { result in
            switch result {
            case .success(let (data, response)): completionHandler(data, response, nil)
            case .failure(let error): completionHandler(nil, nil, error)
            }
        }
        // This session is alive (it is `self`), so there is a task.
        return upload.makeUploadTask(for: requests.judged(request))!
    }
}
