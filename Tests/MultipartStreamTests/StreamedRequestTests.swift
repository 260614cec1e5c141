import Foundation
import MultipartStream
import MultipartStreamTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// `uploadTask(withStreamedRequest:)` as AFNetworking's users write it: the request made with
    /// `URLRequest(url:multipartFormData:)`, and the body asked for through `needNewBodyStream`.
    @Suite struct StreamedRequestTests {
        let directory: TemporaryDirectory
        let fileBody: Data
        let streamBody: Data

        init() throws {
            directory = try TemporaryDirectory()
            var generator = SeededGenerator(seed: 32)
            fileBody = Data([UInt8].random(count: 3 << 20, using: &generator))
            streamBody = Data([UInt8].random(count: 150_000, using: &generator))
        }

        /// A text field, a file and a stream factory's part.
        private func form() throws -> MultipartFormData {
            var form = MultipartFormData()
            form.append("Summer 2026", name: "album")
            try form.append(fileURL: directory.file("beach.mov", contents: fileBody), name: "video")
            let streamBody = streamBody
            form.append(length: UInt64(streamBody.count), name: "log", fileName: "app.log") {
                InputStream(data: streamBody)
            }
            return form
        }

        private func expectedParts(seenBy peer: Peer) -> [FormPart] {
            [
                FormPart(name: "album", body: Data("Summer 2026".utf8)),
                FormPart(name: "video", fileName: "beach.mov", contentType: "video/quicktime", body: fileBody),
                FormPart(name: "log", fileName: "app.log", contentType: "text/plain", body: streamBody),
            ].map { $0.seen(by: peer) }
        }

        /// Checks what the server parsed: every field, each byte, the exact length, no chunked framing.
        private func expectWholeForm(
            _ outcome: Outcome, _ form: MultipartFormData, server: UploadServer, peer: Peer
        ) throws {
            let data = try #require(outcome.data, "\(outcome.error.map { "\($0)" } ?? "")")
            let seen = try server.seen(in: data)
            #expect((outcome.response as? HTTPURLResponse)?.statusCode == 200, "\(seen.error ?? "")")
            #expect(seen.method == "POST")
            #expect(seen.bytes == Int(form.contentLength!))
            #expect(seen.contentLength == String(form.contentLength!))
            #expect(seen.transferEncoding == nil, "the body goes out raw, not chunked")
            let parts = try #require(seen.parts)
            // Byte-equal bodies: stronger than equal lengths and digests.
            #expect(parts == expectedParts(seenBy: peer))
        }

        // MARK: A delegate written as AFNetworking's is

        @Test(arguments: [UploadServer.Kind.node, .werkzeug])
        func aDelegateThatAnswersWithACopyOfTheRequestsStream(kind: UploadServer.Kind) async throws {
            let form = try form()
            let server = try await UploadServer(kind)
            let delegate = CopyingDelegate()
            let outcome = try await run(URLRequest(url: server.url(), multipartFormData: form), delegate: delegate)
            try expectWholeForm(outcome, form, server: server, peer: kind == .node ? .node : .werkzeug)
            #expect(delegate.streamsAsked == 1)
            // Progress from URLSession's own count, over the form's length: its expected total is 0 on Linux.
            #expect(delegate.lastSent?.total == Int64(form.contentLength!))
        }

        @Test func aDelegateThatAnswersWithACopyAfterAChallenge() async throws {
            let form = try form()
            let server = try await UploadServer()
            let delegate = CopyingDelegate()
            let outcome = try await run(
                URLRequest(url: server.url("/auth"), multipartFormData: form), delegate: delegate)
            try expectWholeForm(outcome, form, server: server, peer: .node)
            #expect(delegate.challenges == 1)
            #expect(delegate.streamsAsked == 2, "URLSession asks for the body again to resend it")
        }

        /// A 307 makes Apple's URLSession ask for a new stream; Linux URLSession sends the new request no body at
        /// all, which a delegate cannot change. Either way the server never parses a short form as a whole one.
        @Test func aDelegateThatAnswersWithACopyThroughA307() async throws {
            let form = try form()
            let server = try await UploadServer()
            let delegate = CopyingDelegate()
            var request = URLRequest(url: server.url("/redirect/307?to=/upload"), multipartFormData: form)
            // Linux URLSession sends the 307's request no body, so the server waits for it until this timeout.
            request.timeoutInterval = 1.5
            let outcome = try await run(request, delegate: delegate)
            #if canImport(Darwin)
                try expectWholeForm(outcome, form, server: server, peer: .node)
            #else
                if let data = outcome.data, let seen = try? server.seen(in: data) {
                    #expect(seen.bytes != Int(form.contentLength!) || seen.error != nil, "Linux resent the form?")
                    #expect((outcome.response as? HTTPURLResponse)?.statusCode != 200)
                } else {
                    #expect(outcome.error != nil)
                }
            #endif
        }

        /// A form holding a stream of unknown length has no length to give: URLSession frames it (chunked), and the
        /// ready delegate reports the whole body, not an answer before it was sent.
        @Test func aStreamOfUnknownLengthGoesChunkedThroughTheReadyDelegate() async throws {
            let server = try await UploadServer()
            var form = MultipartFormData()
            form.append("Summer 2026", name: "album")
            form.append(InputStream(data: streamBody), name: "log", fileName: "app.log")
            let reports = ProgressReports()
            let outcome = try await runWithReadyDelegate(
                URLRequest(url: server.url(), multipartFormData: form), reports: reports)
            let data = try #require(outcome.data, "\(outcome.error.map { "\($0)" } ?? "")")
            let seen = try server.seen(in: data)
            #expect(seen.transferEncoding == "chunked" && seen.contentLength == nil)
            #expect(
                seen.parts
                    == [
                        FormPart(name: "album", body: Data("Summer 2026".utf8)),
                        FormPart(name: "log", fileName: "app.log", contentType: "text/plain", body: streamBody),
                    ].map { $0.seen(by: .node) })
            #expect(reports.values.last?.totalBytes == nil && reports.values.last?.bytesSent == UInt64(seen.bytes))
        }

        // MARK: The one-call answer

        @Test(arguments: [UploadServer.Kind.node, .werkzeug])
        func theOneCallAnswer(kind: UploadServer.Kind) async throws {
            let form = try form()
            let server = try await UploadServer(kind)
            let delegate = CopyingDelegate(useHelper: true)
            let outcome = try await run(URLRequest(url: server.url(), multipartFormData: form), delegate: delegate)
            try expectWholeForm(outcome, form, server: server, peer: kind == .node ? .node : .werkzeug)
        }

        @Test func theOneCallAnswerAfterAChallenge() async throws {
            let form = try form()
            let server = try await UploadServer()
            let delegate = CopyingDelegate(useHelper: true)
            let outcome = try await run(
                URLRequest(url: server.url("/auth"), multipartFormData: form), delegate: delegate)
            try expectWholeForm(outcome, form, server: server, peer: .node)
            #expect(delegate.streamsAsked == 2)
        }

        @Test func theOneCallAnswerIsNilForABodyThatIsNotAForm() async throws {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:9/")!)
            request.httpBodyStream = InputStream(data: Data("x".utf8))
            let task = URLSession(configuration: .ephemeral).uploadTask(withStreamedRequest: request)
            #expect(MultipartBodyStream.bodyStream(for: task) == nil)
            let form = try form()
            let formTask = URLSession(configuration: .ephemeral).uploadTask(
                withStreamedRequest: URLRequest(url: URL(string: "http://127.0.0.1:9/")!, multipartFormData: form))
            let stream = try #require(MultipartBodyStream.bodyStream(for: formTask))
            #expect(stream !== formTask.originalRequest?.httpBodyStream, "a new stream, not the request's own")
            #expect(stream.streamStatus == .notOpen)
            #expect(stream.drain().bytes == (try form.encode()))
        }

        // MARK: The ready delegate

        @Test(arguments: [UploadServer.Kind.node, .werkzeug])
        func theReadyDelegateOnASessionWithNoOtherDelegate(kind: UploadServer.Kind) async throws {
            let form = try form()
            let server = try await UploadServer(kind)
            let reports = ProgressReports()
            let outcome = try await runWithReadyDelegate(
                URLRequest(url: server.url(), multipartFormData: form), reports: reports)
            try expectWholeForm(outcome, form, server: server, peer: kind == .node ? .node : .werkzeug)
            let seen = reports.values.map(\.bytesSent)
            #expect(seen.last == form.contentLength!, "progress ends at the whole form")
            #expect(seen == seen.sorted() && Set(seen).count == seen.count, "progress only rises: \(seen)")
            #expect(seen.filter { $0 == form.contentLength! }.count == 1, "100% once")
        }

        @Test func theReadyDelegateAnswersAChallengeWithTheStoredCredential() async throws {
            let form = try form()
            let server = try await UploadServer()
            let url = server.url("/auth")
            let reports = ProgressReports()
            let outcome = try await runWithReadyDelegate(
                URLRequest(url: url, multipartFormData: form), reports: reports,
                configuration: storingCredential(for: url))
            try expectWholeForm(outcome, form, server: server, peer: .node)
            #expect(
                reports.values.filter { $0.bytesSent == form.contentLength! }.count == 1, "100% once across the resend")
        }

        @Test func theReadyDelegateReturnsA401WithoutACredential() async throws {
            let server = try await UploadServer()
            let outcome = try await runWithReadyDelegate(
                URLRequest(url: server.url("/auth"), multipartFormData: try form()), reports: ProgressReports())
            #expect(outcome.error == nil)
            #expect((outcome.response as? HTTPURLResponse)?.statusCode == 401)
        }

        @Test func theReadyDelegateThroughA307() async throws {
            let form = try form()
            let server = try await UploadServer()
            let outcome = try await runWithReadyDelegate(
                URLRequest(url: server.url("/redirect/307?to=/upload"), multipartFormData: form),
                reports: ProgressReports())
            #if canImport(Darwin)
                try expectWholeForm(outcome, form, server: server, peer: .node)
            #else
                // Linux URLSession would send the new request an empty body and report success.
                let error = try #require(outcome.error as? MultipartError)
                guard case .redirectNotFollowed(307, let location) = error.reason else {
                    Issue.record("\(error)")
                    return
                }
                #expect(location?.path == "/upload")
                #expect(try await server.log().filter { $0.path == "/upload" }.isEmpty, "nothing sent on")
            #endif
        }

        /// A 303 to another origin: a GET without the form's headers, and without the caller's credentials.
        @Test func theReadyDelegateTurnsA303ToAnotherOriginIntoAGetWithoutCredentials() async throws {
            let server = try await UploadServer()
            var request = URLRequest(url: server.url("/elsewhere/303?to=/headers"), multipartFormData: try form())
            request.setValue("Bearer secret", forHTTPHeaderField: "Authorization")
            request.setValue("session=secret", forHTTPHeaderField: "Cookie")
            let outcome = try await runWithReadyDelegate(request, reports: ProgressReports())
            let seen = try server.seen(in: try #require(outcome.data, "\(outcome.error.map { "\($0)" } ?? "")"))
            #expect(outcome.response?.url?.host == "localhost")
            #expect(seen.method == "GET")
            #expect(seen.contentLength == nil, "no Content-Length left to wait for")
            #expect(seen.bytes == 0)
            #expect(seen.authorization == nil)
            #expect(seen.cookie == nil)
        }

        @Test func theReadyDelegateFailsAnAnswerThatCameBeforeTheBody() async throws {
            var form = MultipartFormData()
            form.append(Data(repeating: 1, count: 8 << 20), name: "big", fileName: "big.bin")
            let server = try await UploadServer()
            let outcome = try await runWithReadyDelegate(
                URLRequest(url: server.url("/early"), multipartFormData: form), reports: ProgressReports())
            #expect(outcome.data == nil)
            if let error = outcome.error as? MultipartError {
                guard case .answeredBeforeBodySent(200, let sent, let length?) = error.reason else {
                    Issue.record("\(error)")
                    return
                }
                #expect(sent < length)
            } else {
                // The connection may break first: a failure all the same, never a success.
                #expect(outcome.error != nil)
            }
        }

        /// A file edited on disk after it was appended: the task fails naming the part, and the server never
        /// parses a whole form.
        @Test func theReadyDelegateFailsAFileThatChangedSinceItWasAppended() async throws {
            let file = try directory.file("notes.txt", contents: Data(repeating: 65, count: 200_000))
            var form = MultipartFormData()
            form.append("x", name: "first")
            try form.append(fileURL: file, name: "notes")
            try Data(repeating: 66, count: 100_000).write(to: file)
            let server = try await UploadServer()
            let outcome = try await runWithReadyDelegate(
                URLRequest(url: server.url(), multipartFormData: form), reports: ProgressReports())
            let error = try #require(outcome.error as? MultipartError, "\(outcome)")
            #expect(error.part?.name == "notes")
            #expect(error.category == .file)
            #expect(outcome.data == nil)
            #expect(try await server.log().allSatisfy { $0.bytes < Int(form.contentLength!) })
        }

        @Test func theReadyDelegateFailsAOneShotPartThatMustBeSentTwiceNamingIt() async throws {
            var form = MultipartFormData()
            form.append("x", name: "first")
            form.append(InputStream(data: Data(repeating: 9, count: 50_000)), length: 50_000, name: "once")
            let server = try await UploadServer()
            let url = server.url("/auth")
            let outcome = try await runWithReadyDelegate(
                URLRequest(url: url, multipartFormData: form), reports: ProgressReports(),
                configuration: storingCredential(for: url))
            let error = try #require(outcome.error as? MultipartError, "\(outcome)")
            #expect(error.part?.name == "once")
            #expect(error.part?.index == 1)
            guard case .streamAlreadyConsumed = error.reason else {
                Issue.record("\(error)")
                return
            }
        }

        // MARK: Running a task

        /// A configuration whose credential storage answers the Node server's Basic challenge at `url` with u:p.
        private func storingCredential(for url: URL) -> URLSessionConfiguration {
            let configuration = URLSessionConfiguration.ephemeral
            let storage = URLCredentialStorage()
            storage.setDefaultCredential(
                URLCredential(user: "u", password: "p", persistence: .forSession),
                for: URLProtectionSpace(
                    host: "127.0.0.1", port: url.port!, protocol: "http", realm: "uploads",
                    authenticationMethod: NSURLAuthenticationMethodHTTPBasic))
            configuration.urlCredentialStorage = storage
            return configuration
        }

        private func run(_ request: URLRequest, delegate: CopyingDelegate) async throws -> Outcome {
            let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
            defer { session.finishTasksAndInvalidate() }
            return await withCheckedContinuation { continuation in
                delegate.finished = { continuation.resume(returning: $0) }
                session.uploadTask(withStreamedRequest: request).resume()
            }
        }

        private func runWithReadyDelegate(
            _ request: URLRequest,
            reports: ProgressReports,
            configuration: URLSessionConfiguration = .ephemeral
        ) async throws -> Outcome {
            try await withCheckedThrowingContinuation { continuation in
                let delegate = MultipartStreamedUploadDelegate { _, progress in
                    reports.append(progress)
                } completion: { _, data, response, error in
                    continuation.resume(returning: Outcome(data: data, response: response, error: error))
                }
                let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
                session.uploadTask(withStreamedRequest: request).resume()
                session.finishTasksAndInvalidate()
            }
        }
    }
}

/// What a streamed task ended with.
private struct Outcome: @unchecked Sendable {
    // @unchecked: set once, read after the task ended.
    var data: Data?
    var response: URLResponse?
    var error: (any Error)?
}

/// A session delegate as AFNetworking's `AFURLSessionManager` is: it answers `needNewBodyStream` with a copy of the
/// original request's stream (or with the package's one call), Basic challenges with u:p, and collects the answer.
private final class CopyingDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Lock()
    private let useHelper: Bool
    private var data = Data()
    private var asked = 0
    private var challenged = 0
    var finished: (@Sendable (Outcome) -> Void)?

    init(useHelper: Bool = false) {
        self.useHelper = useHelper
    }

    private var sent: (total: Int64, expected: Int64)?
    var streamsAsked: Int { lock.withLock { asked } }
    /// `didSendBodyData`'s last totals.
    var lastSent: (total: Int64, expected: Int64)? { lock.withLock { sent } }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        lock.withLock { sent = (totalBytesSent, totalBytesExpectedToSend) }
    }
    var challenges: Int { lock.withLock { challenged } }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void
    ) {
        lock.withLock { asked += 1 }
        if useHelper {
            completionHandler(MultipartBodyStream.bodyStream(for: task))
        } else {
            completionHandler((task.originalRequest?.httpBodyStream as? NSCopying)?.copy(with: nil) as? InputStream)
        }
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        lock.withLock { challenged += 1 }
        completionHandler(.useCredential, URLCredential(user: "u", password: "p", persistence: .none))
    }

    /// Linux URLSession hands over a 401's body before the answer that follows it, as AFNetworking's delegate too
    /// would see.
    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        lock.withLock { data = Data() }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.withLock { self.data.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (data, finished) = lock.withLock { (self.data, self.finished) }
        finished?(
            Outcome(data: error == nil ? data : nil, response: task.response, error: error))
    }
}
