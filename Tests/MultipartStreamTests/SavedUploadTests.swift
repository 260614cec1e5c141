import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// Resumable uploads whose state is saved, against the scripted draft server (`Peers/draft-server.py`): a run
    /// cancelled as a killed process would be, then another run of the same form, as a new process would make it.
    @Suite(.serialized) struct SavedUploadTests {
        let directory: TemporaryDirectory
        let photo: URL
        let state: URL
        /// Every form created first, then appended, as a form over 1 MiB goes by default: only such an upload has a
        /// state to save before its answer.
        let fast = MultipartResumption(
            maximumAttempts: 4, initialDelay: 0.05, maximumDelay: 0.2, singleRequestLimit: 0)

        init() throws {
            directory = try TemporaryDirectory()
            var generator = SeededGenerator(seed: 27)
            photo = try directory.file("photo.jpg", contents: Data([UInt8].random(count: 300_000, using: &generator)))
            state = directory.path("state")
        }

        /// Makes the photo larger than the socket buffers on both sides, so that a server that stops reading stops
        /// the body: against the `stall` scenario, the server then keeps 1 MiB of a first append.
        private func enlargePhoto() throws {
            let random = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
            try random.readData(ofLength: 24 << 20).write(to: photo)
            try random.close()
        }

        /// The form a run makes: the same fields and file every time, and a new random boundary.
        private func form() throws -> MultipartFormData {
            var form = MultipartFormData()
            form.append("Ada", name: "author")
            try form.append(fileURL: photo, name: "photo")
            return form
        }

        /// What the application must have processed for `form` with `boundary`.
        private func expected(_ form: MultipartFormData, boundary: String) throws -> DraftServer.Form {
            let rebuilt = try #require(form.replacingBoundary(with: boundary))
            let encoded = try directory.file("expected-\(UUID())", contents: try rebuilt.encode())
            return DraftServer.Form(bytes: Int(rebuilt.contentLength!), sha256: try sha256sum(encoded))
        }

        /// Events of one run.
        final class Events: @unchecked Sendable {
            // @unchecked: `list` is guarded by `lock`.
            private let lock = Lock()
            private var list: [MultipartResumption.Event] = []
            var all: [MultipartResumption.Event] { lock.withLock { list } }
            /// Keeps what happens to the saved state; the protocol's requests and answers are others' to check.
            func record(_ event: MultipartResumption.Event) {
                switch event {
                case .requestSent, .answerReceived, .retrying, .continuing, .notResumable, .underMinimumSize, .bodySent,
                    .settling:
                    return
                default: lock.withLock { list.append(event) }
                }
            }
        }

        private func policy(_ events: Events, _ base: MultipartResumption? = nil) -> MultipartResumption {
            var policy = base ?? fast
            policy.stateDirectory = state
            policy.events = { events.record($0) }
            return policy
        }

        private func stateFiles() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: state.path)) ?? []).sorted()
        }

        /// Starts an upload of `form` that is cancelled once its state is saved and part of it is out, as a process
        /// that is killed; returns the boundary it went out with. Against the `stall` scenario, with the photo
        /// enlarged, the server keeps 1 MiB of it.
        private func interruptedUpload(
            _ form: MultipartFormData, to request: URLRequest, session: URLSession, server: DraftServer
        ) async throws -> String {
            let events = Events()
            let policy = policy(events)
            let upload = Task {
                try await session.upload(form, with: request, strategy: .resumable(policy))
            }
            // The stalled append is logged once the server has its 1 MiB.
            try await waitFor(
                "the stalled append", seen: { "\((try? server.log()) ?? [])" },
                until: { try server.log().contains(where: { $0.method == "PATCH" }) })
            upload.cancel()
            await #expect(throws: CancellationError.self) { try await upload.value }
            guard case .saved(let file) = events.all.first else {
                Issue.record("no state saved: \(events.all)")
                return ""
            }
            #expect(stateFiles().contains(file.lastPathComponent))
            let key = file.deletingPathExtension().lastPathComponent
            return try #require(
                SavedUploadDirectory(state, interopVersions: ResumableUpload.InteropVersion.spoken).load(key) { _, _ in
                }
            ).boundary
        }

        @Test func aCancelledUploadKeepsItsResourceAndStateAndTheNextRunSendsOnlyTheRest() async throws {
            try enlargePhoto()
            let server = try await DraftServer()
            var request = URLRequest(url: server.url(scenario: "stall"))
            request.setValue("Basic dTpzZWNyZXQtcGFzc3dvcmQ=", forHTTPHeaderField: "Authorization")
            request.setValue("session=cookie-value-42", forHTTPHeaderField: "Cookie")
            request.url = URL(string: "http://user:url-password@127.0.0.1:\(server.port)/s/stall")
            let session = URLSession(configuration: .ephemeral)
            let boundary = try await interruptedUpload(try form(), to: request, session: session, server: server)
            #expect(!(try server.log()).contains { $0.method == "DELETE" }, "the server keeps the upload")
            let saved = try stateFiles().filter { $0.hasSuffix(".json") }.map {
                try String(decoding: Data(contentsOf: state.appendingPathComponent($0)), as: UTF8.self)
            }
            #expect(saved.count == 1)
            for secret in ["dTpzZWNyZXQtcGFzc3dvcmQ", "secret-password", "cookie-value-42", "url-password", "Ada"] {
                #expect(!saved.joined().contains(secret), "the state holds \(secret)")
            }

            let events = Events()
            let next = try form()
            let (data, response) = try await session.upload(
                next, with: request, strategy: .resumable(policy(events)))
            #expect((response as? HTTPURLResponse)?.statusCode == 200, "\(String(decoding: data, as: UTF8.self))")
            #expect(try server.forms() == [try expected(next, boundary: boundary)], "the whole form, once")
            let log = try server.log()
            let head = try #require(log.lastIndex { $0.method == "HEAD" })
            let resumed = try #require(log[head...].first { $0.method == "PATCH" })
            let resumedEvent = events.all.first {
                if case .resumed = $0 { true } else { false }
            }
            guard case .resumed(let offset, let length) = resumedEvent else {
                Issue.record("not resumed: \(events.all)")
                return
            }
            #expect(offset == 1 << 20 && length == next.contentLength)
            #expect(resumed.offset == String(offset), "sent from where the server stood")
            #expect(log.filter { $0.method == "POST" }.count == 1, "created once")
            #expect(stateFiles().isEmpty, "no state after success: \(stateFiles())")
        }

        /// Keyed on the request as it is sent (#43): `URLRequest(url:)` says GET and the form goes out as POST, so a
        /// run that says POST finds what a run that said nothing saved, and the listing says POST.
        @Test func theSavedStateIsKeyedOnTheMethodSent() async throws {
            try enlargePhoto()
            let server = try await DraftServer()
            let session = URLSession(configuration: .ephemeral)
            let said = URLRequest(url: server.url(scenario: "stall"))
            _ = try await interruptedUpload(try form(), to: said, session: session, server: server)
            let listed = MultipartResumption.savedUploads(in: state)
            #expect(listed.map(\.method) == ["POST"], "\(listed)")

            var post = said
            post.httpMethod = "POST"
            let events = Events()
            let (_, response) = try await session.upload(
                try form(), with: post, strategy: .resumable(policy(events)))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(
                events.all.contains {
                    if case .resumed(1 << 20, _) = $0 { true } else { false }
                }, "\(events.all)")
            #expect(try server.log().filter { $0.method == "POST" }.count == 1, "created once")
            #expect(stateFiles().isEmpty)
        }

        @Test(arguments: [false, true])
        func aChangedFileStartsOverAndDeletesTheOldUpload(otherSize: Bool) async throws {
            try enlargePhoto()
            let server = try await DraftServer()
            let request = URLRequest(url: server.url(scenario: "stall"))
            let session = URLSession(configuration: .ephemeral)
            _ = try await interruptedUpload(try form(), to: request, session: session, server: server)
            var generator = SeededGenerator(seed: 28)
            try Data([UInt8].random(count: otherSize ? 200_000 : 300_000, using: &generator)).write(to: photo)
            // A rewrite within the same clock tick must still count as a change.
            try FileManager.default.setAttributes(
                [.modificationDate: Date(timeIntervalSinceNow: 10)], ofItemAtPath: photo.path)

            let events = Events()
            let next = try form()
            let (_, response) = try await session.upload(
                next, with: request, strategy: .resumable(policy(events)))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(events.all.first == .startedOver(.formChanged), "\(events.all)")
            let forms = try server.forms()
            #expect(forms == [try expected(next, boundary: next.boundary)], "\(forms)")
            let log = try server.log()
            #expect(log.contains { $0.method == "DELETE" && $0.path == "/u/1" }, "\(log.map(\.method))")
            #expect(log.filter { $0.method == "POST" }.count == 2)
            #expect(stateFiles().isEmpty)
        }

        @Test func anUploadTheServerLostStartsOver() async throws {
            try enlargePhoto()
            let server = try await DraftServer()
            let request = URLRequest(url: server.url(scenario: "stall"))
            let session = URLSession(configuration: .ephemeral)
            let boundary = try await interruptedUpload(try form(), to: request, session: session, server: server)
            var delete = URLRequest(url: URL(string: "http://127.0.0.1:\(server.port)/u/1")!)
            delete.httpMethod = "DELETE"
            _ = try await session.data(for: delete)

            let events = Events()
            let next = try form()
            let (_, response) = try await session.upload(
                next, with: request, strategy: .resumable(policy(events)))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(events.all.contains(.startedOver(.uploadGone(statusCode: 404))), "\(events.all)")
            let forms = try server.forms()
            #expect(forms == [try expected(next, boundary: next.boundary)], "the form's own boundary: \(forms)")
            #expect(next.boundary != boundary, "not the saved one")
            #expect(stateFiles().isEmpty)
        }

        @Test func anAbandonedUploadIsDeletedOnTheServerAndHere() async throws {
            try enlargePhoto()
            let server = try await DraftServer()
            let request = URLRequest(url: server.url(scenario: "stall"))
            let session = URLSession(configuration: .ephemeral)
            _ = try await interruptedUpload(try form(), to: request, session: session, server: server)
            #expect(stateFiles().contains { $0.hasSuffix(".json") })
            // Found by the form's shape, even with the file changed since.
            try Data("changed".utf8).write(to: photo)
            #expect(try await session.abandonUpload(try form(), with: request, resumption: policy(Events())))
            #expect(try server.log().last.map { $0.method == "DELETE" && $0.path == "/u/1" } == true)
            #expect(stateFiles().isEmpty)
            #expect(try await !session.abandonUpload(try form(), with: request, resumption: policy(Events())))
            #expect(try await !session.abandonUpload(try form(), with: request, resumption: fast), "no directory")
            #expect(try server.forms().isEmpty)
        }

        @Test func aCorruptStateFileIsIgnoredWithAWarningAndReplaced() async throws {
            let server = try await DraftServer()
            let request = URLRequest(url: server.url())
            let form = try form()
            let key = try #require(form.savedUploadKey(for: request))
            try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
            try Data("{\"format\": 1, \"uploadURL\": \"http://evil".utf8).write(
                to: state.appendingPathComponent("\(key).json"))
            let events = Events()
            let (_, response) = try await URLSession(configuration: .ephemeral).upload(
                form, with: request, strategy: .resumable(policy(events)))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            guard case .stateIgnored(let file, let reason) = events.all.first else {
                Issue.record("\(events.all)")
                return
            }
            #expect(file.lastPathComponent == "\(key).json" && reason.contains("corrupt"))
            #expect(try server.forms() == [try expected(form, boundary: form.boundary)])
            #expect(!(try server.log()).contains { $0.path.contains("evil") })
            #expect(stateFiles().isEmpty)
        }

        @Test func aFormWithAStreamIsNotSaved() async throws {
            let server = try await DraftServer()
            var form = try form()
            form.append(InputStream(data: Data("streamed".utf8)), length: 8, name: "note")
            let events = Events()
            let (_, response) = try await URLSession(configuration: .ephemeral).upload(
                form, with: URLRequest(url: server.url()), strategy: .resumable(policy(events)))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(events.all == [.notSaved])
            #expect(stateFiles().isEmpty)
        }

        @Test func aSecondRunOfTheSameUploadFailsWhileTheFirstHoldsIt() async throws {
            let server = try await DraftServer()
            let request = URLRequest(url: server.url(scenario: "stall"))
            let form = try form()
            let key = try #require(form.savedUploadKey(for: request))
            let states = SavedUploadDirectory(state, interopVersions: ResumableUpload.InteropVersion.spoken)
            try states.prepare()
            let held = try states.lock(key)
            let error = try await #require(throws: MultipartError.self) {
                _ = try await URLSession(configuration: .ephemeral).upload(
                    form, with: request, strategy: .resumable(policy(Events())))
            }
            held.release()
            guard case .uploadInProgress = error.reason else {
                Issue.record("\(error)")
                return
            }
            #expect(try server.log().isEmpty, "nothing sent")
        }

        // MARK: Headers, stalls, the total time

        @Test func everyRequestGetsFreshHeaders() async throws {
            let server = try await DraftServer()
            let asked = Events()
            let headers = MultipartHeaders.fresh { request in
                asked.record(.notSaved)
                #expect(request.url?.host == "127.0.0.1")
                return ["Authorization": "Bearer \(UUID().uuidString)"]
            }
            let form = try form()
            let (_, response) = try await URLSession(configuration: .ephemeral).upload(
                form, with: URLRequest(url: server.url(scenario: "token-once")), strategy: .resumable(fast),
                headers: headers)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try server.forms() == [try expected(form, boundary: form.boundary)])
            let tokens = try server.log().map(\.authorization)
            #expect(tokens.count == 3 && Set(tokens).count == 3 && !tokens.contains(nil), "\(tokens)")
            #expect(asked.all.count == tokens.count)
        }

        @Test func headersThatWouldAddALineFailTheUpload() async throws {
            let server = try await DraftServer()
            let error = try await #require(throws: MultipartError.self) {
                _ = try await URLSession(configuration: .ephemeral).upload(
                    try form(), with: URLRequest(url: server.url()), strategy: .resumable(fast),
                    headers: .fresh { _ in ["X-Token": "a\r\nInjected: yes"] })
            }
            guard case .invalidHeaderValue(name: "X-Token", _) = error.reason else {
                Issue.record("\(error)")
                return
            }
            #expect(try server.log().isEmpty)
        }

        @Test func aStalledAppendIsSentAgainFromWhereTheServerStands() async throws {
            try enlargePhoto()
            let server = try await DraftServer()
            let form = try form()
            var policy = fast
            policy.stall = MultipartResumption.Stall(bytesPerSecond: 1, seconds: 1)
            let started = Date()
            let (_, response) = try await URLSession(configuration: .ephemeral).upload(
                form, with: URLRequest(url: server.url(scenario: "stall")), strategy: .resumable(policy))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            // The server holds the stalled request until the next append comes (or 120 s), and a request without a
            // byte moving ends at URLSession's 60 s: a stall rule of 1 s goes on long before either. 40 s leaves a
            // loaded machine under a sanitizer, where one step beside every suite took 14.6 s, room for two.
            let seconds = Date().timeIntervalSince(started)
            #expect(seconds < 40, "the stall was found after \(seconds) s")
            #expect(try server.forms() == [try expected(form, boundary: form.boundary)])
            let patches = try server.log().filter { $0.method == "PATCH" }
            #expect(patches.count == 2 && patches.last?.offset == String(1 << 20), "\(patches)")
        }

        /// The saved boundary of the one upload in the state directory.
        private func savedBoundary() throws -> String {
            let file = try #require(stateFiles().first { $0.hasSuffix(".json") })
            let key = URL(fileURLWithPath: file).deletingPathExtension().lastPathComponent
            return try #require(
                SavedUploadDirectory(state, interopVersions: ResumableUpload.InteropVersion.spoken).load(key) { _, _ in
                }
            ).boundary
        }

        /// `patch-503`: the first append keeps half and answers 503, and the HEAD before giving up says so;
        /// `head-503`: the first append keeps half and drops, and that HEAD answers 503, so the last offset the
        /// server acknowledged (0) is all the failure can say.
        @Test(arguments: [("patch-503", true), ("head-503", false)])
        func retriesSpentKeepTheUploadAndItsStateAndTheNextRunSendsTheRest(scenario: String, toldHalf: Bool)
            async throws
        {
            let server = try await DraftServer()
            let request = URLRequest(url: server.url(scenario: scenario))
            let session = URLSession(configuration: .ephemeral)
            let first = try form()
            let noRetries = MultipartResumption(
                maximumAttempts: 0, initialDelay: 0.05, maximumDelay: 0.2, singleRequestLimit: 0)
            let error = try await #require(throws: MultipartError.self) {
                _ = try await session.upload(
                    first, with: request, strategy: .resumable(policy(Events(), noRetries)))
            }
            let half = first.contentLength! / 2
            guard case .resumeSaved(retries: 0, let told, first.contentLength!) = error.reason else {
                Issue.record("\(error)")
                return
            }
            #expect(told == (toldHalf ? half : 0), "\(error)")
            #expect(error.description.contains("saved for another run, which resumes it"))
            #expect(!(try server.log()).contains { $0.method == "DELETE" }, "the server keeps the upload")
            #expect(stateFiles().contains { $0.hasSuffix(".json") }, "the state stays")
            #expect(try server.log().last?.method == "HEAD", "the server was asked where it stands")
            let boundary = try savedBoundary()

            let events = Events()
            let next = try form()
            let (_, response) = try await session.upload(
                next, with: request, strategy: .resumable(policy(events)))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try server.forms() == [try expected(next, boundary: boundary)], "the whole form, once")
            let patches = try server.log().filter { $0.method == "PATCH" }
            #expect(patches.count == 2 && patches.last?.offset == String(half), "\(patches)")
            #expect(try server.log().filter { $0.method == "POST" }.count == 1, "created once")
            #expect(stateFiles().isEmpty)
        }

        /// The server down when the next run starts (connection refused): that run keeps the upload at the offset
        /// the first saved, and the run after it, with the server back, sends only the rest.
        @Test func aServerDownAtTheNextRunKeepsTheUploadForTheRunAfter() async throws {
            let server = try await DraftServer()
            let request = URLRequest(url: server.url(scenario: "patch-503"))
            let noRetries = MultipartResumption(
                maximumAttempts: 0, initialDelay: 0.05, maximumDelay: 0.2, singleRequestLimit: 0)
            let first = try form()
            let half = first.contentLength! / 2
            let kept = try await #require(throws: MultipartError.self) {
                _ = try await URLSession(configuration: .ephemeral).upload(
                    first, with: request, strategy: .resumable(policy(Events(), noRetries)))
            }
            guard case .resumeSaved(_, half, _) = kept.reason else {
                Issue.record("the first run keeps the upload at half: \(kept)")
                return
            }
            let boundary = try savedBoundary()

            try server.setListening(false)
            let refused = try await #require(throws: MultipartError.self) {
                _ = try await URLSession(configuration: .ephemeral).upload(
                    try form(), with: request, strategy: .resumable(policy(Events(), noRetries)))
            }
            guard case .resumeSaved(retries: 0, half, first.contentLength!) = refused.reason else {
                Issue.record("the run that finds the server down keeps the upload at the saved offset: \(refused)")
                return
            }
            #expect((refused.underlying as? URLError)?.code == .cannotConnectToHost, "\(refused)")
            #expect(stateFiles().contains { $0.hasSuffix(".json") }, "the state stays")

            try server.setListening(true)
            let next = try form()
            let (_, response) = try await URLSession(configuration: .ephemeral).upload(
                next, with: request, strategy: .resumable(policy(Events())))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try server.forms() == [try expected(next, boundary: boundary)], "the whole form, once")
            let log = try server.log()
            let patches = log.filter { $0.method == "PATCH" }
            #expect(patches.count == 2 && patches.last?.offset == String(half), "\(patches)")
            #expect(log.filter { $0.method == "POST" }.count == 1, "created once")
            #expect(!log.contains { $0.method == "DELETE" })
            #expect(stateFiles().isEmpty)
        }

        @Test func anUploadOutOfTimeGivesUpAndDeletesItsResource() async throws {
            let server = try await DraftServer()
            var policy = MultipartResumption(
                maximumAttempts: 5, initialDelay: 0.5, maximumDelay: 1, singleRequestLimit: 0)
            policy.maximumDuration = 0.3
            let error = try await #require(throws: MultipartError.self) {
                _ = try await URLSession(configuration: .ephemeral).upload(
                    try form(), with: URLRequest(url: server.url(scenario: "head-503")), strategy: .resumable(policy))
            }
            guard case .resumeTimeExceeded(_, _, let length?) = error.reason, length > 0 else {
                Issue.record("\(error)")
                return
            }
            #expect(try server.log().last?.method == "DELETE")
            #expect(try server.forms().isEmpty)
        }
    }
}
