import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One upload of a form, over one or more tasks (a redirect the upload follows itself makes a new one) of the
/// caller session's ``UploadSession``, which hands it its tasks' events.
///
/// It makes a fresh stream for every send, keeps the response body, decides redirects and authentication (asking
/// the caller's session delegate first), reports progress, and at the end closes every stream and tells the
/// caller what the server really got: a 2xx that came before the whole body was handed out is a failure.
final class MultipartUpload: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: every mutable property is guarded by `lock`; the rest are constants.
    typealias Completion = @Sendable (Result<(Data, URLResponse), any Error>) -> Void

    /// The form; its `appendError` is also why no body can be sent (a background session, a temporary file that
    /// could not be written), and then every stream fails with it.
    private let form: MultipartFormData
    /// The `.file` strategy's temporary file, removed when the task ends.
    private let bodyFile: URL?
    /// Whether `bodyFile` is written when the task first asks for its body rather than before the task is made:
    /// a task handed to the caller may never be resumed, and must then leave no file behind.
    private let writesBodyFileOnStart: Bool
    /// Whether `bodyFile` has been written, or is being written (guarded by `lock`).
    private var isBodyFileWritten = false
    private let progress: ProgressCoalescer?
    /// The caller's session: its private session carries the tasks, and its delegate hears challenges.
    private let callerSession: URLSession
    /// Whether this object owns the whole exchange (the async API), rather than handing its task to the caller.
    /// Then it follows a 307 or 308 that Linux URLSession cannot follow with the body itself, with a new task, and
    /// streams through a data task, whose every 64 KiB Linux URLSession does not report to the delegate queue as it
    /// does an upload task's. A task handed to the caller is an upload task and must be the one that sends.
    private let ownsTask: Bool
    private let completion: Completion

    private let lock = Lock()
    private var task: URLSessionTask?
    private var streams: [MultipartBodyStream] = []
    private var received = Data()
    /// Body bytes of the current task that URLSession reported sent (`.file`, where it counts them).
    private var fileBytesSent: UInt64 = 0
    private var stopReason: MultipartError?
    /// A 307 or 308 to send again, to the new URL, once the current task has ended.
    private var pendingRedirect: URLRequest?
    private var redirectCount = 0
    private var isCancelled = false

    init(
        form: MultipartFormData,
        bodyFile: URL?,
        writesBodyFileOnStart: Bool,
        callerSession: URLSession,
        ownsTask: Bool,
        progress: (@Sendable (MultipartUploadProgress) -> Void)?,
        completion: @escaping Completion
    ) {
        self.ownsTask = ownsTask
        self.form = form
        self.bodyFile = bodyFile
        self.writesBodyFileOnStart = writesBodyFileOnStart
        self.callerSession = callerSession
        self.progress = progress.map { ProgressCoalescer(totalBytes: form.contentLength, handler: $0) }
        self.completion = completion
    }

    /// A suspended task, on the caller session's private session, that sends `request` with the form: from the
    /// temporary file, else, when this object owns the exchange, a data task that streams it.
    func makeTask(for request: URLRequest) -> URLSessionTask {
        guard ownsTask, bodyFile == nil else { return makeUploadTask(for: request) }
        var request = prepared(request)
        request.httpBodyStream = makeStream()
        return started(UploadSession.makeTask(for: self, of: callerSession) { $0.dataTask(with: request) })
    }

    /// A suspended upload task that sends `request` with the form, from the temporary file or streamed.
    func makeUploadTask(for request: URLRequest) -> URLSessionUploadTask {
        let request = prepared(request)
        let task = UploadSession.makeTask(for: self, of: callerSession) { session -> URLSessionUploadTask in
            if let bodyFile, !writesBodyFileOnStart {
                session.uploadTask(with: request, fromFile: bodyFile)
            } else {
                session.uploadTask(withStreamedRequest: request)
            }
        }
        return started(task)
    }

    /// `request` as the form's: POST unless it names another method, the form's headers, no body of its own.
    private func prepared(_ request: URLRequest) -> URLRequest {
        var request = request
        if request.httpMethod == nil || request.httpMethod == "GET" { request.httpMethod = "POST" }
        request.httpBody = nil
        request.httpBodyStream = nil
        request.setValue(form.contentType, forHTTPHeaderField: "Content-Type")
        request.setBodyLength(form.contentLength)
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

    /// A new stream of the form, reporting progress, closed at once if the upload was cancelled.
    private func makeStream() -> MultipartBodyStream {
        let stream = form.makeBodyStream()
        if let progress { stream.progressHandler = progress.report }
        let isCancelled = lock.withLock {
            streams.append(stream)
            return self.isCancelled
        }
        if isCancelled { stream.close() }
        return stream
    }

    /// Closes every body stream at once, which closes the file being read, and cancels the task. Returns at once:
    /// Linux URLSession cancels a task on the queue that reads the body, which a caller stream blocked in `read`
    /// holds until it returns, so the task is cancelled from another thread.
    func cancel() {
        let (task, streams) = lock.withLock {
            isCancelled = true
            return (self.task, self.streams)
        }
        for stream in streams { stream.close() }
        if let task {
            DispatchQueue.global().async { task.cancel() }
        }
    }

    // MARK: Body

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void
    ) {
        guard let bodyFile, writesBodyFileOnStart else { return completionHandler(makeStream()) }
        // Written outside the lock, which cancel() must never wait for; the delegate queue is serial, so a second
        // ask (a resend) comes after this one.
        let needsWriting = lock.withLock {
            defer { isBodyFileWritten = true }
            return !isBodyFileWritten
        }
        do throws(MultipartError) {
            if needsWriting { try form.writeEncodedData(to: bodyFile) }
            completionHandler(InputStream(url: bodyFile))
        } catch {
            // A stream that fails at once with the reason, so that the task fails and reports it.
            var failing = form
            failing.appendError = error
            completionHandler(failing.makeBodyStream())
        }
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        // Streams report their own progress, since URLSession's counts for them are 0 on Linux.
        guard bodyFile != nil else { return }
        let sent = UInt64(max(0, totalBytesSent))
        lock.withLock { fileBytesSent = sent }
        progress?.report(sent)
    }

    // MARK: Response

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        // A 401 or a redirect has a body of its own before the response that counts.
        lock.withLock { received = Data() }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.withLock { received.append(data) }
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        // The caller's delegate decides first, as it would for its own tasks: `nil` keeps the 3xx as the answer.
        Self.forward(redirect: response, to: request, task: task, to: callerSession) { request in
            guard let request else { return completionHandler(nil) }
            self.redirect(response, to: request, task: task, completionHandler: completionHandler)
        }
    }

    private func redirect(
        _ response: HTTPURLResponse,
        to request: URLRequest,
        task: URLSessionTask,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        #if canImport(Darwin)
            // Apple's URLSession resends the body: it asks for a new stream, or reads the file again.
            completionHandler(request)
        #else
            // swift-corelibs-foundation resends 307 and 308 with an empty body and reports success. Stop it, and
            // send the whole body again with a new task, to the same origin only: headers such as Authorization
            // must not follow the body to another host. 301, 302 and 303 turn the request into a GET without a
            // body, as browsers do.
            guard response.statusCode == 307 || response.statusCode == 308 else {
                // The GET has no body, but swift-corelibs-foundation keeps the headers that described it: a
                // Content-Length left on it would make the server wait for bytes that never come.
                var request = request
                if request.httpMethod == "GET" || request.httpMethod == "HEAD" { request.removeBodyHeaders() }
                return completionHandler(request)
            }
            let current = task.currentRequest ?? task.originalRequest
            lock.withLock {
                if ownsTask, redirectCount < 10, let current, let target = request.url,
                    Self.isSameOrigin(current.url, target)
                {
                    var resend = current
                    resend.url = target
                    pendingRedirect = resend
                } else {
                    let reason = MultipartError.Reason.redirectNotFollowed(
                        statusCode: response.statusCode, location: request.url)
                    stopReason = MultipartError(reason)
                }
            }
            completionHandler(nil)
        #endif
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        let storage = session.configuration.urlCredentialStorage
        Self.forward(challenge, task: task, to: callerSession) { disposition, credential in
            guard disposition == .performDefaultHandling else { return completionHandler(disposition, credential) }
            #if canImport(Darwin)
                completionHandler(.performDefaultHandling, nil)
            #else
                // Linux URLSession crashes on `.performDefaultHandling` and hangs without a credential: answer
                // with the stored credential once, else cancel, which ends the task with the 401 response.
                if challenge.previousFailureCount == 0,
                    let stored = storage.flatMap({ Self.storedCredential(for: challenge.protectionSpace, in: $0) })
                {
                    completionHandler(.useCredential, stored)
                } else {
                    completionHandler(.cancelAuthenticationChallenge, nil)
                }
            #endif
        }
    }

    #if !canImport(Darwin)
        /// The stored default credential for `space`. swift-corelibs-foundation compares protection spaces by
        /// identity, so a space equal in every field but made elsewhere finds nothing; match the fields instead.
        /// URLSession stores a second space with the same fields after the first use, so several spaces may match:
        /// their credentials count as one when they name the same user and password.
        private static func storedCredential(
            for space: URLProtectionSpace,
            in storage: URLCredentialStorage
        ) -> URLCredential? {
            if let credential = storage.defaultCredential(for: space) { return credential }
            let matching = storage.allCredentials.filter { stored, _ in
                stored.host == space.host && stored.port == space.port && stored.protocol == space.protocol
                    && stored.realm == space.realm && stored.authenticationMethod == space.authenticationMethod
                    && stored.isProxy() == space.isProxy()
            }
            let credentials = matching.values.flatMap(\.values)
            guard let first = credentials.first,
                credentials.allSatisfy({ $0.user == first.user && $0.password == first.password })
            else { return nil }
            return first
        }
    #endif

    /// Asks the caller's session delegate whether to follow a redirect; without an opinion it answers `request`.
    private static func forward(
        redirect response: HTTPURLResponse,
        to request: URLRequest,
        task: URLSessionTask,
        to callerSession: URLSession,
        answer: @escaping @Sendable (URLRequest?) -> Void
    ) {
        guard let delegate = callerSession.delegate as? URLSessionTaskDelegate else { return answer(request) }
        #if canImport(Darwin)
            // Delegate methods are optional in Objective-C.
            guard let method = delegate.urlSession(_:task:willPerformHTTPRedirection:newRequest:completionHandler:)
            else { return answer(request) }
            method(callerSession, task, response, request, answer)
        #else
            // In swift-corelibs-foundation the protocol's default follows the redirect.
            delegate.urlSession(
                callerSession, task: task, willPerformHTTPRedirection: response, newRequest: request,
                completionHandler: answer)
        #endif
    }

    /// Asks the caller's session delegate, which answers `.performDefaultHandling` when it has no opinion.
    private static func forward(
        _ challenge: URLAuthenticationChallenge,
        task: URLSessionTask,
        to callerSession: URLSession,
        answer: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        guard let delegate = callerSession.delegate as? URLSessionTaskDelegate else {
            return answer(.performDefaultHandling, nil)
        }
        #if canImport(Darwin)
            // Delegate methods are optional in Objective-C.
            guard let method = delegate.urlSession(_:task:didReceive:completionHandler:) else {
                return answer(.performDefaultHandling, nil)
            }
            method(callerSession, task, challenge, answer)
        #else
            // In swift-corelibs-foundation the protocol's default answers `.performDefaultHandling`.
            delegate.urlSession(callerSession, task: task, didReceive: challenge, completionHandler: answer)
        #endif
    }

    private static func isSameOrigin(_ first: URL?, _ second: URL) -> Bool {
        guard let first else { return false }
        return first.scheme?.lowercased() == second.scheme?.lowercased()
            && first.host?.lowercased() == second.host?.lowercased() && first.port == second.port
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (streams, data, stopReason, isCancelled, redirect, fileBytesSent) = lock.withLock {
            let redirect = error == nil && !self.isCancelled ? pendingRedirect : nil
            pendingRedirect = nil
            if redirect != nil { redirectCount += 1 }
            defer { self.streams = [] }
            return (
                self.streams, received, self.stopReason, self.isCancelled, redirect, self.fileBytesSent
            )
        }
        // A failed stream's error names the part and the reason; URLSession only says the upload was aborted.
        let streamFailure = streams.lazy.compactMap { $0.streamStatus == .error ? $0.streamError : nil }.first
        // Read before closing, which ends the count: the latest stream is the one the last request read.
        let bodyBytesSent = bodyFile == nil ? streams.last?.bytesRead ?? 0 : fileBytesSent
        for stream in streams { stream.close() }
        if let redirect, streamFailure == nil {
            makeTask(for: redirect).resume()
            return
        }
        progress?.finish()
        if let bodyFile { try? FileManager.default.removeItem(at: bodyFile) }

        if isCancelled {
            completion(.failure(URLError(.cancelled)))
        } else if let streamFailure {
            completion(.failure(streamFailure))
        } else if let stopReason {
            completion(.failure(stopReason))
        } else if let response = task.response as? HTTPURLResponse, error != nil,
            response.statusCode == 401 || response.statusCode == 407
        {
            // The challenge was cancelled for want of a credential: answer with the response, as Apple does.
            completion(.success((data, response)))
        } else if let error {
            completion(.failure(error))
        } else if let response = task.response as? HTTPURLResponse, (200..<300).contains(response.statusCode),
            bodyBytesSent < form.contentLength
        {
            // The server cannot have read bytes it was never given: it answered without the form. After a 301-303
            // the count is the first request's (the GET reads no stream): a server that redirected without reading
            // the form never got it either.
            let reason = MultipartError.Reason.answeredBeforeBodySent(
                statusCode: response.statusCode, bytesSent: bodyBytesSent, contentLength: form.contentLength)
            completion(.failure(MultipartError(reason)))
        } else if let response = task.response {
            completion(.success((data, response)))
        } else {
            completion(.failure(URLError(.badServerResponse)))
        }
    }
}
