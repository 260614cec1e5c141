import Foundation
import MultipartQueue
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A form within ``MultipartResumption/singleRequestLimit`` (1 MiB by default) goes in one request, as a plain
/// upload costs: its creation carries it whole with `Upload-Complete: ?1` and the caller's `Idempotency-Key`, asking
/// nothing first. Each trial checks what the application processed (bytes and hash), with the options a user types
/// first.
extension URLSessionSuites {
    @Suite(.serialized) struct OneRequestTests {
        let directory: TemporaryDirectory
        let form: MultipartFormData
        /// What the application must have processed: the whole form.
        let expected: DraftServer.Form

        init() throws {
            directory = try TemporaryDirectory()
            var generator = SeededGenerator(seed: 80)
            var form = MultipartFormData()
            form.append("Ada \"quoted\" ü\r\nline", name: "caption")
            let photo = try directory.file(
                "photo.jpg", contents: Data([UInt8].random(count: 64 << 10, using: &generator)))
            try form.append(fileURL: photo, name: "photo")
            self.form = form
            let encoded = try directory.file("form.multipart", contents: try form.encode())
            expected = DraftServer.Form(bytes: Int(form.contentLength!), sha256: try sha256sum(encoded))
        }

        /// Sends the form `.resumable` with the defaults, with `key` as its `Idempotency-Key`; the events it told.
        private func upload(
            to url: URL, key: String? = "photo-1"
        ) async throws -> (answer: Data, status: Int, events: [MultipartResumption.Event]) {
            let events = LockedValue<[MultipartResumption.Event]>([])
            var request = URLRequest(url: url)
            request.setValue(key, forHTTPHeaderField: "Idempotency-Key")
            var resumption = MultipartResumption()
            resumption.events = { event in events.withLock { $0.append(event) } }
            let (data, response) = try await URLSession(configuration: .ephemeral).upload(
                form, with: request, strategy: .resumable(resumption), acceptableStatusCodes: 200..<300)
            return (data, (response as? HTTPURLResponse)?.statusCode ?? 0, events.withLock { $0 })
        }

        /// To a server of the draft: one `POST`, said complete at the form's length with the caller's key, and the
        /// application's answer, which names the form it processed.
        @Test func aSmallFormGoesWholeInItsCreation() async throws {
            let server = try await DraftServer()
            let (answer, status, _) = try await upload(to: server.url())
            #expect(status == 200)
            #expect(try JSONDecoder().decode(DraftServer.Form.self, from: answer) == expected)
            #expect(try server.forms() == [expected])
            let log = try server.log()
            #expect(log.map(\.method) == ["POST"], "\(log)")
            let request = try #require(log.first)
            #expect(
                request.complete == "?1" && request.length == String(expected.bytes) && request.bytes == expected.bytes)
            #expect(request.idempotency == "photo-1" && request.version == "10")
        }

        /// A server without the draft takes it as a plain upload: one request, nothing asked first.
        @Test func aServerWithoutTheDraftTakesItAsAPlainUpload() async throws {
            let server = try await DraftServer(version: 5)
            let (answer, status, events) = try await upload(to: server.url())
            #expect(status == 200)
            #expect(try JSONDecoder().decode(DraftServer.Form.self, from: answer) == expected)
            #expect(try server.forms() == [expected])
            #expect(try server.log().map(\.method) == ["POST"])
            #expect(!events.contains(.notResumable), "nothing was asked, so nothing was found: \(events)")
        }

        /// The connection drops after the application processed the form, before any answer: the form goes again
        /// whole, said (`retrying`), under the same key, which the server answers as it did, so the application has
        /// it once. A server that does not honour the key processes it twice, which is why a queue counts the send.
        @Test(arguments: [true, false])
        func aDropBeforeTheAnswerSendsItAgainWhole(honoursKey: Bool) async throws {
            let server = try await DraftServer()
            if !honoursKey { try server.ignoreIdempotencyKeys() }
            let (answer, status, events) = try await upload(to: server.url(scenario: "complete-dropped"))
            #expect(status == 200)
            #expect(try JSONDecoder().decode(DraftServer.Form.self, from: answer) == expected)
            let log = try server.log()
            #expect(log.map(\.method) == ["POST", "POST"] && log.map(\.status) == [0, 200], "\(log)")
            #expect(log.allSatisfy { $0.idempotency == "photo-1" && $0.bytes == expected.bytes })
            #expect(try server.forms() == Array(repeating: expected, count: honoursKey ? 1 : 2))
            let retries = events.filter { if case .retrying = $0 { true } else { false } }
            #expect(retries.count == 1, "\(events)")
            let sent = events.compactMap { event -> UInt64? in
                if case .bodySent(let bytes) = event { bytes } else { nil }
            }
            #expect(sent == [UInt64(expected.bytes), UInt64(expected.bytes)], "\(events)")
        }

        /// A server that speaks an older version refuses the first one request, made in the newest, with a 400 naming
        /// its own (as `NIOResumableUpload` does), and the form goes again in that one. What one upload found, the others of its process go on with,
        /// a queue's and plain ones alike: each of them in one request. A new queue that guessed again paid the
        /// refusal, the form sent for nothing and a new connection for each of its first uploads.
        @Test(arguments: [true, false])
        func aQueueAndItsProcessShareWhatTheServerSpeaks(queueFirst: Bool) async throws {
            let server = try await DraftServer(versions: [6], namingOnRefusal: true)
            func throughQueue() async throws {
                let queue = try MultipartUploadQueue(directory: directory.path("queue"))
                _ = try await queue.add(form, with: URLRequest(url: server.url()))
                try await within(seconds: 60, "the queue's run") { try await queue.run() }
                guard case .completed(let answer) = await queue.uploads.first?.state else {
                    Issue.record("\(await queue.uploads.map(\.state))")
                    return
                }
                #expect(try JSONDecoder().decode(DraftServer.Form.self, from: answer.body) == expected)
            }
            func alone() async throws {
                let (answer, status, _) = try await upload(to: server.url())
                #expect(status == 200)
                #expect(try JSONDecoder().decode(DraftServer.Form.self, from: answer) == expected)
            }
            if queueFirst { try await throughQueue() } else { try await alone() }
            let first = try server.log()
            #expect(first.map(\.version) == ["10", "6"], "\(first)")
            #expect(first.map(\.status) == [400, 200], "\(first)")
            if queueFirst { try await alone() } else { try await throughQueue() }
            let second = try server.log().dropFirst(first.count)
            #expect(second.map(\.method) == ["POST"], "\(second)")
            #expect(second.map(\.version) == ["6"], "\(second)")
            #expect(second.first?.bytes == expected.bytes && second.first?.complete == "?1")
            #expect(try server.forms() == [expected, expected], "each processed once")
        }

        /// Without a key of the caller's, the upload has one of its own: the form sent again after the drop goes under
        /// the same key, which the server answers as it did, so the application has it once. Each upload's key is its
        /// own, and no request but the creation carries it.
        @Test func withoutACallersKeyTheUploadHasOneOfItsOwn() async throws {
            let server = try await DraftServer()
            let (answer, status, _) = try await upload(to: server.url(scenario: "complete-dropped"), key: nil)
            #expect(status == 200)
            #expect(try JSONDecoder().decode(DraftServer.Form.self, from: answer) == expected)
            #expect(try server.forms() == [expected], "processed once")
            let log = try server.log()
            #expect(log.map(\.method) == ["POST", "POST"] && log.map(\.status) == [0, 200], "\(log)")
            let key = try #require(log.first?.idempotency)
            #expect(log.allSatisfy { $0.idempotency == key }, "\(log)")
            _ = try await upload(to: server.url(), key: nil)
            let next = try server.log().dropFirst(log.count)
            #expect(next.count == 1 && next.first?.idempotency != nil && next.first?.idempotency != key, "\(next)")
            #expect(try server.forms() == [expected, expected])
        }

        /// A queue sends it in one request too, and counts the send after the drop in `sentAgain`.
        @Test func aQueueCountsTheFormSentAgain() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: directory.path("queue"))
            let id = try await queue.add(form, with: URLRequest(url: server.url(scenario: "complete-dropped")))
            let smooth = try await queue.add(form, with: URLRequest(url: server.url()))
            try await within(seconds: 60, "the queue's run") { try await queue.run() }
            let uploads = await queue.uploads
            let dropped = try #require(uploads.first { $0.id == id })
            let other = try #require(uploads.first { $0.id == smooth })
            guard case .completed(let answer) = dropped.state, case .completed = other.state else {
                Issue.record("\(uploads.map(\.state))")
                return
            }
            #expect(answer.statusCode == 200)
            #expect(dropped.sentAgain == 1 && other.sentAgain == 0)
            // Each under its own key, which the queue made: the dropped one processed once.
            #expect(try server.forms() == [expected, expected])
            // libcurl sends a request again by itself where its reused connection died before any answer: the
            // dropped one, where it went on the other's connection. The head goes again with none of the body (the
            // body goes once), which the upload takes for a drop, and sends the form again.
            let log = try server.log().filter { !($0.bytes == 0 && $0.scenario == "complete-dropped") }
            #expect(log.map(\.method) == ["POST", "POST", "POST"], "\(log)")
            #expect(Set(log.compactMap(\.idempotency)).count == 2, "\(log)")
        }
    }
}
