import Foundation
import MultipartStream
import MultipartStreamTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// `.resumable` against a scripted draft server (`Peers/draft-server.py`) that answers as the draft allows and
    /// `NIOResumableUpload` never does: each test one scenario, and what the application processed checked byte for
    /// byte.
    @Suite(.serialized) struct ResumableDraftServerTests {
        let directory: TemporaryDirectory
        let form: MultipartFormData
        /// What the application must have processed: the whole form, once.
        let expected: DraftServer.Form
        /// Fast retries, so that a scenario with drops takes well under a second; every form created first, then
        /// appended, as a form over 1 MiB goes by default: these trials are of that way (the one request has its own,
        /// in ``OneRequestTests``).
        let fast = MultipartResumption(
            maximumAttempts: 4, initialDelay: 0.05, maximumDelay: 0.2, singleRequestLimit: 0)

        init() throws {
            directory = try TemporaryDirectory()
            var generator = SeededGenerator(seed: 2026)
            var form = MultipartFormData()
            form.append("Ada \"quoted\" ü", name: "author")
            let bytes = Data([UInt8].random(count: 300_000, using: &generator))
            let photo = try directory.file("photo.jpg", contents: bytes)
            try form.append(fileURL: photo, name: "photo")
            self.form = form
            let encoded = try directory.file("form.multipart", contents: try form.encode())
            expected = DraftServer.Form(bytes: Int(form.contentLength!), sha256: try sha256sum(encoded))
        }

        private func upload(
            _ server: DraftServer, _ scenario: String, headers: [String: String] = [:],
            resumption: MultipartResumption? = nil
        ) async throws -> (Data, Int) {
            var request = URLRequest(url: server.url(scenario: scenario))
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            let (data, response) = try await URLSession(configuration: .ephemeral).upload(
                form, with: request, strategy: .resumable(resumption ?? fast))
            return (data, (response as? HTTPURLResponse)?.statusCode ?? 0)
        }

        private func failure(
            _ server: DraftServer, _ scenario: String
        ) async throws -> MultipartError.Reason {
            try await #require(throws: MultipartError.self) { _ = try await upload(server, scenario) }.reason
        }

        // MARK: Credentials

        @Test func anUploadResourceOnAnotherOriginGetsNoCredentials() async throws {
            let server = try await DraftServer()
            let credentials = ["Authorization": "Bearer secret", "Cookie": "session=1"]
            let (_, status) = try await upload(server, "other-origin", headers: credentials)
            #expect(status == 200)
            #expect(try server.forms() == [expected])
            let log = try server.log()
            let elsewhere = log.filter { $0.port == server.alternatePort }
            #expect(elsewhere.map(\.method).contains("PATCH"), "\(log.map(\.method))")
            #expect(elsewhere.allSatisfy { $0.authorization == nil && $0.cookie == nil }, "\(elsewhere)")
            let here = log.filter { $0.port == server.port }
            #expect(here.allSatisfy { $0.authorization == "Bearer secret" && $0.cookie == "session=1" })

            var trusting = fast
            trusting.credentialsToOtherOrigins = true
            _ = try await upload(server, "other-origin", headers: credentials, resumption: trusting)
            let trusted = try server.log().dropFirst(log.count).filter { $0.port == server.alternatePort }
            #expect(!trusted.isEmpty && trusted.allSatisfy { $0.authorization == "Bearer secret" }, "opted in")
        }

        /// A server that speaks no version gets the whole form in one request: it carries the hook's fresh header,
        /// as every probe before it does, and the hook's error there fails the upload (#43).
        @Test func theWholeFormSentToAServerWithoutTheDraftCarriesTheFreshHeaders() async throws {
            let server = try await DraftServer(version: 5)
            let tokens = Counter()
            var request = URLRequest(url: server.url())
            request.setValue("Bearer stale", forHTTPHeaderField: "Authorization")
            let (_, response) = try await URLSession(configuration: .ephemeral).upload(
                form, with: request, strategy: .resumable(fast),
                headers: .fresh { _ in ["Authorization": "Bearer fresh-\(tokens.next())"] })
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try server.forms() == [expected])
            let log = try server.log()
            #expect(log.map(\.method) == ["OPTIONS", "OPTIONS", "OPTIONS", "OPTIONS", "OPTIONS", "POST"], "\(log)")
            #expect(log.map(\.authorization) == (1...6).map { "Bearer fresh-\($0)" }, "\(log)")

            struct Expired: Error {}
            let failing = MultipartHeaders.fresh { request in
                if request.httpMethod == "POST" { throw Expired() }
                return [:]
            }
            await #expect(throws: Expired.self) {
                _ = try await URLSession(configuration: .ephemeral).upload(
                    form, with: URLRequest(url: server.url()), strategy: .resumable(fast), headers: failing)
            }
            // The process knows the server speaks none: nothing is asked again, and the form never went.
            let after = try server.log()
            #expect(after.count == log.count, "\(after.map(\.method))")
        }

        @Test func anAppendRefusedForWantOfACredentialIsSentAgainWithIt() async throws {
            let server = try await DraftServer()
            let delegate = CredentialDelegate()
            let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
            let (_, response) = try await session.upload(
                form, with: URLRequest(url: server.url(scenario: "auth")), strategy: .resumable(fast))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try server.forms() == [expected])
            #expect(delegate.challenges == 1)
            let patches = try server.log().filter { $0.method == "PATCH" }
            #expect(patches.map(\.authorization) == [nil, "Basic dTpw"], "refused once, then sent whole with it")
            #expect(patches.map(\.offset) == ["0", "0"])
        }

        /// A proxy that wants a credential on every request to the upload: with it (set on the request), each of
        /// them carries it and the form arrives; without, the 407 is the answer and no byte counts as sent, and a
        /// saved upload is kept, not deleted, for a run that has the credential.
        @Test func a407OnEveryRequestToTheUploadIsAnsweredWithTheRequestsProxyCredentialOrKeepsTheSavedUpload()
            async throws
        {
            let server = try await DraftServer()
            let (_, status) = try await upload(server, "proxy-407", headers: ["Proxy-Authorization": "Basic dTpw"])
            #expect(status == 200)
            #expect(try server.forms() == [expected])
            #expect(try server.log().allSatisfy { $0.method != "PATCH" || $0.bytes == expected.bytes })

            let refused = try await DraftServer()
            let (_, answered) = try await upload(refused, "proxy-407")
            #expect(answered == 407, "the proxy's answer, not a success")
            #expect(try refused.forms().isEmpty)

            let saving = try await DraftServer()
            var saved = fast
            saved.stateDirectory = directory.path("state")
            let error = try await #require(throws: MultipartError.self) {
                _ = try await URLSession(configuration: .ephemeral).upload(
                    form, with: URLRequest(url: saving.url(scenario: "proxy-407")), strategy: .resumable(saved))
            }
            guard case .resumeSaved(retries: 0, bytesAcknowledged: 0, _) = error.reason else {
                Issue.record("\(error)")
                return
            }
            let log = try saving.log()
            #expect(log.map(\.method) == ["OPTIONS", "POST", "PATCH"], "no retry, no DELETE: \(log.map(\.method))")
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: directory.path("state").path)
                    .contains { $0.hasSuffix(".json") }, "the state is kept")
        }

        // MARK: The application's answer, and only it

        @Test(arguments: [("complete-409", 409), ("complete-404", 404)])
        func uploadCompleteOnAnErrorStatusIsTheApplicationsAnswer(scenario: String, status: Int) async throws {
            let server = try await DraftServer()
            let (_, answered) = try await upload(server, scenario)
            #expect(answered == status)
            #expect(try server.forms() == [expected], "processed once")
            #expect(try server.log().map(\.method) == ["OPTIONS", "POST", "PATCH"])
        }

        /// The scenarios whose answers the protocol goes on from (`nil`), and those whose answer is the application's
        /// refusal, with its status.
        static let judgedScenarios: [(String, Int?)] = [
            ("patch-503", nil), ("conflict-409", nil), ("partial-200", nil), ("too-large", nil), ("redirect-307", nil),
            ("complete-409", 409), ("complete-404", 404),
        ]

        /// Only the upload's answer is judged against `acceptableStatusCodes`: an answer the protocol goes on from (a
        /// 503, a 409 or 200 that keeps part, a 413, a 307 that moves the upload) is not the caller's to refuse, and the
        /// form arrives; the application's own 409 or 404 is, with its body.
        @Test(arguments: judgedScenarios)
        func onlyTheAnswersStatusIsJudged(scenario: String, refused: Int?) async throws {
            let server = try await DraftServer()
            let result = await Result {
                try await URLSession(configuration: .ephemeral).upload(
                    form, with: URLRequest(url: server.url(scenario: scenario)), strategy: .resumable(fast),
                    acceptableStatusCodes: 200..<300)
            }
            #expect(try server.forms() == [expected], "\(scenario): processed once")
            switch (result, refused) {
            case (.success(let (_, response)), nil):
                #expect((response as? HTTPURLResponse)?.statusCode == 200, "\(scenario)")
            case (.failure(let error as MultipartError), let refused?):
                guard case .unacceptableStatus(refused, let body) = error.reason else {
                    Issue.record("\(scenario): \(error)")
                    return
                }
                #expect(error.response?.statusCode == refused && !body.isEmpty, "\(scenario)")
            default:
                Issue.record("\(scenario): \(result)")
            }
        }

        /// An application that refuses the form after its first part (16 MiB, refused after 100,000 bytes) answers
        /// with `Upload-Complete: ?1`: from version 10 that is its answer, returned as it is (here the status error with
        /// its body), with no request after it and nothing deleted. In version 9 `?1` said the whole upload was
        /// received, which the client had not sent: the breach it is, with nothing deleted either.
        @Test(arguments: [10, 9])
        func anEarlyRefusalIsTheApplicationsAnswerFromVersion10(version: Int) async throws {
            try await earlyRefusal(
                version: version, scenario: "early-400", body: "refused the form after its first part")
        }

        /// The same refusal once a whole append sent with `Upload-Complete: ?0` was read (the server's limit takes the
        /// form in appends of 100,000 bytes), on a connection kept alive: the application's answer with its body.
        @Test func anEarlyRefusalOfAWholeAppendIsTheApplicationsAnswer() async throws {
            try await earlyRefusal(version: 10, scenario: "refused-whole", body: "refused: sorry")
        }

        /// The application's refusal with `Upload-Complete: ?1`, in version 10, is the answer whenever it comes: for
        /// every status from 400 on (those the protocol gives meanings of its own, 404, 409, 413 and 503, included),
        /// in an append sent with `?0` or the last one, mid-body or once the append was read whole, on a connection
        /// closed or kept alive. Each returns that status with its body, and nothing follows it: no request, no
        /// `DELETE`, no form.
        @Test(arguments: [400, 403, 404, 409, 413, 422, 500, 503])
        func theApplicationsRefusalIsTheAnswerWheneverItComes(status: Int) async throws {
            let server = try await DraftServer(version: 10)
            var generator = SeededGenerator(seed: UInt64(status))
            var form = MultipartFormData()
            try form.append(
                fileURL: try directory.file(
                    "refused-\(status).bin", contents: Data([UInt8].random(count: 300_000, using: &generator))),
                name: "video")
            let session = URLSession(configuration: .ephemeral)
            defer { session.finishTasksAndInvalidate() }
            for when in ["mid", "whole"] {
                for connection in ["keep", "close"] {
                    for last in ["", "-last"] {
                        let scenario = "refuse-\(status)-\(when)-\(connection)\(last)"
                        let before = try server.log().count
                        let result = await Result {
                            try await session.upload(
                                form, with: URLRequest(url: server.url(scenario: scenario)), strategy: .resumable(fast),
                                acceptableStatusCodes: 200..<300)
                        }
                        let methods = try server.log().dropFirst(before).map(\.method)
                        // Only the process's first upload to the server asks what it speaks.
                        #expect(
                            methods == (before == 0 ? ["OPTIONS"] : []) + ["POST", "PATCH"],
                            "\(scenario): nothing after the answer: \(methods)")
                        switch result {
                        case .failure(let error as MultipartError):
                            guard case .unacceptableStatus(status, let body) = error.reason else {
                                Issue.record("\(scenario): \(error)")
                                continue
                            }
                            #expect(String(decoding: body, as: UTF8.self) == "refused with \(status)", "\(scenario)")
                        default:
                            Issue.record("\(scenario): \(result)")
                        }
                    }
                }
            }
            #expect(try server.forms().isEmpty)
        }

        /// A success claimed early (a 200 with `Upload-Complete: ?1` after the first 100,000 bytes of a 16 MiB append)
        /// is the breach it is in every version: the upload fails with `.completionClaimedEarly`, and the upload the
        /// server calls complete is not deleted (no `DELETE`, no request after the answer).
        @Test(arguments: [10, 9])
        func anEarlySuccessIsABreachAndDeletesNothing(version: Int) async throws {
            let server = try await DraftServer(version: version)
            var generator = SeededGenerator(seed: 62)
            var large = MultipartFormData()
            try large.append(
                fileURL: try directory.file(
                    "large.bin", contents: Data([UInt8].random(count: 16 << 20, using: &generator))),
                name: "video")
            let form = large
            let error = try await #require(throws: MultipartError.self) {
                _ = try await URLSession(configuration: .ephemeral).upload(
                    form, with: URLRequest(url: server.url(scenario: "early-200")), strategy: .resumable(fast))
            }
            guard case .completionClaimedEarly = error.reason else {
                Issue.record("a success before the last byte: \(error)")
                return
            }
            let methods = try server.log().map(\.method)
            #expect(!methods.contains("DELETE"), "nothing deleted: \(methods)")
            #expect(methods.last == "PATCH", "no request after the answer: \(methods)")
        }

        private func earlyRefusal(version: Int, scenario: String, body expected: String) async throws {
            let server = try await DraftServer(version: version)
            var generator = SeededGenerator(seed: 61)
            var large = MultipartFormData()
            try large.append(
                fileURL: try directory.file(
                    "large.bin", contents: Data([UInt8].random(count: 16 << 20, using: &generator))),
                name: "video")
            let form = large
            let error = try await #require(throws: MultipartError.self) {
                _ = try await URLSession(configuration: .ephemeral).upload(
                    form, with: URLRequest(url: server.url(scenario: scenario)), strategy: .resumable(fast),
                    acceptableStatusCodes: 200..<300)
            }
            let methods = try server.log().map(\.method)
            let probes = Array(repeating: "OPTIONS", count: 11 - version)
            #expect(methods == probes + ["POST", "PATCH"], "no request after the answer, no DELETE: \(methods)")
            #expect(try server.forms().isEmpty)
            if version == 10 {
                guard case .unacceptableStatus(400, let body) = error.reason else {
                    Issue.record("the application's 400: \(error)")
                    return
                }
                #expect(String(decoding: body, as: UTF8.self).contains(expected), "\(scenario)")
            } else {
                guard case .completionClaimedEarly = error.reason else {
                    Issue.record("version 9 reads ?1 as the whole upload received: \(error)")
                    return
                }
            }
        }

        /// Version 10's conflict: a 409 with `?0` and the server's offset, and the upload goes on from there.
        @Test func aConflictInVersion10GoesOnFromTheServersOffset() async throws {
            let server = try await DraftServer(version: 10)
            let (_, status) = try await upload(server, "conflict-409")
            #expect(status == 200)
            #expect(try server.forms() == [expected])
            let log = try server.log()
            // The server answers before it has read the append whole, and closes: the client meets the answer, or,
            // one time in a few under load, the connection's reset first, and then asks where the server stands.
            let methods = log.map(\.method)
            #expect(
                methods == ["OPTIONS", "POST", "PATCH", "PATCH"]
                    || methods == ["OPTIONS", "POST", "PATCH", "HEAD", "PATCH"],
                "\(methods)")
            #expect(log.last?.offset == String(form.contentLength! / 2), "from the server's offset")
        }

        @Test func anIncompleteAnswerIsNeverTheUploadsAnswer() async throws {
            let server = try await DraftServer()
            let (_, status) = try await upload(server, "incomplete-204")
            #expect(status == 200)
            #expect(try server.forms() == [expected])
            #expect(try server.log().map(\.method) == ["OPTIONS", "POST", "PATCH", "HEAD", "PATCH"])
        }

        @Test func everyByteButIncompleteIsCompletedByAnEmptyAppend() async throws {
            let server = try await DraftServer()
            let (_, status) = try await upload(server, "all-bytes-incomplete")
            #expect(status == 200)
            #expect(try server.forms() == [expected])
            let last = try #require(try server.log().last)
            #expect(last.method == "PATCH" && last.bytes == 0 && last.complete == "?1")
            #expect(last.offset == String(form.contentLength!))
        }

        /// Even for a caller whose delegate follows no redirect (as `multipart` without `-L`): the 307 is the
        /// protocol's, never the upload's answer.
        @Test func aRedirectFromTheUploadResourceMovesIt() async throws {
            let server = try await DraftServer()
            let session = URLSession(configuration: .ephemeral, delegate: NoRedirects(), delegateQueue: nil)
            let (_, response) = try await session.upload(
                form, with: URLRequest(url: server.url(scenario: "redirect-307")), strategy: .resumable(fast))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try server.forms() == [expected])
            #expect(try server.log().last.map { $0.method == "PATCH" && $0.path.hasSuffix("-moved") } == true)
        }

        /// Only the answer is the answer: the body of every answer the upload goes on from (a 307 to the moved
        /// upload, a 503, a 413, a 409, a 200 that keeps part of the form) reaches no sink, whether the answer goes
        /// to a closure or to a file; each carries one (`STATUS to an append: not the answer`).
        @Test(arguments: ["redirect-307", "patch-503", "too-large", "conflict-409", "partial-200"])
        func onlyTheAnswerReachesTheSink(scenario: String) async throws {
            let (toClosure, toFile) = (try await DraftServer(), try await DraftServer())
            let pieces = Pieces()
            _ = try await URLSession.shared.upload(
                form, with: URLRequest(url: toClosure.url(scenario: scenario)), strategy: .resumable(fast),
                responseBody: .chunks { _, piece in pieces.append(piece) })
            let destination = directory.path("answer-\(scenario).json")
            _ = try await URLSession.shared.upload(
                form, with: URLRequest(url: toFile.url(scenario: scenario)), strategy: .resumable(fast),
                responseBody: .file(destination))
            for (body, server) in [(pieces.data, toClosure), (try Data(contentsOf: destination), toFile)] {
                let text = String(decoding: body, as: UTF8.self)
                #expect(!text.contains("not the answer"), "\(text)")
                #expect((try? JSONDecoder().decode(DraftServer.Form.self, from: body)) == expected, "\(text)")
                #expect(try server.forms() == [expected])
                #expect(try server.log().contains { $0.method == "PATCH" && $0.complete == "?1" && $0.bytes > 0 })
            }
        }

        @Test func theDraftsCreationExampleIsTaken() async throws {
            let server = try await DraftServer()
            let (_, status) = try await upload(server, "creation-201")
            #expect(status == 200)
            #expect(try server.forms() == [expected])
        }

        // MARK: Limits and retries

        @Test func aFormOverMaxSizeFailsBeforeAnyByte() async throws {
            let server = try await DraftServer()
            let reason = try await failure(server, "max-size")
            guard case .formOverUploadLimit(maxSize: 100, contentLength: form.contentLength!) = reason else {
                Issue.record("\(reason)")
                return
            }
            #expect(try server.log().map(\.method) == ["OPTIONS"])
        }

        /// A form under the server's `min-size` goes whole, in a request without the draft's fields, and the events say
        /// why: the server speaks the draft (``MultipartResumption/Event/underMinimumSize(minSize:)``), not that it
        /// speaks none.
        @Test func aFormUnderMinSizeGoesWholeAsAPlainRequest() async throws {
            let server = try await DraftServer()
            let events = EventLog()
            var resumption = fast
            resumption.events = events.record
            let (_, status) = try await upload(server, "min-size", resumption: resumption)
            #expect(status == 200)
            #expect(events.all.contains(.underMinimumSize(minSize: 1_000_000_000)), "\(events.all)")
            #expect(!events.all.contains(.notResumable), "\(events.all)")
            #expect(try server.forms() == [expected])
            let log = try server.log()
            #expect(log.map(\.method) == ["OPTIONS", "POST"])
            #expect(log.last?.bytes == Int(form.contentLength!) && log.last?.complete == nil)
        }

        @Test func maxAppendSizeSendsTheFormInPartsThatSayIncompleteUntilTheLast() async throws {
            let server = try await DraftServer()
            let (_, status) = try await upload(server, "max-append")
            #expect(status == 200)
            #expect(try server.forms() == [expected])
            let patches = try server.log().filter { $0.method == "PATCH" }
            #expect(patches.map(\.bytes) == [100_000, 100_000, 100_000, Int(form.contentLength!) - 300_000])
            #expect(patches.map(\.offset) == ["0", "100000", "200000", "300000"])
            #expect(patches.map(\.complete) == ["?0", "?0", "?0", "?1"])
        }

        /// The rate asked is the whole upload's: through 100 kB appends, and with the second dropped half-way and
        /// sent again, the upload takes at least 0.95 of the form's length over the rate (each request's body once
        /// started with a read at once, which made it 0.69).
        @Test(arguments: ["max-append", "max-append-drop"])
        func pacingHoldsAcrossAppendsAndResends(scenario: String) async throws {
            let server = try await DraftServer()
            let rate = 300_000
            let stopwatch = Stopwatch()
            let (_, response) = try await URLSession(configuration: .ephemeral).upload(
                form, with: URLRequest(url: server.url(scenario: scenario)),
                strategy: .resumable(fast, pacing: MultipartPacing(bytesPerSecond: rate)))
            let seconds = stopwatch.seconds
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try server.forms() == [expected])
            let patches = try server.log().filter { $0.method == "PATCH" }
            let rest = Int(form.contentLength!) - 300_000
            // The dropped one kept half its bytes; the next goes on from there, sending what was in flight again.
            let sent =
                scenario == "max-append"
                ? [100_000, 100_000, 100_000, rest] : [100_000, 50_000, 100_000, rest + 50_000]
            #expect(patches.map(\.bytes) == sent)
            let asked = Double(form.contentLength!) / Double(rate)
            #expect(seconds >= 0.95 * asked, "\(seconds) s for \(asked) s asked: \(seconds / asked)")
        }

        @Test func a413IsAnsweredWithSmallerAppends() async throws {
            let server = try await DraftServer()
            let (_, status) = try await upload(server, "too-large")
            #expect(status == 200)
            #expect(try server.forms() == [expected])
            let patches = try server.log().filter { $0.method == "PATCH" }
            // The whole form refused, then half of it, then a quarter at a time, which the server takes.
            let length = Int(form.contentLength!)
            let quarter = length / 2 / 2
            let rest = length - 4 * quarter
            #expect(patches.map(\.bytes) == [length, length / 2, quarter, quarter, quarter, quarter, rest])
            #expect(patches.map(\.complete).suffix(5) == ["?0", "?0", "?0", "?0", "?1"])
        }

        @Test(arguments: ["head-503", "patch-503"])
        func serverErrorsAreRetriedOnTheSameUpload(scenario: String) async throws {
            let server = try await DraftServer()
            let (_, status) = try await upload(server, scenario)
            #expect(status == 200)
            #expect(try server.forms() == [expected])
            #expect(try server.log().filter { $0.method == "POST" }.count == 1, "never created again")
        }

        // MARK: Offsets

        @Test(arguments: ["offset-down", "creation-offset"])
        func anOffsetThatCannotBeTrueFailsAndDeletesTheUpload(scenario: String) async throws {
            let server = try await DraftServer()
            let reason = try await failure(server, scenario)
            guard case .offsetOutOfRange(let offset, let allowed) = reason, !allowed.contains(offset) else {
                Issue.record("\(reason)")
                return
            }
            let log = try server.log()
            #expect(log.last?.method == "DELETE", "\(log.map(\.method))")
            #expect(try server.forms().isEmpty)
            if scenario == "creation-offset" { #expect(!log.map(\.method).contains("PATCH"), "nothing sent") }
        }

        /// The clean-up never holds the caller: with a headers hook that answers for the `DELETE` only once the test
        /// lets it, after the cancel returned, the cancel returns (a cancel that waited for the clean-up never would,
        /// which the deadline on its return catches wherever the test runs; within 1 s where it runs alone,
        /// `measuredAlone`), and the `DELETE` still goes out, with the hook's headers, once it answers.
        @Test(.tags(.measuredAlone), arguments: [false, true])
        func aCancelledUploadDeletesItsResourceWithoutWaitingForIt(hookWaits: Bool) async throws {
            let server = try await DraftServer()
            // 3 MB, which the slow server reads in 2.4 s: the DELETE comes while it still reads what was in flight,
            // however late a loaded machine runs the hook (300 KB, read in 0.25 s, was all read first once in CI).
            var form = MultipartFormData()
            form.append(Data(repeating: 7, count: 3_000_000), name: "video", fileName: "v.bin")
            let fast = fast
            let request = URLRequest(url: server.url(scenario: "slow"))
            let started = ProgressReports()
            let (released, release) = AsyncStream<Never>.makeStream()
            defer { release.finish() }
            let headers = MultipartHeaders.fresh { _, reason in
                if case .resumable(.cleanUp) = reason {
                    if hookWaits { for await _ in released {} }
                    return ["Authorization": "Bearer for-the-delete"]
                }
                return [:]
            }
            let upload = Task {
                try await URLSession(configuration: .ephemeral).upload(
                    form, with: request, strategy: .resumable(fast), headers: headers, progress: started.append)
            }
            try await Stopwatch.wait(atMost: 10, polling: 0.02) { started.values.isEmpty }
            let stopwatch = Stopwatch()
            upload.cancel()
            let ended = try await within(seconds: CancelBound.sanitized ? 150 : 30, "the cancelled upload") {
                await upload.result
            }
            #expect(throws: CancellationError.self) { _ = try ended.get() }
            if LongRuns.alone { #expect(stopwatch.seconds < 1, "the cancel returned after \(stopwatch.seconds) s") }
            release.finish()
            // The slow server logs the PATCH in flight once it has read it, which may be after the DELETE.
            try await Stopwatch.wait(atMost: CancelBound.sanitized ? 60 : 10) {
                try !server.log().contains { $0.method == "DELETE" }
            }
            let log = try server.log()
            let delete = try #require(log.last { $0.method == "DELETE" }, "\(log.map(\.method))")
            #expect(delete.authorization == "Bearer for-the-delete")
            // With a hook that answers at once the DELETE comes before the slow server has read what was in flight,
            // and stops that append; one held until the cancel returned may come after it read the whole form, which
            // no DELETE takes back.
            if !hookWaits { #expect(try server.forms().isEmpty) }
        }
    }
}

/// What a `.chunks` closure was handed, in order.
private final class Pieces: @unchecked Sendable {
    // @unchecked: `received` is guarded by `lock`.
    private let lock = NSLock()
    private var received = Data()

    func append(_ piece: Data) { lock.withLock { received.append(piece) } }
    var data: Data { lock.withLock { received } }
}
