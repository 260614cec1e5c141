import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One upload of a form: the delegate of a private session made from the caller's session's configuration.
///
/// A private session, because Linux URLSession sends delegate events only to the session's delegate (task
/// delegates hear nothing but `needNewBodyStream`), and a stream upload needs them all: a fresh stream for every
/// send, the response body, the redirect and authentication decisions, and the end of the task to close files.
/// Authentication challenges go on to the caller's session delegate, so its credentials and policies still apply.
final class MultipartUpload: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: every mutable property is guarded by `lock`; the rest are constants.
    typealias Completion = @Sendable (Result<(Data, URLResponse), any Error>) -> Void

    /// The form; its `appendError` is also why no body can be sent (a background session, a temporary file that
    /// could not be written), and then every stream fails with it.
    private let form: MultipartFormData
    /// The `.file` strategy's temporary file, removed when the task ends.
    private let bodyFile: URL?
    private let progressHandler: (@Sendable (MultipartUploadProgress) -> Void)?
    /// The caller's session, whose delegate hears authentication challenges.
    private let callerSession: URLSession
    /// Whether a 307 or 308 that Linux URLSession cannot follow with the body is followed here, with a new task.
    /// Only where this object owns the whole exchange (the async API): a task handed to the caller must be the one
    /// that sends.
    private let followsRedirects: Bool
    private let completion: Completion

    private let lock = NSLock()
    private var task: URLSessionTask?
    private var streams: [MultipartBodyStream] = []
    private var received = Data()
    private var reportedBytes: UInt64 = 0
    private var stopReason: MultipartError?
    /// A 307 or 308 to send again, to the new URL, once the current task has ended.
    private var pendingRedirect: URLRequest?
    private var redirectCount = 0
    private var isCancelled = false
    private var isFinished = false

    init(
        form: MultipartFormData,
        bodyFile: URL?,
        callerSession: URLSession,
        followsRedirects: Bool,
        progress: (@Sendable (MultipartUploadProgress) -> Void)?,
        completion: @escaping Completion
    ) {
        self.followsRedirects = followsRedirects
        self.form = form
        self.bodyFile = bodyFile
        self.callerSession = callerSession
        self.progressHandler = progress
        self.completion = completion
    }

    /// Makes the (suspended) task on a private session; the session lets go of this delegate when the task ends.
    func makeTask(for request: URLRequest) -> URLSessionUploadTask {
        let configuration =
            form.appendError == nil ? callerSession.configuration : URLSessionConfiguration.ephemeral
        let session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        var request = request
        if request.httpMethod == nil || request.httpMethod == "GET" { request.httpMethod = "POST" }
        request.httpBody = nil
        request.httpBodyStream = nil
        request.setValue(form.contentType, forHTTPHeaderField: "Content-Type")
        let task: URLSessionUploadTask
        if let bodyFile {
            request.setValue(String(form.contentLength), forHTTPHeaderField: "Content-Length")
            task = session.uploadTask(with: request, fromFile: bodyFile)
        } else {
            #if canImport(Darwin)
                request.setValue(String(form.contentLength), forHTTPHeaderField: "Content-Length")
            #else
                // Linux sends streams chunked; a Content-Length beside it makes strict servers reject the request.
                request.setValue(nil, forHTTPHeaderField: "Content-Length")
                // Linux adds `Expect: 100-continue` to streamed uploads and then waits a second for servers that
                // never answer it. A blank value makes libcurl leave the header out (an empty one would send
                // `Expect:`, which Node answers with 417).
                if request.value(forHTTPHeaderField: "Expect") == nil {
                    request.setValue(" ", forHTTPHeaderField: "Expect")
                }
            #endif
            task = session.uploadTask(withStreamedRequest: request)
        }
        let isCancelled = lock.withLock {
            self.task = task
            return self.isCancelled
        }
        // A redirect's new task made after a cancel would otherwise run.
        if isCancelled { task.cancel() }
        return task
    }

    /// Cancels the task and closes every body stream at once, which closes the file being read.
    func cancel() {
        let (task, streams) = lock.withLock {
            isCancelled = true
            return (self.task, self.streams)
        }
        task?.cancel()
        for stream in streams { stream.close() }
    }

    // MARK: Body

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void
    ) {
        let stream = form.makeBodyStream()
        stream.progressHandler = { [weak self] sent in self?.report(bytesSent: sent) }
        let isCancelled = lock.withLock {
            streams.append(stream)
            return self.isCancelled
        }
        if isCancelled { stream.close() }
        completionHandler(stream)
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        // Streams report their own progress, since URLSession's counts for them are 0 on Linux.
        if bodyFile != nil { report(bytesSent: UInt64(max(0, totalBytesSent))) }
    }

    /// Reports progress that went forward: a resend after a 401 starts again from 0 and is not reported until it
    /// passes what was already reported, so 100% is reported exactly once.
    private func report(bytesSent: UInt64) {
        guard let progressHandler else { return }
        let isNew = lock.withLock {
            guard bytesSent > reportedBytes, !isFinished else { return false }
            reportedBytes = bytesSent
            return true
        }
        if isNew { progressHandler(MultipartUploadProgress(bytesSent: bytesSent, totalBytes: form.contentLength)) }
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
        #if canImport(Darwin)
            // Apple's URLSession resends the body: it asks for a new stream, or reads the file again.
            completionHandler(request)
        #else
            // swift-corelibs-foundation resends 307 and 308 with an empty body and reports success. Stop it, and
            // send the whole body again with a new task, to the same origin only: headers such as Authorization
            // must not follow the body to another host. 301, 302 and 303 turn the request into a GET without a
            // body, as browsers do.
            guard response.statusCode == 307 || response.statusCode == 308 else { return completionHandler(request) }
            let current = task.currentRequest ?? task.originalRequest
            lock.withLock {
                if followsRedirects, redirectCount < 10, let current, let target = request.url,
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
        /// identity, so a space equal in every field but made elsewhere finds nothing; match the fields instead, and
        /// take a space's credential when it has exactly one.
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
            guard matching.count == 1, let credentials = matching.first?.value, credentials.count == 1 else {
                return nil
            }
            return credentials.first?.value
        }
    #endif

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
        let (streams, data, stopReason, isCancelled, redirect) = lock.withLock {
            let redirect = error == nil && !self.isCancelled ? pendingRedirect : nil
            pendingRedirect = nil
            if redirect != nil { redirectCount += 1 }
            defer { self.streams = [] }
            return (self.streams, received, self.stopReason, self.isCancelled, redirect)
        }
        // A failed stream's error names the part and the reason; URLSession only says the upload was aborted.
        let streamFailure = streams.lazy.compactMap { $0.streamStatus == .error ? $0.streamError : nil }.first
        for stream in streams { stream.close() }
        if let redirect, streamFailure == nil {
            makeTask(for: redirect).resume()
            return
        }
        lock.withLock { isFinished = true }
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
        } else if let response = task.response {
            completion(.success((data, response)))
        } else {
            completion(.failure(URLError(.badServerResponse)))
        }
    }
}
