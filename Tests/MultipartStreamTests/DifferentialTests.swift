import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// The same server behaviour against every way to send: each ends the same way, but where the README's table of
    /// the four ways says they differ (on Linux a task handed to the caller cannot send its form again after a 307 or
    /// 308, which `upload` does). An outcome is what the caller can tell apart: the status it was answered, or the
    /// kind of error (a ``MultipartError`` reason, a `URLError` code).
    @Suite(.serialized) struct DifferentialTests {
        typealias Path = UploadPath

        /// What the caller is told.
        enum Outcome: Equatable, CustomStringConvertible {
            case answered(Int)
            case failed(String)

            var description: String {
                switch self {
                case .answered(let status): "answered \(status)"
                case .failed(let kind): "failed: \(kind)"
                }
            }

            /// A ``MultipartError``'s reason (what a resumable upload's fallback wraps, unwrapped), a `URLError`'s
            /// code, or the error's type.
            static func kind(of error: any Error) -> String {
                if let error = error as? MultipartError {
                    if case .resumeFailed = error.reason, let underlying = error.underlying {
                        return kind(of: underlying)
                    }
                    // The case's name: its payload's label where it has one.
                    let name = Mirror(reflecting: error.reason).children.first?.label ?? "\(error.reason)"
                    return "MultipartError." + name
                }
                if let error = error as? URLError { return "URLError \(error.code.rawValue)" }
                return String(describing: type(of: error))
            }
        }

        let directory: TemporaryDirectory
        /// Larger than loopback's socket buffers, so that an answer that comes before the body was read comes before
        /// it was all handed out.
        let form: MultipartFormData

        init() throws {
            directory = try TemporaryDirectory()
            var form = MultipartFormData()
            form.append("Ada", name: "author")
            try form.append(
                fileURL: directory.file("clip.bin", contents: Data(repeating: 9, count: 8 << 20)), name: "clip")
            self.form = form
        }

        /// How `request` with `form` ends through `path`.
        private func outcome(_ path: Path, _ form: MultipartFormData, _ request: URLRequest) async -> Outcome {
            switch path {
            case .automatic, .stream, .file, .resumableToAPlainServer:
                do {
                    let (_, response) = try await URLSession(configuration: .ephemeral).upload(
                        form, with: request, strategy: path.strategy)
                    return .answered((response as? HTTPURLResponse)?.statusCode ?? 0)
                } catch {
                    return .failed(Outcome.kind(of: error))
                }
            case .task:
                return await withCheckedContinuation { continuation in
                    URLSession.shared.multipartUploadTask(with: request, form: form) { _, response, error in
                        continuation.resume(returning: Self.outcome(response, error))
                    }.resume()
                }
            case .streamedDelegate:
                var streamed = URLRequest(url: request.url!, multipartFormData: form)
                streamed.timeoutInterval = request.timeoutInterval
                return await withCheckedContinuation { continuation in
                    let delegate = MultipartStreamedUploadDelegate { _, _, response, error in
                        continuation.resume(returning: Self.outcome(response, error))
                    }
                    let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
                    session.uploadTask(withStreamedRequest: streamed).resume()
                    session.finishTasksAndInvalidate()
                }
            }
        }

        private static func outcome(_ response: URLResponse?, _ error: (any Error)?) -> Outcome {
            if let error { return .failed(Outcome.kind(of: error)) }
            return .answered((response as? HTTPURLResponse)?.statusCode ?? 0)
        }

        /// Every path against `request`: each outcome as `expected` says for it.
        private func expectSame(
            _ behaviour: String, _ request: URLRequest, form: MultipartFormData? = nil,
            expected: (Path) -> Outcome
        ) async {
            for path in Path.allCases {
                let got = await outcome(path, form ?? self.form, request)
                #expect(got == expected(path), "\(behaviour) through \(path)")
            }
        }

        @Test func aPlainAnswer() async throws {
            let server = try await UploadServer()
            await expectSame("a plain answer", URLRequest(url: server.url("/headers"))) { _ in .answered(200) }
            let forms = try await server.log().filter { $0.method == "POST" }
            #expect(forms.map(\.bytes) == Array(repeating: Int(form.contentLength!), count: Path.allCases.count))
        }

        @Test func aSuccessBeforeTheBodyWasReadIsAnError() async throws {
            let server = try await UploadServer()
            await expectSame("a 200 before the body was read", URLRequest(url: server.url("/early"))) { _ in
                .failed("MultipartError.answeredBeforeBodySent")
            }
        }

        @Test func aRefusalBeforeTheBodyWasReadIsTheAnswer() async throws {
            let server = try await UploadServer()
            await expectSame("a 413 before the body was read", URLRequest(url: server.url("/early/413"))) { _ in
                .answered(413)
            }
        }

        @Test func anErrorPageLargerThanTheBound() async throws {
            let server = try await LargeAnswerServer()
            let request = URLRequest(url: server.url(status: 500, bytes: 64 << 20))
            await expectSame("a 500 with 64 MiB", request) { _ in .failed("MultipartError.responseTooLarge") }
        }

        @Test func aResetInTheAnswer() async throws {
            let server = try await UploadServer()
            await expectSame("a reset mid-answer", URLRequest(url: server.url("/cut/200"))) { _ in
                .failed("URLError \(URLError.networkConnectionLost.rawValue)")
            }
        }

        @Test func noAnswerPastTheTimeout() async throws {
            let server = try await UploadServer()
            var request = URLRequest(url: server.url("/silent"))
            request.timeoutInterval = 0.5
            await expectSame("no answer", request) { _ in .failed("URLError \(URLError.timedOut.rawValue)") }
        }

        @Test func aFileTruncatedWhileItIsRead() async throws {
            let server = try await UploadServer()
            for path in Path.allCases {
                let file = try directory.file("shrinks-\(path).bin", contents: Data(count: 1 << 20))
                var form = MultipartFormData()
                try form.append(fileURL: file, name: "doc")
                let handle = try FileHandle(forWritingTo: file)
                try handle.truncate(atOffset: 1_000)
                try handle.close()
                let got = await outcome(path, form, URLRequest(url: server.url("/headers")))
                #expect(got == .failed("MultipartError.fileSizeChanged"), "a file truncated, through \(path)")
            }
            let log = try await server.log()
            #expect(log.allSatisfy { $0.bytes < 1 << 20 }, "no whole form arrived: \(log.map(\.bytes))")
        }

        @Test func aSeeOther() async throws {
            let server = try await UploadServer()
            await expectSame("a 303", URLRequest(url: server.url("/redirect/303?to=/headers"))) { _ in .answered(200) }
        }

        /// The README's table: on Linux `upload` sends the form again after a 307; a task handed to the caller cannot,
        /// and fails rather than sending an empty body.
        @Test func aTemporaryRedirectToAnotherOrigin() async throws {
            let (server, other) = (try await UploadServer(), try await UploadServer())
            let away = "http://localhost:\(other.url().port!)/headers"
            let request = URLRequest(url: server.url("/redirect/307?to=\(away)"))
            await expectSame("a 307 to another origin", request) { path in
                #if canImport(Darwin)
                    .answered(200)
                #else
                    path.isUpload ? .answered(200) : .failed("MultipartError.redirectNotFollowed")
                #endif
            }
            // The resumable upload's probes (OPTIONS, no body) follow the 307 too.
            let landed = try await other.log().filter { $0.method == "POST" }
            #expect(
                landed.map(\.bytes)
                    == Array(repeating: Int(form.contentLength!), count: Path.allCases.count { $0.isUpload }))
        }
    }
}
