import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// The `headers:` hook as a newcomer writes it: told why it is asked, so that a token refreshed after a 401 is
    /// one line in it; its failure never ends a saved upload; and a form that cannot go again is not sent again.
    @Suite(.serialized) struct HeadersHookTests {
        let directory: TemporaryDirectory

        init() throws {
            directory = try TemporaryDirectory()
        }

        /// A token store as an app has one: `current()` until `refresh()` rotates it.
        actor Tokens {
            private(set) var current: String
            private var next: [String]
            private(set) var refreshes = 0

            init(_ first: String, then next: [String]) {
                current = first
                self.next = next
            }

            func refresh() {
                refreshes += 1
                if !next.isEmpty { current = next.removeFirst() }
            }
        }

        /// Every reason the hook was given, in order.
        final class Reasons: @unchecked Sendable {
            // @unchecked: `list` is guarded by `lock`.
            private let lock = Lock()
            private var list: [MultipartHeaders.Reason] = []
            var all: [MultipartHeaders.Reason] { lock.withLock { list } }
            func record(_ reason: MultipartHeaders.Reason) { lock.withLock { list.append(reason) } }
        }

        /// The README's recipe: refresh after a 401, one line in the hook, no loop of the caller's.
        @Test func aTokenRefreshedAfterA401GoesOnceMoreAndTheFormArrivesWhole() async throws {
            let server = try await UploadServer()
            // /auth takes `Basic dTpw` (u:p) only; the app's first token is stale.
            let tokens = Tokens("Basic c3RhbGU=", then: ["Basic dTpw"])
            let reasons = Reasons()
            var form = MultipartFormData()
            form.append("Ada", name: "author")
            let photo = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            form.append(photo, name: "photo", fileName: "photo.jpg", mimeType: "image/jpeg")
            let (data, response) = try await URLSession.shared.upload(
                form, with: URLRequest(url: server.url("/auth")),
                headers: .fresh { _, reason in
                    reasons.record(reason)
                    if case .unauthorized = reason { await tokens.refresh() }
                    return ["Authorization": await tokens.current]
                }, acceptableStatusCodes: 200..<300)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            let seen = try server.seen(in: data)
            #expect(seen.authorization == "Basic dTpw")
            #expect(seen.parts?.first { $0.name == "author" }?.body == Data("Ada".utf8))
            #expect(seen.parts?.first { $0.name == "photo" }?.body == photo, "the form arrived whole")
            #expect(await tokens.refreshes == 1)
            let told = reasons.all.map { reason -> String in
                switch reason {
                case .initial: "initial"
                case .unauthorized(let response): "unauthorized \(response.statusCode)"
                case .redirect(let response): "redirect \(response.statusCode)"
                case .resumable(let step): "resumable \(step)"
                }
            }
            #expect(told == ["initial", "unauthorized 401"])
            let log = try await server.log().filter { $0.path == "/auth" }
            #expect(log.map(\.authorization) == ["Basic c3RhbGU=", "Basic dTpw"], "\(log)")
        }

        /// The simple form, which ignores why, still compiles and works; a 401 it answers the same way is the answer.
        @Test func theSimpleFormIsAskedEachTimeAndA401ItCannotMendIsTheAnswer() async throws {
            let server = try await UploadServer()
            var form = MultipartFormData()
            form.append("v", name: "f")
            let (_, response) = try await URLSession.shared.upload(
                form, with: URLRequest(url: server.url("/auth")),
                headers: .fresh { _ in ["Authorization": "Basic eDp5"] })
            #expect((response as? HTTPURLResponse)?.statusCode == 401)
            #expect(try await server.log().filter { $0.path == "/auth" }.count == 1, "the same headers are not resent")
        }

        /// A form with a one-shot stream cannot go again after a 401: the library knows that before it sends, so no
        /// second request goes out, and the error names the part.
        @Test func aOneShotPartIsNotResentAfterA401() async throws {
            let server = try await UploadServer()
            let tokens = Tokens("Basic c3RhbGU=", then: ["Basic dTpw"])
            var form = MultipartFormData()
            form.append("Ada", name: "author")
            form.append(InputStream(data: Data(repeating: 1, count: 200_000)), length: 200_000, name: "log")
            do {
                _ = try await URLSession.shared.upload(
                    form, with: URLRequest(url: server.url("/auth")),
                    headers: .fresh { _, reason in
                        if case .unauthorized = reason { await tokens.refresh() }
                        return ["Authorization": await tokens.current]
                    })
                Issue.record("a one-shot part was sent twice, or the 401 taken as success")
            } catch let error as MultipartError {
                guard case .streamAlreadyConsumed = error.reason, error.part?.name == "log" else {
                    Issue.record("\(error)")
                    return
                }
            }
            // Counted by the heads that arrived: a resend whose body failed on the way is never logged whole.
            let heads = try server.heads().filter { $0 == "/auth" }
            #expect(heads.count == 1, "a second request went out: \(heads)")
        }

        /// The hook is told each request of a resumable upload for what it is: a 300 kB form's one request is its
        /// creation; created first (as a form over 1 MiB is), its discovery, creation and append.
        @Test(arguments: [MultipartResumption.defaultSingleRequestLimit, 0])
        func aResumableUploadTellsTheHookEachStep(singleRequestLimit: UInt64) async throws {
            let server = try await DraftServer()
            let reasons = Reasons()
            var form = MultipartFormData()
            form.append(Data(repeating: 3, count: 300_000), name: "file", fileName: "f.bin")
            _ = try await URLSession.shared.upload(
                form, with: URLRequest(url: server.url()),
                strategy: .resumable(MultipartResumption(singleRequestLimit: singleRequestLimit)),
                headers: .fresh { _, reason in
                    reasons.record(reason)
                    return ["Authorization": "Bearer T"]
                }, acceptableStatusCodes: 200..<300)
            let steps = reasons.all.compactMap { reason -> MultipartHeaders.ResumableStep? in
                if case .resumable(let step) = reason { return step }
                return nil
            }
            let expected: [MultipartHeaders.ResumableStep] =
                singleRequestLimit > 0 ? [.creation] : [.discovery, .creation, .append(offset: 0)]
            #expect(steps == expected, "\(reasons.all)")
            #expect(try server.log().allSatisfy { $0.authorization == "Bearer T" })
            #expect(try server.forms().count == 1)
        }

        /// A cancel while the hook is asked for a redirect's headers ends the upload at once; the hook's answer, when
        /// it comes, reaches no task the cancel stopped (Linux URLSession traps on a redirect answered after a cancel:
        /// this test ended the process before the answer was kept from it).
        @Test func aCancelWhileTheHookIsAskedForARedirectEndsTheUpload() async throws {
            let server = try await UploadServer()
            let (asked, hookAsked) = AsyncStream.makeStream(of: Void.self)
            let (release, releaseHook) = AsyncStream.makeStream(of: Void.self)
            let (answered, hookAnswered) = AsyncStream.makeStream(of: Void.self)
            var form = MultipartFormData()
            form.append(Data(count: 300_000), name: "photo", fileName: "photo.jpg", mimeType: "image/jpeg")
            let upload = Task { [form] in
                try await URLSession.shared.upload(
                    form, with: URLRequest(url: server.url("/redirect/307?to=/headers")),
                    headers: .fresh { _, reason in
                        guard case .redirect = reason else { return [:] }
                        hookAsked.yield()
                        for await _ in release { break }
                        defer { hookAnswered.yield() }
                        return ["Authorization": "Bearer late"]
                    })
            }
            try await within(seconds: 30, "the hook asked for the redirect") { for await _ in asked { break } }
            upload.cancel()
            let ended = try await within(seconds: 30, "the cancelled upload ended") { await upload.result }
            #expect(throws: CancellationError.self) { try ended.get() }
            releaseHook.yield()
            try await within(seconds: 30, "the hook answered") { for await _ in answered { break } }
            // The process is alive after the late answer, and the session still uploads.
            let (data, _) = try await URLSession.shared.upload(form, with: URLRequest(url: server.url("/headers")))
            #expect(try server.seen(in: data).bytes == Int(form.contentLength!))
            let log = try await server.log()
            #expect(log.allSatisfy { $0.authorization != "Bearer late" }, "the late redirect was followed")
        }

        /// A hook slower than the request's timeout on a redirect fails the upload with `timedOut` and leaves the
        /// process alive: Linux URLSession's timeout runs while the redirect waits, and an answer after it fired
        /// trapped the process (this test ended it before the deadline). A plain POST turned into a GET by a 302
        /// and a 307 that sends the form again, streamed and from a file.
        @Test(arguments: zip([302, 307], [MultipartUploadStrategy.stream, .file]))
        func aHookSlowerThanTheTimeoutOnARedirectFailsTheUpload(code: Int, strategy: MultipartUploadStrategy)
            async throws
        {
            let server = try await UploadServer()
            var form = MultipartFormData()
            form.append(Data(count: 3_000), name: "photo", fileName: "photo.jpg", mimeType: "image/jpeg")
            var request = URLRequest(url: server.url("/redirect/\(code)?to=/headers"))
            request.timeoutInterval = 1
            let (answered, hookAnswered) = AsyncStream.makeStream(of: Void.self)
            let error = await #expect(throws: URLError.self) {
                try await URLSession.shared.upload(
                    form, with: request, strategy: strategy,
                    headers: .fresh { _, reason in
                        guard case .redirect = reason else { return [:] }
                        try? await Task.sleep(nanoseconds: 1_750_000_000)
                        hookAnswered.yield()
                        return ["Authorization": "Bearer late"]
                    })
            }
            #expect(error?.code == .timedOut, "\(String(describing: error))")
            // The upload's own deadline, not URLSession's timeout (which, fired, never ends the task).
            #expect(
                error?.localizedDescription.contains("half the request's timeout") == true,
                "\(String(describing: error))")
            try await within(seconds: 30, "the hook answered") { for await _ in answered { break } }
            // Past the moment URLSession's own timeout fired: the process is alive and the session still uploads.
            let (data, _) = try await URLSession.shared.upload(form, with: URLRequest(url: server.url("/headers")))
            #expect(try server.seen(in: data).bytes == Int(form.contentLength!))
            let log = try await server.log()
            #expect(!log.contains { $0.path.hasPrefix("/headers") && $0.authorization == "Bearer late" })
        }

        /// A hook that fails (its own error, or a value that would forge a header) while a saved resumable upload
        /// goes on is neither the form's failure nor the server's word: the upload and its state are kept, and the
        /// next run resumes it where the server stands.
        @Test(arguments: [false, true])
        func aFailingHookKeepsASavedUpload(forgesHeader: Bool) async throws {
            struct TokenServiceDown: Error {}
            let server = try await DraftServer()
            let state = directory.path("state-\(forgesHeader)")
            let file = try directory.file(
                "photo-\(forgesHeader).bin", contents: Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }))
            // Created first, so that there is an upload to keep.
            var policy = MultipartResumption(
                maximumAttempts: 3, initialDelay: 0.05, maximumDelay: 0.1, singleRequestLimit: 0)
            policy.stateDirectory = state
            func form() throws -> MultipartFormData {
                var form = MultipartFormData()
                try form.append(fileURL: file, name: "photo")
                return form
            }
            // head-503: the first PATCH keeps half and drops; the hook then fails for the HEAD that asks where the
            // server stands.
            let request = URLRequest(url: server.url(scenario: "head-503"))
            do {
                _ = try await URLSession.shared.upload(
                    try form(), with: request, strategy: .resumable(policy),
                    headers: .fresh { _, reason in
                        guard case .resumable(.offset) = reason else { return ["Authorization": "Bearer T"] }
                        if forgesHeader { return ["Authorization": "Bearer T\r\nX-Admin: 1"] }
                        throw TokenServiceDown()
                    })
                Issue.record("the upload succeeded although the hook failed")
            } catch let error as MultipartError {
                guard case .resumeSaved = error.reason else {
                    Issue.record("\(error): the saved upload was ended by the caller's own hook")
                    return
                }
                if forgesHeader {
                    guard case .invalidHeaderValue? = (error.underlying as? MultipartError)?.reason else {
                        Issue.record("\(String(describing: error.underlying))")
                        return
                    }
                } else {
                    #expect(error.underlying is TokenServiceDown)
                }
            }
            let saved = try FileManager.default.contentsOfDirectory(atPath: state.path)
            #expect(saved.count == 1, "the state was kept: \(saved)")
            #expect(try server.log().allSatisfy { $0.method != "DELETE" }, "the server's upload was deleted")
            #expect(
                try server.log().allSatisfy { !($0.authorization ?? "").contains("X-Admin") },
                "a forged header went out")
            // The next run, with a hook that works, resumes: it sends only what the server lacks.
            let before = try server.log().count
            let resumed = try form()
            let (data, _) = try await URLSession.shared.upload(
                resumed, with: request, strategy: .resumable(policy),
                headers: .fresh { _ in ["Authorization": "Bearer T"] }, acceptableStatusCodes: 200..<300)
            let processed = try JSONDecoder().decode(DraftServer.Form.self, from: data)
            #expect(processed.bytes == Int(resumed.contentLength!))
            let patches = try server.log().dropFirst(before).filter { $0.method == "PATCH" }
            #expect(patches.count == 1 && (Int(patches[0].offset ?? "0") ?? 0) > 0, "started over: \(patches)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: state.path).isEmpty)
        }
    }
}
