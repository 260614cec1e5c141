import Foundation
import MultipartStream
import MultipartStreamTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// `URLSession.upload(_:with:strategy:progress:)` and `multipartUploadTask`, against real servers on loopback.
    /// Serialized: the temporary-file test must see only its own uploads' files.
    @Suite(.serialized) struct UploadTests {
        let directory: TemporaryDirectory
        let fileBody: Data
        let form: MultipartFormData
        let sent: [FormPart]

        init() throws {
            directory = try TemporaryDirectory()
            var generator = SeededGenerator(seed: 42)
            fileBody = Data([UInt8].random(count: 3 << 20, using: &generator))
            let streamBody = Data([UInt8].random(count: 70_000, using: &generator))
            var form = MultipartFormData()
            form.append("Ada \"quoted\" ü", name: "author")
            try form.append(fileURL: directory.file("clip.mp4", contents: fileBody), name: "video")
            form.append(length: UInt64(streamBody.count), name: "log", fileName: "a\r\nb.log") {
                InputStream(data: streamBody)
            }
            self.form = form
            sent = [
                FormPart(name: "author", body: Data("Ada \"quoted\" ü".utf8)),
                FormPart(name: "video", fileName: "clip.mp4", contentType: "video/mp4", body: fileBody),
                FormPart(name: "log", fileName: "a\r\nb.log", contentType: "text/plain", body: streamBody),
            ]
        }

        private func session(timeout: TimeInterval = 30, delegate: URLSessionDelegate? = nil) -> URLSession {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = timeout
            return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        }

        @Test(arguments: [UploadServer.Kind.node, .werkzeug], [MultipartUploadStrategy.stream, .file])
        func everyPartArrivesIntact(server kind: UploadServer.Kind, strategy: MultipartUploadStrategy) async throws {
            let server = try await UploadServer(kind)
            let (data, response) = try await session().upload(
                form, with: URLRequest(url: server.url()), strategy: strategy)
            let seen = try server.seen(in: data)
            #expect((response as? HTTPURLResponse)?.statusCode == 200, "\(seen.error ?? "")")
            #expect(seen.method == "POST")
            #expect(seen.contentType == form.contentType)
            #expect(UInt64(seen.bytes) == form.contentLength!)
            #expect(seen.parts == sent.map { $0.seen(by: kind == .node ? .node : .werkzeug) })
            #expect(seen.contentLength == String(form.contentLength!), "every strategy sends the exact length")
            #expect(seen.transferEncoding == nil, "and no chunked framing")
        }

        @Test func automaticStreamsWithTheExactLengthEvenWhenTheCallerGaveAWrongOne() async throws {
            let server = try await UploadServer()
            var withLength = URLRequest(url: server.url())
            withLength.setValue("1", forHTTPHeaderField: "Content-Length")
            withLength.setValue("chunked", forHTTPHeaderField: "Transfer-Encoding")
            let temporaryFiles = try TemporaryBodies.names()
            let (lengthy, _) = try await session().upload(form, with: withLength)
            #expect(try await TemporaryBodies.noneLeft(since: temporaryFiles), "no temporary copy")
            let seen = try server.seen(in: lengthy)
            #expect(seen.contentLength == String(form.contentLength!))
            #expect(seen.transferEncoding == nil)
            #expect(seen.parts == sent.map { $0.seen(by: .node) })
        }

        /// `.automatic` sends a small form held in memory as the request's own bytes: the same exact body, length
        /// and framing as a stream, sent whole again after a 401 (by URLSession) and a 307 or 308 (by the upload),
        /// with progress from URLSession's count.
        @Test(arguments: ["/upload", "/auth", "/redirect/307", "/redirect/308"])
        func aSmallFormInMemoryArrivesWholeThroughChallengesAndRedirects(path: String) async throws {
            let server = try await UploadServer()
            var generator = SeededGenerator(seed: 7)
            let photo = Data([UInt8].random(count: 40_000, using: &generator))
            var small = MultipartFormData()
            small.append("Ada \"quoted\" ü\r\n", name: "author")
            small.append(photo, name: "photo", fileName: "p\".jpg")
            var request = URLRequest(url: server.url(path))
            request.setValue("1", forHTTPHeaderField: "Content-Length")
            let reports = ProgressReports()
            let delegate = CredentialDelegate()
            let (data, response) = try await session(delegate: delegate).upload(small, with: request) {
                reports.append($0)
            }
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            let seen = try server.seen(in: data)
            let expected = [
                FormPart(name: "author", body: Data("Ada \"quoted\" ü\r\n".utf8)),
                FormPart(name: "photo", fileName: "p\".jpg", contentType: "image/jpeg", body: photo),
            ]
            #expect(seen.parts == expected.map { $0.seen(by: .node) })
            // A redirect's own request may go unread; the form counts where it was resent to.
            let log = try await server.log()
            let sends = path.hasPrefix("/redirect") ? log.filter { $0.path == "/upload" } : log
            let length = Int(small.contentLength!)
            #expect(sends.count == (path == "/auth" ? 2 : 1), "\(log.map(\.path))")
            #expect(sends.allSatisfy { $0.bytes == length && $0.contentLength == String(length) }, "each send whole")
            #expect(log.allSatisfy { $0.transferEncoding == nil })
            #expect(delegate.challenges == (path == "/auth" ? 1 : 0))
            let values = reports.values
            #expect(values.last?.bytesSent == small.contentLength!)
            // Each body sent rises; the resend after a redirect starts again from 0, where it shows.
            let restarts = zip(values, values.dropFirst()).filter { $0.bytesSent >= $1.bytesSent }
            #expect(restarts.count == (path.hasPrefix("/redirect") ? 1 : 0), "\(values.map(\.bytesSent))")
            #expect(restarts.allSatisfy { $0.1.bytesSent == 0 })
        }

        /// Linux URLSession adds `Expect: 100-continue` to streamed uploads and then waits a second for a server that
        /// does not answer it (this one does not); the upload leaves the header out.
        @Test func noExpectContinueRoundTrip() async throws {
            let server = try await UploadServer()
            for strategy in [MultipartUploadStrategy.stream, .file] {
                let (data, _) = try await session().upload(
                    form, with: URLRequest(url: server.url()), strategy: strategy)
                #expect(try server.seen(in: data).expect == nil, "\(strategy)")
            }
        }

        @Test func theMethodAndHeadersOfTheRequestAreKept() async throws {
            let server = try await UploadServer()
            var request = URLRequest(url: server.url())
            request.httpMethod = "PUT"
            request.setValue("Basic dTpw", forHTTPHeaderField: "Authorization")
            let (data, _) = try await session().upload(form, with: request)
            let seen = try server.seen(in: data)
            #expect(seen.method == "PUT")
            #expect(seen.authorization == "Basic dTpw")
        }

        @Test(arguments: [MultipartUploadStrategy.stream, .file])
        func progressRisesToExactlyOneHundredPercentOnce(strategy: MultipartUploadStrategy) async throws {
            let server = try await UploadServer()
            let reports = ProgressReports()
            _ = try await session().upload(form, with: URLRequest(url: server.url()), strategy: strategy) {
                reports.append($0)
            }
            let values = reports.values
            #expect(!values.isEmpty)
            #expect(values.allSatisfy { $0.totalBytes == form.contentLength! })
            #expect(zip(values, values.dropFirst()).allSatisfy { $0.bytesSent < $1.bytesSent }, "progress only rises")
            #expect(values.filter { $0.fractionCompleted == 1 }.count == 1)
            #expect(values.last?.bytesSent == form.contentLength!)
        }

        @Test func aFailingPartThrowsItsOwnError() async throws {
            var form = MultipartFormData()
            form.append("x", name: "first")
            form.append(length: 1 << 20, name: "short") { ScriptedStream(Array(repeating: 7, count: 1_000)) }
            let server = try await UploadServer()
            let error = try await #require(throws: MultipartError.self) {
                _ = try await session().upload(form, with: URLRequest(url: server.url()))
            }
            #expect(error.part?.name == "short")
            guard case .streamEndedEarly(expected: 1 << 20, received: 1_000) = error.reason else {
                Issue.record("\(error)")
                return
            }
            // With a Content-Length, a short body is an aborted request to the server, never a complete-looking one.
            let log = try await server.log()
            #expect(log.isEmpty, "the server took no request as complete")
        }

        @Test func aFileThatChangedFailsTheFileStrategyBeforeAnythingIsSent() async throws {
            let file = try directory.file("changing.bin", contents: Data(count: 1_000))
            var form = MultipartFormData()
            try form.append(fileURL: file, name: "doc")
            try Data(count: 10).write(to: file)
            let server = try await UploadServer()
            await #expect(throws: MultipartError.self) {
                _ = try await session().upload(form, with: URLRequest(url: server.url()), strategy: .file)
            }
            let log = try await server.log()
            #expect(log.isEmpty)
        }

        @Test func anInvalidFormIsRefusedBeforeAnythingIsSent() async throws {
            var form = MultipartFormData()
            form.append(Data(), name: "a", mimeType: "text/plain\r\nX-Injected: 1")
            let server = try await UploadServer()
            await #expect(throws: MultipartError.self) {
                _ = try await session().upload(form, with: URLRequest(url: server.url()))
            }
            let log = try await server.log()
            #expect(log.isEmpty)
        }

        #if canImport(Darwin)
            @Test func backgroundSessionsAreRefused() async throws {
                let configuration = URLSessionConfiguration.background(withIdentifier: "MultipartStreamTests-\(UUID())")
                let background = URLSession(configuration: configuration)
                let error = try await #require(throws: MultipartError.self) {
                    _ = try await background.upload(form, with: URLRequest(url: URL(string: "http://127.0.0.1:9/")!))
                }
                guard case .backgroundSession = error.reason else {
                    Issue.record("\(error)")
                    return
                }
            }
        #endif

        // MARK: Authentication and redirects

        @Test(arguments: [MultipartUploadStrategy.stream, .file])
        func aChallengeAnsweredByTheCallersDelegateResendsTheWholeBody(strategy: MultipartUploadStrategy) async throws {
            let server = try await UploadServer()
            let delegate = CredentialDelegate()
            let (data, response) = try await session(delegate: delegate).upload(
                form, with: URLRequest(url: server.url("/auth")), strategy: strategy)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            let seen = try server.seen(in: data)
            #expect(seen.authorization == "Basic dTpw")
            #expect(seen.parts == sent.map { $0.seen(by: .node) })
            #expect(seen.contentLength == String(form.contentLength!) && seen.transferEncoding == nil)
            #expect(delegate.challenges == 1)
            let log = try await server.log()
            #expect(log.map(\.bytes) == [Int(form.contentLength!), Int(form.contentLength!)], "both sends whole")
            #expect(log.allSatisfy { $0.contentLength == String(form.contentLength!) && $0.transferEncoding == nil })
        }

        @Test func aStoredCredentialAnswersTheChallenge() async throws {
            let server = try await UploadServer()
            let configuration = URLSessionConfiguration.ephemeral
            let storage = URLCredentialStorage()
            let url = server.url("/auth")
            let space = URLProtectionSpace(
                host: url.host!, port: url.port!, protocol: "http", realm: "uploads",
                authenticationMethod: NSURLAuthenticationMethodHTTPBasic)
            storage.setDefaultCredential(URLCredential(user: "u", password: "p", persistence: .forSession), for: space)
            configuration.urlCredentialStorage = storage
            let (data, _) = try await URLSession(configuration: configuration).upload(form, with: URLRequest(url: url))
            #expect(try server.seen(in: data).parts?.count == 3)
        }

        @Test func withoutACredentialThe401IsTheAnswer() async throws {
            // Linux URLSession hangs on a challenge nobody answers; the upload answers with the 401 instead.
            let server = try await UploadServer()
            let (_, response) = try await session(timeout: 20).upload(form, with: URLRequest(url: server.url("/auth")))
            #expect((response as? HTTPURLResponse)?.statusCode == 401)
        }

        @Test(arguments: [307, 308])
        func aRedirectThatMustResendTheBodyResendsItWhole(code: Int) async throws {
            // Apple's URLSession resends it with a fresh stream; on Linux the upload stops URLSession's empty resend and
            // sends the body again itself.
            let server = try await UploadServer()
            let (data, response) = try await session().upload(
                form, with: URLRequest(url: server.url("/redirect/\(code)")))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(response.url?.path == "/upload")
            #expect(try server.seen(in: data).parts == sent.map { $0.seen(by: .node) })
            let log = try await server.log()
            #expect(log.filter { $0.path == "/upload" }.map(\.bytes) == [Int(form.contentLength!)])
            #expect(log.filter { $0.path == "/upload" }.map(\.contentLength) == [String(form.contentLength!)])
        }

        @Test(arguments: [302, 307])
        func theCallersDelegateMayKeepARedirectAsTheAnswer(code: Int) async throws {
            let server = try await UploadServer()
            let url = URL(string: server.url("/redirect/\(code)").absoluteString + "?to=/status/200")!
            let (_, response) = try await session(delegate: NoRedirects()).upload(form, with: URLRequest(url: url))
            #expect((response as? HTTPURLResponse)?.statusCode == code)
            let log = try await server.log()
            #expect(log.map(\.path) == ["/redirect/\(code)"])
            #expect(log.first.map { String($0.bytes) == $0.contentLength } == true, "the form was sent once, whole")
        }

        @Test(arguments: [307, 308])
        func aRedirectElsewhereOrFromATaskNeverDeliversAnEmptyBody(code: Int) async throws {
            let server = try await UploadServer()
            for path in ["/elsewhere/\(code)", "/redirect/\(code)"] {
                do {
                    let data: Data
                    if path.hasPrefix("/elsewhere") {
                        // Another origin: the request's headers must not follow the body there.
                        (data, _) = try await session().upload(form, with: URLRequest(url: server.url(path)))
                    } else {
                        // A task handed to the caller must be the one that sends, so it cannot be replaced by another.
                        data = try await uploadWithTask(URLRequest(url: server.url(path)))
                    }
                    // Where URLSession resends a stream itself (Apple), the body arrives whole.
                    #expect(try server.seen(in: data).parts == sent.map { $0.seen(by: .node) })
                } catch let error as MultipartError {
                    guard case .redirectNotFollowed(statusCode: code, let location) = error.reason else {
                        Issue.record("\(error)")
                        continue
                    }
                    #expect(location?.path == "/upload")
                    #expect(error.description.contains("redirected (\(code))"))
                }
            }
            let log = try await server.log()
            #expect(log.filter { $0.path == "/upload" }.allSatisfy { $0.bytes == Int(form.contentLength!) })
        }

        private func uploadWithTask(_ request: URLRequest) async throws -> Data {
            let session = session()
            let form = form
            return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Data, any Error>) in
                let task = session.multipartUploadTask(with: request, form: form) { data, _, error in
                    if let error {
                        continuation.resume(throwing: error)
                    } else {
                        continuation.resume(returning: data ?? Data())
                    }
                }
                task.resume()
            }
        }

        @Test(arguments: [302, 303])
        func aRedirectToGETDropsTheBodyAsBrowsersDo(code: Int) async throws {
            let server = try await UploadServer()
            let (data, response) = try await session().upload(
                form, with: URLRequest(url: server.url("/redirect/\(code)")))
            #expect((response as? HTTPURLResponse)?.statusCode == 400, "the GET has no form to parse")
            #expect(try server.seen(in: data).method == "GET")
            // A 2xx to the GET is the answer: the form went to the first URL, and the GET was never to carry it.
            let (page, pageResponse) = try await session().upload(
                form, with: URLRequest(url: server.url("/redirect/\(code)?to=/status/200")))
            #expect((pageResponse as? HTTPURLResponse)?.statusCode == 200)
            #expect(String(decoding: page, as: UTF8.self).hasPrefix("the server says no"))
        }

        // MARK: Cancellation

        @Test func cancellingTheSwiftTaskStopsReadingAndClosesTheFile() async throws {
            let server = try await UploadServer()
            var form = MultipartFormData()
            try form.append(fileURL: directory.file("big.bin", contents: Data(count: 64 << 20)), name: "big")
            let reports = ProgressReports()
            let session = session()
            let request = URLRequest(url: server.url("/slow"))
            let upload = Task { [form] in
                try await session.upload(form, with: request) { reports.append($0) }
            }
            try await waitFor("the first progress report", every: 0.005) { !reports.values.isEmpty }
            #expect(OpenDescriptors.count(under: directory.url) == 1, "the file is open while it is sent")
            upload.cancel()
            await #expect(throws: CancellationError.self) { try await upload.value }
            // The await returns at once; a read running at that moment closes the file when it returns.
            try await Stopwatch.wait(atMost: 5, polling: 0.005) { OpenDescriptors.count(under: directory.url) > 0 }
            #expect(OpenDescriptors.count(under: directory.url) == 0, "cancelling closed the file")
            let sentWhenCancelled = reports.values.last?.bytesSent ?? 0
            #expect(sentWhenCancelled < form.contentLength!)
            // With its Content-Length, the server saw an aborted request, never a complete-looking body.
            #expect(try await server.log().isEmpty)
        }

        @Test func theCompletionHandlerFormUploadsAndCanBeCancelled() async throws {
            let server = try await UploadServer()
            let result = try await withCheckedThrowingContinuation { continuation in
                let task = URLSession(configuration: .ephemeral).multipartUploadTask(
                    with: URLRequest(url: server.url()), form: form
                ) { data, response, error in
                    continuation.resume(returning: (data, response, error))
                }
                #expect(task.state == .suspended)
                task.resume()
            }
            #expect(result.2 == nil)
            #expect(try server.seen(in: try #require(result.0)).parts == sent.map { $0.seen(by: .node) })

            var big = MultipartFormData()
            try big.append(fileURL: directory.file("big.bin", contents: Data(count: 64 << 20)), name: "big")
            let cancelled: (any Error)? = await withCheckedContinuation { continuation in
                let task = URLSession(configuration: .ephemeral).multipartUploadTask(
                    with: URLRequest(url: server.url("/slow")), form: big
                ) { _, _, error in
                    continuation.resume(returning: error)
                }
                task.resume()
                task.cancel()
            }
            #expect((cancelled as? URLError)?.code == .cancelled)
            #expect(OpenDescriptors.count(under: directory.url) == 0)
        }

        // MARK: Temporary files

        @Test func theTemporaryFileIsRemovedOnSuccessFailureAndCancel() async throws {
            let before = try TemporaryBodies.names()
            let server = try await UploadServer()
            var form = MultipartFormData()
            form.append(String(repeating: "x", count: 1 << 20), name: "x")
            _ = try await URLSession(configuration: .ephemeral).upload(
                form, with: URLRequest(url: server.url()), strategy: .file)
            #expect(try await TemporaryBodies.noneLeft(since: before), "after success")

            let refused = URLRequest(url: URL(string: "http://127.0.0.1:1/")!)
            await #expect(throws: (any Error).self) {
                _ = try await URLSession(configuration: .ephemeral).upload(form, with: refused, strategy: .file)
            }
            #expect(try await TemporaryBodies.noneLeft(since: before), "after failure")

            let upload = Task {
                try await URLSession(configuration: .ephemeral).upload(
                    form, with: URLRequest(url: server.url("/slow")), strategy: .file)
            }
            // Cancelled once its body file exists, so that the cancel has a file to remove.
            try await waitFor("the body file written") { try !TemporaryBodies.names().subtracting(before).isEmpty }
            upload.cancel()
            await #expect(throws: CancellationError.self) { _ = try await upload.value }
            // The cancel answers at once; the task removes its file when it ends, moments later.
            #expect(try await TemporaryBodies.noneLeft(since: before), "after cancel")
        }

        /// `.file` cancelled at any moment of writing a 1 GiB body answers within 0.5 s and leaves no file: the write
        /// stops at its next 64 MiB, where one kernel copy of the whole file once held the cancel for seconds. The
        /// 0.5 s is checked where the test runs alone (`measuredAlone`); beside other suites, 5 s (``CancelBound``).
        @Test(.tags(.measuredAlone)) func aFileUploadCancelledWhileItsBodyIsWrittenAnswersAtOnce() async throws {
            let big = directory.url.appending(path: "big.bin")
            var generator = SeededGenerator(seed: 1)
            let chunk = Data([UInt8].random(count: 1 << 20, using: &generator))
            _ = FileManager.default.createFile(atPath: big.path, contents: nil)
            let handle = try FileHandle(forWritingTo: big)
            for _ in 0..<1024 { handle.write(chunk) }
            try handle.close()
            defer { try? FileManager.default.removeItem(at: big) }
            var building = MultipartFormData()
            try building.append(fileURL: big, name: "backup")
            let form = building
            let server = try await UploadServer()
            for delay in [0.05, 0.2, 0.4, 0.8, 1.2] {
                let before = try TemporaryBodies.names()
                let upload = Task {
                    try await URLSession(configuration: .ephemeral).upload(
                        form, with: URLRequest(url: server.url()), strategy: .file)
                }
                try await Task.sleep(nanoseconds: UInt64(delay * 1e9))
                let stopwatch = Stopwatch()
                upload.cancel()
                await #expect(throws: CancellationError.self) { _ = try await upload.value }
                #expect(
                    stopwatch.seconds <= CancelBound.seconds(),
                    "cancelled \(delay) s in, answered after \(stopwatch.seconds) s")
                #expect(try await TemporaryBodies.noneLeft(since: before), "cancelled \(delay) s in")
            }
        }

        @Test func aFileTaskWritesItsBodyOnlyOnceResumedAndRemovesItAfter() async throws {
            let before = try TemporaryBodies.names()
            let server = try await UploadServer()
            let session = URLSession(configuration: .ephemeral)
            let request = URLRequest(url: server.url())
            let abandoned = session.multipartUploadTask(with: request, form: form, strategy: .file) { _, _, _ in }
            #expect(abandoned.state == .suspended)
            #expect(try await TemporaryBodies.noneLeft(since: before), "a task never resumed leaves no file")

            let form = form
            let (data, error) = await withCheckedContinuation { continuation in
                session.multipartUploadTask(with: request, form: form, strategy: .file) { data, _, error in
                    continuation.resume(returning: (data, error))
                }.resume()
            }
            #expect(error == nil)
            let seen = try server.seen(in: try #require(data))
            #expect(seen.parts == sent.map { $0.seen(by: .node) })
            #expect(seen.contentLength == String(form.contentLength!))
            #expect(try await TemporaryBodies.noneLeft(since: before), "removed when the task ended")
        }
    }
}
