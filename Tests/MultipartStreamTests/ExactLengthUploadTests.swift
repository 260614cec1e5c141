import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// The default upload sends the exact `Content-Length` and no chunked framing, so that the servers which lose or
    /// refuse chunked bodies get every byte; a success that came before the body was read is a failure; uploads through
    /// one session share its connections, and its private session closes once idle. Serialized: two tests change the
    /// idle timeout.
    @Suite(.serialized) struct ExactLengthUploadTests {
        let directory: TemporaryDirectory
        let form: MultipartFormData
        let video: URL

        init() throws {
            directory = try TemporaryDirectory()
            video = directory.path("holiday.mp4")
            var generator = SeededGenerator(seed: 9)
            try generator.writeFile(at: video, size: 48 << 20)
            var form = MultipartFormData()
            form.append("Holiday \"2026\" ü", name: "title")
            try form.append(fileURL: video, name: "video")
            let log = Data([UInt8].random(count: 300_000, using: &generator))
            form.append(length: UInt64(log.count), name: "log", fileName: "app.log") { InputStream(data: log) }
            self.form = form
        }

        private func expectDjangoGotEverything(_ data: Data, server: UploadServer) throws {
            let seen = try JSONDecoder().decode(UploadServer.DjangoForm.self, from: data)
            #expect(seen.contentLength == String(form.contentLength!))
            #expect(seen.transferEncoding == nil)
            #expect(seen.fields == ["title": ["Holiday \"2026\" ü"]])
            #expect(
                seen.files["video"] == [
                    .init(
                        fileName: "holiday.mp4", contentType: "video/mp4", bytes: 48 << 20, sha256: try sha256sum(video)
                    )
                ])
            #expect(seen.files["log"]?.map(\.bytes) == [300_000])
        }

        @Test func djangoUnderGunicornReceivesALargeFormByteExact() async throws {
            // Chunked, this form reached Django as an empty form with a 200.
            let server = try await UploadServer(.django)
            let (data, response) = try await URLSession(configuration: .ephemeral).upload(
                form, with: URLRequest(url: server.url()))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            try expectDjangoGotEverything(data, server: server)
        }

        @Test func aRequestMadeWithTheFormReachesDjangoByteExact() async throws {
            let server = try await UploadServer(.django)
            let (data, _) = try await URLSession(configuration: .ephemeral).data(
                for: URLRequest(url: server.url(), multipartFormData: form))
            try expectDjangoGotEverything(data, server: server)
        }

        @Test func aServerThatAnswers411ToChunkedBodiesAcceptsTheUpload() async throws {
            let server = try await UploadServer()
            let url = server.url("/length-required")
            // The answer echoes every part, past the default bound.
            let (data, response) = try await URLSession(configuration: .ephemeral).upload(
                form, with: URLRequest(url: url), responseBody: .inMemory(upTo: 256 << 20))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try server.seen(in: data).bytes == Int(form.contentLength!))
            let (plain, plainResponse) = try await URLSession(configuration: .ephemeral).data(
                for: URLRequest(url: url, multipartFormData: form))
            #expect((plainResponse as? HTTPURLResponse)?.statusCode == 200)
            #expect(try server.seen(in: plain).parts?.count == 3)
        }

        /// `/early` answers and reads no more; `/early-drain` answers, then reads the body and drops it, as a
        /// lingering close does: every byte is handed out before the task ends, but not before the answer came.
        @Test(arguments: [
            ("/early", MultipartUploadStrategy.automatic), ("/early-drain", .stream), ("/early-drain", .file),
        ])
        func aSuccessThatComesBeforeTheBodyWasReadIsAnError(path: String, strategy: MultipartUploadStrategy)
            async throws
        {
            let server = try await UploadServer()
            let request = URLRequest(url: server.url(path))
            let reports = ProgressReports()
            let error = try await #require(throws: MultipartError.self) {
                _ = try await URLSession(configuration: .ephemeral).upload(form, with: request, strategy: strategy) {
                    reports.append($0)
                }
            }
            let reason = error.reason
            guard
                case .answeredBeforeBodySent(statusCode: 200, let bytesSent, contentLength: form.contentLength!) =
                    reason
            else {
                Issue.record("\(error)")
                return
            }
            #expect(bytesSent < form.contentLength!)
            #expect(error.description.contains("never received the whole form"))
            // Progress ends at what was handed out by the end: all of it where the server drained the body.
            let last = reports.values.last?.bytesSent ?? 0
            let drained = path == "/early-drain"
            #expect(last >= bytesSent && (last == form.contentLength!) == drained, "\(last)")
        }

        @Test func aRedirectAnsweredBeforeTheBodyWasReadIsAnErrorToo() async throws {
            // POST /upload → 303 /login without reading the form → GET /login → 200: the form never arrived.
            let server = try await UploadServer()
            let request = URLRequest(url: server.url("/redirect/303?early&to=/status/200"))
            let error = try await #require(throws: MultipartError.self) {
                _ = try await URLSession(configuration: .ephemeral).upload(form, with: request)
            }
            guard
                case .answeredBeforeBodySent(statusCode: 200, let bytesSent, contentLength: form.contentLength!) =
                    error.reason
            else {
                Issue.record("\(error)")
                return
            }
            #expect(bytesSent < form.contentLength!)
        }

        @Test func twentyUploadsThroughOneSessionShareConnections() async throws {
            let server = try await UploadServer()
            let session = URLSession(configuration: .ephemeral)
            var small = MultipartFormData()
            small.append("v", name: "n")
            for _ in 0..<20 {
                let (data, _) = try await session.upload(small, with: URLRequest(url: server.url()))
                #expect(try server.seen(in: data).parts?.count == 1)
            }
            let ports = Set(try await server.log().map(\.port))
            #expect(ports.count <= 2, "\(ports.count) connections for 20 uploads")
            session.finishTasksAndInvalidate()
        }

        @Test func thePrivateSessionClosesOnceNoUploadIsLeft() async throws {
            let saved = PrivateSessions.shared.idleTimeout
            PrivateSessions.shared.idleTimeout = 0.2
            defer { PrivateSessions.shared.idleTimeout = saved }
            let server = try await UploadServer()
            var small = MultipartFormData()
            small.append("v", name: "n")
            var session: URLSession? = URLSession(configuration: .ephemeral)
            _ = try await session!.upload(small, with: URLRequest(url: server.url()))
            let caller = session!
            session!.invalidateAndCancel()
            session = nil
            try await Stopwatch.wait(atMost: 10, polling: 0.02) { PrivateSessions.shared.isOpen(for: caller) }
            #expect(!PrivateSessions.shared.isOpen(for: caller), "the private session outlived its caller's")
        }

        @Test func progressIsReportedAtMostTenTimesASecond() async throws {
            let server = try await UploadServer(.sink)
            let reports = ProgressReports()
            let stopwatch = Stopwatch()
            _ = try await URLSession(configuration: .ephemeral).upload(form, with: URLRequest(url: server.url())) {
                reports.append($0)
            }
            let elapsed = stopwatch.seconds
            let values = reports.values
            // The first count at once, then one per 100 ms, and 100%: tighter than the 128 steps of the body plus
            // one per 100 ms that this test allowed before.
            let bound = 1 + Int(elapsed / 0.1) + 1
            #expect(values.count <= bound, "\(values.count) callbacks for \(form.contentLength!) bytes in \(elapsed) s")
            #expect(values.count >= 2)
            #expect(zip(values, values.dropFirst()).allSatisfy { $0.bytesSent < $1.bytesSent })
            #expect(values.filter { $0.fractionCompleted == 1 }.count == 1)
            #expect(values.last?.bytesSent == form.contentLength!)
        }
    }
}
