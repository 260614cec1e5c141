import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartQueue
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// ``MultipartUploadQueue``: what it keeps on disk, what it refuses, and its uploads against the draft server, N at a
    /// time, each failing alone, none sent twice where the server keeps a completed upload.
    @Suite struct UploadQueueTests {
        let directory: TemporaryDirectory

        init() throws {
            directory = try TemporaryDirectory()
        }

        private var queueDirectory: URL { directory.path("queue") }

        /// Every form created first, as a form over 1 MiB is by default: the trials of what a queue asks its servers
        /// (a smaller form asks nothing), and of the answers to a creation and its appends.
        private let createdFirst = MultipartResumption(singleRequestLimit: 0)

        /// The IDs of the records in the queue's database, in the queue's order, as another process reads them.
        private func records() -> [String] {
            var ids: [String] = []
            forEachRow("SELECT id FROM uploads ORDER BY sequence, id") { ids.append($0.text(0) ?? "") }
            return ids
        }

        /// Runs `sql` on the queue's database through a connection of its own, as another process or a hand with the
        /// sqlite3 command would.
        private func forEachRow(
            _ sql: String, _ values: [SQLiteDatabase.Value] = [], _ row: (SQLiteDatabase.Row) -> Void = { _ in }
        ) {
            let path = queueDirectory.appendingPathComponent(QueueStore.databaseName).path
            guard FileManager.default.fileExists(atPath: path) else { return }
            do {
                try SQLiteDatabase(path: path).withConnection { connection throws(SQLiteDatabase.Failure) in
                    try connection.run(sql, values, row: row)
                }
            } catch {
                Issue.record("\(sql): \(error)")
            }
        }

        /// A form of a field, bytes, a file and a part with header lines of its own.
        private func form(_ index: Int, fileBytes: Int = 50_000) throws -> MultipartFormData {
            // A block repeated: quick to make under a sanitizer, and another file for each index.
            let block = Data((0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) })
            var contents = Data(capacity: fileBytes)
            while contents.count < fileBytes { contents.append(block.prefix(fileBytes - contents.count)) }
            _ = try directory.file("photo-\(index).jpg", contents: contents)
            return try formAsItIsNow(index, boundary: MultipartFormData().boundary)
        }

        /// Form `index` with its photo as the file is now: what the server must hold after a retry.
        private func formAsItIsNow(_ index: Int, boundary: String) throws -> MultipartFormData {
            var form = try MultipartFormData(boundary: boundary)
            form.append("photo \(index)", name: "title")
            form.append(Data([0, 13, 10, UInt8(index)]), name: "raw", fileName: "raw.bin")
            try form.append(fileURL: directory.path("photo-\(index).jpg"), name: "photo")
            try form.append(
                headers: [("Content-Disposition", "form-data; name=\"meta\""), ("X-Tag", "a;b")], body: Data("{}".utf8))
            return form
        }

        /// What the server must have processed for `form`.
        private func expected(_ form: MultipartFormData) throws -> DraftServer.Form {
            let file = directory.path("expected-\(UUID())")
            try form.writeEncodedData(to: file)
            return DraftServer.Form(bytes: Int(form.contentLength!), sha256: try sha256sum(file))
        }

        // MARK: What add keeps and refuses

        @Test func aRecordRebuildsTheFormByteForByte() async throws {
            let original = try form(1)
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            _ = try await queue.add(original, with: URLRequest(url: URL(string: "http://127.0.0.1:9/upload")!))
            let files = records()
            #expect(files.count == 1, "on disk before add returns")
            let record = try QueueStore(queueDirectory).read(files[0])
            let rebuilt = try #require(try record.form.rebuilt())
            #expect(try rebuilt.encode() == original.encode())
            #expect(rebuilt.contentType == original.contentType)
        }

        /// Many added in one call (their records made and encoded on every core): each in its place, in the order
        /// given, with its own ID, and rebuilt byte for byte; a key already in the queue, or earlier in the call, adds
        /// nothing and gives that upload's ID. One that cannot be queued, however far into the call, adds none.
        @Test func manyAddedInOneCallKeepTheirOrderAndNoneIsAddedWhereOneCannotBe() async throws {
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            let url = URL(string: "http://127.0.0.1:9/upload")!
            let first = try await queue.add(try form(0), with: URLRequest(url: url), key: "k-0")
            var forms: [MultipartFormData] = []
            var uploads: [MultipartUploadQueue.NewUpload] = []
            for index in 0..<300 {
                var form = MultipartFormData()
                form.append("upload \(index)", name: "title")
                form.append(Data(repeating: UInt8(index % 256), count: index), name: "bytes", fileName: "b.bin")
                forms.append(form)
                // Every tenth keyed, the first with the key already queued, and 150 with 140's.
                let key = index == 150 ? "k-140" : index % 10 == 0 ? "k-\(index)" : nil
                uploads.append(.init(form: form, request: URLRequest(url: url), key: key))
            }
            let ids = try await queue.add(contentsOf: uploads)
            #expect(ids.count == 300 && ids[0] == first && ids[150] == ids[140])
            #expect(Set(ids).count == 299)
            let listed = await queue.uploads.map(\.id)
            #expect(listed == [first] + ids.enumerated().filter { $0.offset != 0 && $0.offset != 150 }.map(\.element))
            let store = try QueueStore(queueDirectory)
            for index in [1, 63, 64, 149, 151, 299] {
                let rebuilt = try #require(try store.read(ids[index].rawValue).form.rebuilt())
                #expect(try rebuilt.encode() == forms[index].encode(), "upload \(index)")
            }
            var refused = uploads.map { MultipartUploadQueue.NewUpload(form: $0.form, request: $0.request) }
            refused[200].form.append(InputStream(data: Data(count: 10)), length: 10, name: "pipe")
            await #expect(throws: MultipartError.self) { try await queue.add(contentsOf: refused) }
            #expect(await queue.uploads.count == 299 && records().count == 299, "none of the refused call")
        }

        @Test func aStreamPartIsRefusedNamingIt() async throws {
            var form = MultipartFormData()
            form.append("a", name: "first")
            form.append(InputStream(data: Data(count: 10)), length: 10, name: "pipe")
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            let error = try await #require(throws: MultipartError.self) {
                _ = try await queue.add(form, with: URLRequest(url: URL(string: "http://127.0.0.1:9/")!))
            }
            guard case .streamNotQueued = error.reason else {
                Issue.record("\(error)")
                return
            }
            #expect(error.part?.index == 1 && error.part?.name == "pipe", "\(error)")
            #expect(records().isEmpty)
        }

        /// No credential is ever written: each way a request carries one is refused, saying where credentials go.
        @Test(arguments: ["Authorization", "cookie", "Proxy-Authorization", "url"])
        func aCredentialIsRefused(carrying credential: String) async throws {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:9/")!)
            if credential == "url" {
                request.url = URL(string: "http://ada:secret@127.0.0.1:9/")
            } else {
                request.setValue("secret", forHTTPHeaderField: credential)
            }
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            let error = try await #require(throws: MultipartError.self) {
                _ = try await queue.add(try form(1), with: request)
            }
            guard case .credentialNotQueued = error.reason else {
                Issue.record("\(error)")
                return
            }
            #expect(error.description.contains("headers hook"), "\(error)")
            #expect(records().isEmpty)
            let written = try FileManager.default.subpathsOfDirectory(atPath: queueDirectory.path)
            // The database's bytes, its log's too: a refused add writes nothing of its request.
            for path in written {
                let bytes = (try? Data(contentsOf: queueDirectory.appendingPathComponent(path))) ?? Data()
                #expect(bytes.range(of: Data("secret".utf8)) == nil, "\(path)")
            }
        }

        // MARK: Running

        /// Eight uploads, three at a time, in the order added: each completed once and whole, its answer kept (also by
        /// a queue opened anew on the directory), the progress at its total; a second run sends nothing.
        /// The queue's rate is one for all its uploads in flight, and changes while they go: 4 forms of 1 MB at
        /// 200 kB/s would take 20 s; each moment until a second's worth has gone keeps to the rate (the bytes the
        /// queue's progress counts, the uploads' sum), and once the rate is lifted the rest goes at once. Every form
        /// arrives whole.
        @Test func theQueuesRateHoldsForAllItsUploadsAndChangesWhileTheyGo() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory, maximumConcurrentUploads: 4)
            var expected: [DraftServer.Form] = []
            for index in 0..<4 {
                let form = try form(index, fileBytes: 1_000_000)
                expected.append(try self.expected(form))
                _ = try await queue.add(form, with: URLRequest(url: server.url()))
            }
            let rate = 200_000
            let started = Date()
            let run = Task { try await queue.run(pacing: MultipartPacing(bytesPerSecond: rate)) }
            // What the queue had handed out at moments until a second of the rate had gone, and when: however late a
            // loaded machine starts the uploads (under a sanitizer beside every suite, creating four took seconds),
            // a moment that sent more than the rate allows fails, and a pacer that sends nothing meets the deadline.
            var samples: [(seconds: Double, bytes: Int64)] = []
            try await Stopwatch.wait(atMost: CancelBound.sanitized ? 150 : 30, polling: 0.1) {
                samples.append((Date().timeIntervalSince(started), queue.progress.completedUnitCount))
                return samples.last!.bytes < Int64(rate)
            }
            #expect(samples.last.map { $0.bytes >= Int64(rate) } == true, "the run kept to the rate: \(samples)")
            queue.pacing = nil
            #expect(queue.pacing == nil)
            let lifted = Date()
            try await run.value
            let seconds = Date().timeIntervalSince(lifted)
            for sample in samples {
                // The rate's bytes for the time, a read's (a tenth of a second's) and the catch-up's tenth more.
                let allowed = Double(rate) * (sample.seconds + 0.2)
                #expect(Double(sample.bytes) <= allowed, "\(sample.bytes) bytes handed out at \(sample.seconds) s")
            }
            // A rate not lifted sends the rest (3 MB and more) in 15 s or more: 10 s fails it, and leaves a loaded
            // machine nine seconds to send 3 MB on loopback.
            #expect(seconds < 10, "the rate lifted, the rest went at once: \(seconds) s")
            #expect(try server.forms().sorted { $0.sha256 < $1.sha256 } == expected.sorted { $0.sha256 < $1.sha256 })
        }

        @Test func uploadsGoThreeAtATimeInOrderAndCompleteOnce() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            var forms: [MultipartFormData] = []
            var ids: [MultipartUploadQueue.ID] = []
            for index in 0..<8 {
                let form = try form(index)
                forms.append(form)
                ids.append(try await queue.add(form, with: URLRequest(url: server.url())))
            }
            let events = queue.events
            let watcher = Task { () -> (most: Int, started: [MultipartUploadQueue.ID]) in
                var (running, most, started) = (0, 0, [MultipartUploadQueue.ID]())
                for await event in events {
                    switch event {
                    case .started(let id):
                        started.append(id)
                        running += 1
                        most = max(most, running)
                    case .completed, .failed, .waiting:
                        running -= 1
                        if started.count == 8, running == 0 { return (most, started) }
                    default: break
                    }
                }
                return (most, started)
            }
            let version = try QueueStore(queueDirectory).version
            try await within(seconds: 120, "the queue's run") {
                try await queue.run(on: URLSession(configuration: .ephemeral))
            }
            // The first three start in one transaction, and each later one in the transaction that ends those before
            // it: at most one a send, where a start and an end of their own took two.
            let transactions = try QueueStore(queueDirectory).version - version
            #expect(transactions <= 9, "\(transactions) transactions for 8 uploads")
            let seen = try await within(seconds: 10, "the events") { await watcher.value }
            #expect(seen.most == 3, "at most three at once, and three at a time")
            #expect(seen.started == ids, "in the order added")
            #expect(Set(try server.forms().map(\.sha256)) == Set(try forms.map { try expected($0).sha256 }))
            #expect(try server.forms().count == 8, "each once")
            let uploads = await queue.uploads
            for upload in uploads {
                guard case .completed(let answer) = upload.state else {
                    Issue.record("\(upload.id): \(upload.state)")
                    continue
                }
                #expect(answer.statusCode == 200 && !answer.body.isEmpty)
            }
            #expect(queue.progress.completedUnitCount == queue.progress.totalUnitCount)
            #expect(
                !FileManager.default.fileExists(atPath: queueDirectory.appendingPathComponent("state/\(ids[0])").path))

            let reopened = try MultipartUploadQueue(directory: queueDirectory)
            #expect(await reopened.uploads.map(\.state) == uploads.map(\.state), "the answers are kept")
            let before = try server.log().count
            try await within(seconds: 30, "a second run") { try await reopened.run(on: .shared) }
            #expect(try server.log().count == before, "nothing sent again")
        }

        /// The credentials a queue's run is given (the headers hook) go with every request to the origin the upload
        /// was added for, and with none to an upload resource the server put on another origin: the origin rule
        /// holds in a queue as in every upload.
        @Test func theRunsCredentialsReachTheirOriginOnly() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory, resumption: createdFirst)
            let original = try form(7)
            _ = try await queue.add(original, with: URLRequest(url: server.url(scenario: "other-origin")))
            try await within(seconds: 60, "the run") {
                try await queue.run(
                    on: .shared, headers: .fresh { _ in ["Authorization": "Bearer T", "Cookie": "c=1"] })
            }
            #expect(try server.forms() == [try expected(original)])
            let log = try server.log()
            let elsewhere = log.filter { $0.port == server.alternatePort }
            #expect(elsewhere.map(\.method).contains("PATCH"), "\(log.map(\.method))")
            #expect(elsewhere.allSatisfy { $0.authorization == nil && $0.cookie == nil }, "\(elsewhere)")
            let here = log.filter { $0.port == server.port }
            #expect(!here.isEmpty && here.allSatisfy { $0.authorization == "Bearer T" && $0.cookie == "c=1" })
        }

        /// A server whose every answer is random (after it read the body), as any server's may be: each upload ends
        /// as its own answer says
        /// (a 2xx completed with that status; a 408, 429 or 5xx waiting alone, since a busy server is no outage and
        /// pauses no other upload; any other status failed, naming it), and nothing traps.
        @Test(arguments: [55, 56, 57] as [UInt64])
        func randomAnswersEndEachUploadAsTheySay(seed: UInt64) async throws {
            let server = try await UploadServer()
            var generator = SeededGenerator(seed: seed)
            let quick = MultipartResumption(maximumAttempts: 1, initialDelay: 0.01, maximumDelay: 0.05)
            let queue = try MultipartUploadQueue(directory: queueDirectory, resumption: quick)
            var statuses: [MultipartUploadQueue.ID: Int] = [:]
            for index in 0..<12 {
                let status = Int.random(in: 200...599, using: &generator)
                let request = URLRequest(url: server.url("/status/\(status)"))
                statuses[try await queue.add(try form(index, fileBytes: 1_000), with: request)] = status
            }
            let count = statuses.count
            let events = queue.events
            let watcher = Task { () -> Set<MultipartUploadQueue.ID> in
                var seen: Set<MultipartUploadQueue.ID> = []
                for await event in events {
                    switch event {
                    case .completed(let id, _), .failed(let id, _), .waiting(let id, _): seen.insert(id)
                    default: break
                    }
                    if seen.count == count { break }
                }
                return seen
            }
            let run = Task { try await queue.run() }
            let seen = try await within(seconds: 60, "every upload to end or wait") { await watcher.value }
            run.cancel()
            _ = try await within(seconds: 30, "the cancelled run") { await run.result }
            #expect(seen.count == 12)
            for upload in await queue.uploads {
                let status = try #require(statuses[upload.id])
                switch (status, upload.state) {
                case (200..<300, .completed(let answer)):
                    #expect(answer.statusCode == status)
                case (408, .waiting), (429, .waiting), (500..<600, .waiting), (408, .pending), (429, .pending),
                    (500..<600, .pending):
                    break
                case (_, .failed(let reason))
                where !(200..<300).contains(status) && status != 408 && status != 429
                    && status < 500:
                    #expect(reason.reason.contains("\(status)"), "\(status): \(reason)")
                    #expect(reason.statusCode == status && reason.category == .status, "\(status): \(reason)")
                default:
                    Issue.record("\(status): \(upload.state)")
                }
            }
        }

        // MARK: Keys that ended

        /// The docs' launch pattern: every photo added with its key at each launch. A completed upload cleared by
        /// `removeCompleted()`, and one removed before it completed, stay out at the next launch (a queue opened anew,
        /// as another process would): their adds add nothing, give the ended upload's ID, and `end(ofKey:)` says how
        /// it ended; a new photo is added and sent. `again` adds one anew, which the server then gets once more.
        @Test func aKeyThatCompletedOrWasRemovedIsNotAddedAgainAtTheNextLaunch() async throws {
            let server = try await DraftServer()
            let request = URLRequest(url: server.url())
            let forms = try (0..<4).map { try form($0) }
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            var ids: [MultipartUploadQueue.ID] = []
            for index in 0..<2 { ids.append(try await queue.add(forms[index], with: request, key: "photo-\(index)")) }
            try await within(seconds: 60, "the first run") { try await queue.run() }
            await queue.removeCompleted()
            ids.append(try await queue.add(forms[2], with: request, key: "photo-2"))
            #expect(await queue.remove(ids[2]) == .removed)
            #expect(await queue.uploads.isEmpty)

            // The next launch adds every photo, and one new.
            let next = try MultipartUploadQueue(directory: queueDirectory)
            var added: [MultipartUploadQueue.ID] = []
            for index in 0..<4 { added.append(try await next.add(forms[index], with: request, key: "photo-\(index)")) }
            #expect(Array(added.prefix(3)) == ids)
            #expect(await next.uploads.map(\.id) == [added[3]])
            #expect(await next.end(ofKey: "photo-0") == .completed)
            #expect(await next.end(ofKey: "photo-1") == .completed)
            #expect(await next.end(ofKey: "photo-2") == .removed)
            #expect(await next.end(ofKey: "photo-3") == nil, "in the queue")
            #expect(await next.end(ofKey: "never added") == nil)
            let batch = try await next.add(
                contentsOf: (0..<4).map {
                    MultipartUploadQueue.NewUpload(form: forms[$0], request: request, key: "photo-\($0)")
                })
            #expect(batch == added, "adding many keeps the same rule")

            // Asked for again: added anew, and then in the queue, which a second `again` does not add to.
            let anew = try await next.add(forms[0], with: request, key: "photo-0", again: true)
            #expect(anew != ids[0])
            #expect(await next.end(ofKey: "photo-0") == nil)
            #expect(try await next.add(forms[0], with: request, key: "photo-0", again: true) == anew)
            let batchAgain = try await next.add(
                contentsOf: [
                    MultipartUploadQueue.NewUpload(form: forms[2], request: request, key: "photo-2", again: true)
                ]
            )
            #expect(batchAgain.count == 1 && batchAgain[0] != ids[2])
            #expect(Set(await next.uploads.map(\.id)) == [added[3], anew, batchAgain[0]])
            try await within(seconds: 60, "the second run") { try await next.run() }
            // Photos 0 twice (asked again), 1 and 3 once, 2 once (removed before it went, then asked again).
            let want = try [0, 1, 0, 2, 3].map { try expected(forms[$0]).sha256 }
            #expect(try server.forms().map(\.sha256).sorted() == want.sorted())
        }

        /// A database of layout 3, whose removals kept no key, or 2, whose failures had no category either, is brought
        /// to this layout at its first open, its uploads kept. A removal made before has no key, which adds anew; one
        /// made from then on keeps it.
        @Test(arguments: [3, 2]) func anEarlierLayoutIsBroughtToThisOne(layout: Int) async throws {
            let request = URLRequest(url: URL(string: "http://127.0.0.1:9/upload")!)
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            let kept = try await queue.add(try form(0), with: request, key: "kept")
            let gone = try await queue.add(try form(1), with: request, key: "gone")
            #expect(await queue.remove(gone) == .removed)
            // As the earlier version wrote it.
            forEachRow("DROP INDEX removals_by_key")
            forEachRow("ALTER TABLE removals DROP COLUMN key")
            if layout == 2 { forEachRow("ALTER TABLE uploads DROP COLUMN category") }
            forEachRow("PRAGMA user_version = \(layout)")

            let reopened = try MultipartUploadQueue(directory: queueDirectory)
            #expect(await reopened.uploads.map(\.id) == [kept])
            var found: Int64 = 0
            forEachRow("PRAGMA user_version") { found = $0.integer(0) ?? 0 }
            #expect(found == 4)
            let regained = try await reopened.add(try form(1), with: request, key: "gone")
            #expect(regained != gone, "a removal of layout \(layout) kept no key")
            #expect(await reopened.remove(kept) == .removed)
            #expect(try await reopened.add(try form(0), with: request, key: "kept") == kept)
            #expect(await reopened.end(ofKey: "kept") == .removed)
        }

        /// A server that speaks no version of the draft is asked once for a queue, not once an upload: the first upload
        /// probes it, and every later one sends its form whole at once.
        @Test func aServerWithoutTheDraftIsProbedOnce() async throws {
            let server = try await UploadServer()
            let queue = try MultipartUploadQueue(
                directory: queueDirectory, maximumConcurrentUploads: 1, resumption: createdFirst)
            var forms: [MultipartFormData] = []
            for index in 0..<6 {
                forms.append(try form(index))
                _ = try await queue.add(forms[index], with: URLRequest(url: server.url("/headers")))
            }
            try await within(seconds: 60, "the queue's run") { try await queue.run() }
            let log = try await server.log()
            let probes = log.filter { $0.method == "OPTIONS" }.count
            #expect(probes >= 1 && probes <= 5, "\(probes) probes, all for the first upload")
            #expect(log.prefix(probes).allSatisfy { $0.method == "OPTIONS" })
            #expect(log.filter { $0.method == "POST" }.map(\.bytes) == forms.map { Int($0.contentLength!) })
            #expect(await queue.uploads.allSatisfy { if case .completed = $0.state { true } else { false } })
        }

        /// Three uploads that start together to a server the queue knows nothing of ask it once: the first asks what
        /// it speaks, and the others wait for its finding, where each asked every version on its own before (15
        /// `OPTIONS` to a server without the draft).
        @Test(arguments: [false, true]) func uploadsThatStartTogetherAskTheirServerOnce(speaksDraft: Bool) async throws
        {
            let draftServer = speaksDraft ? try await DraftServer() : nil
            let plainServer = speaksDraft ? nil : try await UploadServer()
            let url = try draftServer.map { $0.url() } ?? #require(plainServer).url("/headers")
            let queue = try MultipartUploadQueue(
                directory: queueDirectory, maximumConcurrentUploads: 3, resumption: createdFirst)
            var forms: [MultipartFormData] = []
            for index in 0..<3 {
                forms.append(try form(index))
                _ = try await queue.add(forms[index], with: URLRequest(url: url))
            }
            try await within(seconds: 60, "the queue's run") { try await queue.run() }
            let methods: [String]
            if let draftServer {
                methods = try draftServer.log().map(\.method)
                #expect(Set(try draftServer.forms().map(\.sha256)) == Set(try forms.map { try expected($0).sha256 }))
            } else {
                let log = try await #require(plainServer).log()
                methods = log.map(\.method)
                #expect(
                    log.filter { $0.method == "POST" }.map(\.bytes).sorted()
                        == forms.map { Int($0.contentLength!) }.sorted())
            }
            let asked = methods.filter { $0 == "OPTIONS" }.count
            // A server with the draft answers the newest version's question; one without it, each of five.
            #expect(speaksDraft ? asked == 1 : (1...5).contains(asked), "\(methods)")
            #expect(await queue.uploads.allSatisfy { if case .completed = $0.state { true } else { false } })
        }

        /// A server found to speak the draft is asked once for a queue, in this run and the next: the first upload's
        /// `OPTIONS` find its version, and every later upload creates its resource at once (a `POST` and its
        /// `PATCH`), however many runs and processes later.
        @Test func aServerFoundToSpeakTheDraftIsAskedOnce() async throws {
            let server = try await DraftServer()
            var forms: [MultipartFormData] = []
            let queue = try MultipartUploadQueue(
                directory: queueDirectory, maximumConcurrentUploads: 1, resumption: createdFirst)
            for index in 0..<4 {
                forms.append(try form(index))
                _ = try await queue.add(forms[index], with: URLRequest(url: server.url()))
            }
            try await within(seconds: 60, "the first run") { try await queue.run() }
            let first = try server.log()
            let probes = first.prefix { $0.method == "OPTIONS" }.count
            #expect(probes >= 1, "the first upload asks")
            #expect(first.filter { $0.method == "OPTIONS" }.count == probes, "\(first.map(\.method)): no other asks")
            #expect(
                first.dropFirst(probes).map(\.method) == Array(repeating: ["POST", "PATCH"], count: 4).flatMap { $0 })
            // The next run, in a queue opened anew as another process would: no upload asks.
            let reopened = try MultipartUploadQueue(
                directory: queueDirectory, maximumConcurrentUploads: 2, resumption: createdFirst)
            for index in 4..<6 {
                forms.append(try form(index))
                _ = try await reopened.add(forms[index], with: URLRequest(url: server.url()))
            }
            try await within(seconds: 60, "the second run") { try await reopened.run() }
            let second = try server.log().dropFirst(first.count)
            #expect(second.map(\.method).sorted() == ["PATCH", "PATCH", "POST", "POST"], "\(second.map(\.method))")
            #expect(Set(second.compactMap(\.version)).count == 1, "in the version the first run found")
            #expect(try server.forms().count == 6, "each once")
            #expect(Set(try server.forms().map(\.sha256)) == Set(try forms.map { try expected($0).sha256 }))
        }

        /// A form sent whole in one request has nothing to resume from (a drop sends it whole again), and its send
        /// makes no saved state: none is there as its request goes. A form created first saves its state before its
        /// creation goes, for a later run to resume from.
        @Test(arguments: [true, false]) func onlyAFormCreatedFirstSavesItsState(whole: Bool) async throws {
            let server = try await DraftServer()
            let states = queueDirectory.appendingPathComponent("state")
            let seen = LockedValue<[Int]>([])
            var resumption = whole ? MultipartResumption() : createdFirst
            resumption.events = { event in
                guard case .requestSent = event else { return }
                let made = (try? FileManager.default.contentsOfDirectory(atPath: states.path).count) ?? 0
                seen.withLock { $0.append(made) }
            }
            let queue = try MultipartUploadQueue(directory: queueDirectory, resumption: resumption)
            let form = try form(1)
            _ = try await queue.add(form, with: URLRequest(url: server.url()))
            try await within(seconds: 60, "the run") { try await queue.run() }
            #expect(try server.forms() == [try expected(form)])
            let methods = try server.log().map(\.method)
            #expect(methods == (whole ? ["POST"] : ["OPTIONS", "POST", "PATCH"]), "\(methods)")
            // Each request that carries the form, and the creation before its append.
            let requests = seen.withLock { $0 }.suffix(whole ? 1 : 2)
            #expect(requests == (whole ? [0] : [1, 1]), "saved states as each request went: \(seen.withLock { $0 })")
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: states.path)) ?? []).isEmpty)
        }

        /// A remove while no run goes holds the queue's lock across its work, so that no other process starts the
        /// upload meanwhile; a run this process starts then waits for it, where it took the held lock for another
        /// process's run and threw ``MultipartError/Reason/queueInUse(_:)``. Twenty rounds of a run and a remove that
        /// start together, in either order: the run returns, the one removed is gone (removed, or completed where the
        /// run sent it first), the other completed.
        @Test func aRunAndARemoveThatStartTogetherBothGo() async throws {
            let server = try await DraftServer()
            for round in 0..<20 {
                let queue = try MultipartUploadQueue(directory: directory.path("queue-\(round)"))
                let gone = try await queue.add(
                    try form(2 * round, fileBytes: 1_000), with: URLRequest(url: server.url()))
                let kept = try await queue.add(
                    try form(2 * round + 1, fileBytes: 1_000), with: URLRequest(url: server.url()))
                let run = Task { try await queue.run() }
                let removal = await queue.remove(gone)
                try await within(seconds: 60, "round \(round)'s run") { try await run.value }
                // Removed before it went, or completed where the run sent it first (the server has it then).
                switch removal {
                case .removed: break
                case .completed(let answer): #expect(answer.statusCode == 200, "round \(round)")
                default: Issue.record("round \(round): \(removal)")
                }
                #expect(await queue.upload(gone) == nil, "round \(round)")
                let state = await queue.upload(kept)?.state
                guard case .completed = state else {
                    Issue.record("round \(round): \(String(describing: state))")
                    continue
                }
            }
        }

        /// A form under the server's `min-size` goes whole, and the server still speaks the draft: the next form, over
        /// it, is an upload resource created at once (its `POST` and `PATCH`), in this run and the next. A queue that
        /// took the whole form for a server without the draft sent every later form whole, never to resume.
        @Test func aFormUnderTheServersMinSizeGoesWholeAndTheNextIsResumable() async throws {
            let server = try await DraftServer()
            let url = server.url(scenario: "min-size-30000")
            let queue = try MultipartUploadQueue(
                directory: queueDirectory, maximumConcurrentUploads: 1, resumption: createdFirst)
            let forms = [try form(0, fileBytes: 1_000), try form(1, fileBytes: 60_000)]
            for form in forms { _ = try await queue.add(form, with: URLRequest(url: url)) }
            try await within(seconds: 60, "the first run") { try await queue.run() }
            let first = try server.log()
            let probes = first.prefix { $0.method == "OPTIONS" }.count
            #expect(probes >= 1, "the first upload asks")
            let sent = first.dropFirst(probes)
            #expect(sent.map(\.method) == ["POST", "POST", "PATCH"], "\(first.map(\.method))")
            #expect(
                sent.first?.complete == nil && sent.first?.bytes == Int(forms[0].contentLength!), "the small form whole"
            )
            #expect(sent.dropFirst().first?.complete == "?0", "the larger form's creation")
            #expect(await queue.uploads.allSatisfy { if case .completed = $0.state { true } else { false } })
            // The next run, in a queue opened anew: the server is still known to speak the draft.
            let reopened = try MultipartUploadQueue(
                directory: queueDirectory, maximumConcurrentUploads: 1, resumption: createdFirst)
            let third = try form(2, fileBytes: 60_000)
            _ = try await reopened.add(third, with: URLRequest(url: url))
            try await within(seconds: 60, "the second run") { try await reopened.run() }
            #expect(try server.log().dropFirst(first.count).map(\.method) == ["POST", "PATCH"])
            #expect(Set(try server.forms().map(\.sha256)) == Set(try (forms + [third]).map { try expected($0).sha256 }))
        }

        /// What the queue kept of a server that no longer speaks the draft costs one bodiless creation, refused: the
        /// server is asked again, found to speak none, and gets every form whole; the queue forgets what it kept.
        @Test func aServerThatStoppedSpeakingTheDraftIsAskedAgainAndGetsTheWholeForms() async throws {
            let server = try await UploadServer()
            let origin = try #require(Origin(server.url("/headers")))
            let store = try QueueStore(queueDirectory)
            store.keep(
                ResumableUpload.KnownServer(version: .newest, limits: ResumableUpload.Limits()), for: origin.serialized)
            let queue = try MultipartUploadQueue(
                directory: queueDirectory, maximumConcurrentUploads: 1, resumption: createdFirst)
            var forms: [MultipartFormData] = []
            for index in 0..<3 {
                forms.append(try form(index))
                _ = try await queue.add(forms[index], with: URLRequest(url: server.url("/headers")))
            }
            try await within(seconds: 60, "the run") { try await queue.run() }
            let log = try await server.log()
            let posts = log.filter { $0.method == "POST" }.map(\.bytes)
            #expect(posts == [0] + forms.map { Int($0.contentLength!) }, "one bodiless creation, then every form whole")
            #expect(log.first?.method == "POST" && log.dropFirst().first?.method == "OPTIONS", "\(log.map(\.method))")
            #expect(await queue.uploads.allSatisfy { if case .completed = $0.state { true } else { false } })
            #expect(store.knownServers().isEmpty, "forgotten")
        }

        /// A remove of an upload being sent returns once its send has stopped and the queue has let it go: nothing of
        /// it is left here, and the server keeps no form and no upload resource. A remove of one that completed says
        /// the server has it, and deletes nothing there; one never started is simply gone; an ID not held says so.
        @Test func aRemoveSaysWhatTheServerKeeps() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory, maximumConcurrentUploads: 1)
            let done = try await queue.add(try form(0), with: URLRequest(url: server.url()))
            try await within(seconds: 60, "the first run") { try await queue.run() }
            #expect(try server.forms().count == 1)
            let sending = try await queue.add(
                try form(1, fileBytes: 8_000_000), with: URLRequest(url: server.url(scenario: "slow")))
            let waiting = try await queue.add(try form(2), with: URLRequest(url: server.url()))
            // The first form's bytes are counted already: the slow one's own show that its upload resource is made.
            let counted = queue.progress.completedUnitCount
            let running = Task { try await queue.run() }
            defer { running.cancel() }
            let started = Stopwatch()
            while await queue.upload(sending)?.state != .running || queue.progress.completedUnitCount == counted {
                guard started.seconds < 30 else { throw WaitGaveUp(description: "the slow upload never started") }
                try await Task.sleep(nanoseconds: 10_000_000)
            }
            // One at a time: the other waits behind the one being sent.
            #expect(await queue.remove(waiting) == .removed, "one that never started")
            #expect(await queue.remove(sending) == .removed)
            // Returned once its send ended and the queue let it go, not when the cancel was asked.
            #expect(await queue.upload(sending) == nil)
            #expect(!records().contains(sending.rawValue))
            try await within(seconds: 60, "the run") { try await running.value }
            let log = try server.log()
            #expect(try server.forms().count == 1, "the removed one's form is not on the server")
            #expect(log.filter { $0.method == "DELETE" }.count == 1, "its upload deleted: \(log.map(\.method))")
            #expect(log.filter { $0.method == "POST" }.count == 2, "nothing of the one never started was sent")
            guard case .completed(let answer) = await queue.remove(done) else {
                Issue.record("a completed upload's remove says the server has it")
                return
            }
            #expect(answer.statusCode == 200 || answer.statusCode == 201, "\(answer)")
            // DELETEs alone: the slow append's own entry is logged once the server stops reading it, which a loaded
            // machine may put after this point.
            #expect(
                try server.log().filter { $0.method == "DELETE" }.count == 1, "nothing deleted on the server for it")
            #expect(await queue.remove(done) == .notInQueue)
            #expect(records().isEmpty)
        }

        /// A remove from another process while this one runs the queue: of an upload being sent, it returns once the
        /// run has stopped and deleted it; of one the run completed, it says the server has the form.
        @Test func aRemoveFromAnotherProcessSaysWhatTheServerKeeps() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory, maximumConcurrentUploads: 2)
            let slow = try await queue.add(
                try form(1, fileBytes: 8_000_000), with: URLRequest(url: server.url(scenario: "slow")))
            let quick = try await queue.add(try form(2), with: URLRequest(url: server.url()))
            let running = Task { try await queue.run() }
            defer { running.cancel() }
            let started = Stopwatch()
            func quickCompleted() async -> Bool {
                if case .completed? = await queue.upload(quick)?.state { true } else { false }
            }
            while true {
                let slowRunning = await queue.upload(slow)?.state == .running
                if slowRunning, await quickCompleted() { break }
                guard started.seconds < 30 else { throw WaitGaveUp(description: "the uploads never got going") }
                try await Task.sleep(nanoseconds: 10_000_000)
            }
            let other = try MultipartUploadQueue(directory: queueDirectory)
            guard case .completed(let answer) = await other.remove(quick) else {
                Issue.record("the other process's remove of a completed upload says the server has it")
                return
            }
            #expect(answer.statusCode == 200 || answer.statusCode == 201, "\(answer)")
            #expect(await other.remove(slow) == .removed)
            #expect(!records().contains(slow.rawValue) && !records().contains(quick.rawValue))
            try await within(seconds: 60, "the run") { try await running.value }
            #expect(try server.forms().count == 1, "the quick one's, alone")
            // The server logs a request as it ends: the cancelled append's line may come after the DELETE.
            let log = try server.log().map { "\($0.method) \($0.path)" }
            #expect(log.filter { $0.hasPrefix("DELETE") }.count == 1, "the slow one's upload deleted: \(log)")
            #expect(await queue.uploads.isEmpty, "the run let both go")
        }

        /// Every change a run applies is an event on its `events`, whoever made it: another process's pause, move,
        /// remove, retry and resume, each as the run takes it up, and this process's own.
        @Test func everyChangeARunAppliesIsAnEventWhoeverMadeIt() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory, maximumConcurrentUploads: 1)
            let failing = try await queue.add(try form(0), with: URLRequest(url: server.url()))
            let slow = try await queue.add(
                try form(1, fileBytes: 8_000_000), with: URLRequest(url: server.url(scenario: "slow")))
            var pending: [MultipartUploadQueue.ID] = []
            for index in 2..<5 {
                pending.append(try await queue.add(try form(index), with: URLRequest(url: server.url())))
            }
            try FileManager.default.removeItem(at: directory.path("photo-0.jpg"))
            let heard = LockedValue<[MultipartUploadQueue.Event]>([])
            let events = queue.events
            let listening = Task { for await event in events { heard.withLock { $0.append(event) } } }
            defer { listening.cancel() }
            let running = Task { try await queue.run() }
            defer { running.cancel() }
            func hears(_ event: MultipartUploadQueue.Event) async throws {
                try await waitFor("\(event)", upTo: 30) { heard.withLock { $0.contains(event) } }
            }
            try await waitFor("the slow one to run, the first to fail", upTo: 30) {
                heard.withLock {
                    $0.contains(.started(slow))
                        && $0.contains { if case .failed(failing, _) = $0 { true } else { false } }
                }
            }

            let other = try MultipartUploadQueue(directory: queueDirectory)
            try await other.pause(pending[0])
            try await hears(.paused(pending[0]))
            try await other.prioritize(pending[2])
            try await hears(.prioritized(pending[2]))
            #expect(await other.remove(pending[1]) == .removed)
            try await hears(.removed(pending[1]))
            _ = try directory.file("photo-0.jpg", contents: Data(count: 1_000))
            try await other.retry(failing)
            try await hears(.retried(failing))
            try await other.resume(pending[0])
            try await hears(.resumed(pending[0]))
            // This process's own.
            try await queue.pause(pending[2])
            try await queue.resume(pending[2])
            #expect(await other.remove(slow) == .removed)
            try await within(seconds: 60, "the run") { try await running.value }
            let all = heard.withLock { $0 }
            for event in [MultipartUploadQueue.Event.paused(pending[2]), .resumed(pending[2]), .removed(slow)] {
                #expect(all.contains(event), "\(event) in \(all)")
            }
            #expect(all.filter { if case .removed = $0 { true } else { false } }.count == 2, "\(all)")
        }

        /// A file deleted while queued, and one rewritten at the same length, fail their uploads alone, naming the
        /// part, before anything is asked of the server; the others complete.
        @Test func aDeletedFileFailsItsUploadAlone() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory, maximumConcurrentUploads: 2)
            var ids: [MultipartUploadQueue.ID] = []
            for index in 0..<4 { ids.append(try await queue.add(try form(index), with: URLRequest(url: server.url()))) }
            try FileManager.default.removeItem(at: directory.path("photo-1.jpg"))
            try Data(count: 50_000).write(to: directory.path("photo-2.jpg"))
            try await within(seconds: 60, "the queue's run") { try await queue.run() }
            let states = await queue.uploads.map(\.state)
            guard case .failed(let reason) = states[1], case .failed(let changed) = states[2] else {
                Issue.record("\(states)")
                return
            }
            #expect(reason.reason.contains("photo") && reason.reason.contains("removed"), "\(reason)")
            #expect(changed.reason.contains("photo") && changed.reason.contains("changed"), "\(changed)")
            #expect(states[0] != states[1] && states[3] != states[1])
            #expect(try server.forms().count == 2)
            #expect(try server.log().filter { $0.method == "POST" }.count == 2, "no upload made for the files gone")
            // The failure keeps the queue's progress short of done, until the caller removes the upload.
            let length = await Int64(queue.uploads[1].contentLength + queue.uploads[2].contentLength)
            #expect(queue.progress.completedUnitCount == queue.progress.totalUnitCount - length)
            #expect(!queue.progress.isFinished)
            let reopened = try MultipartUploadQueue(directory: queueDirectory)
            #expect(reopened.progress.completedUnitCount == reopened.progress.totalUnitCount - length, "after a reopen")
            await queue.remove(ids[1])
            await queue.remove(ids[2])
            #expect(queue.progress.completedUnitCount == queue.progress.totalUnitCount)
        }

        /// The server's final answer came, and the process died before the queue's record said so (here: the upload
        /// the queue makes, run by hand, keeping its state as the queue does): the next run asks the server, which
        /// holds the whole form, and records the upload completed, the answer unknown. No second copy goes.
        @Test func aRelaunchAfterTheFinalAnswerSendsNoSecondCopy() async throws {
            let server = try await DraftServer()
            let form = try form(7)
            let request = URLRequest(url: server.url())
            let queue = try MultipartUploadQueue(directory: queueDirectory, resumption: createdFirst)
            let id = try await queue.add(form, with: request)
            var policy = createdFirst
            policy.stateDirectory = queueDirectory.appendingPathComponent("state/\(id)")
            _ = try await URLSession.shared.upload(
                form, with: request, strategy: .resumable(policy), headers: nil, credentialsToOtherOrigins: false,
                acceptableStatusCodes: nil, responseBody: .inMemory, progress: nil,
                membership: .init(keepsStateAfterAnswer: true))
            #expect(try server.forms().count == 1)

            let relaunched = try MultipartUploadQueue(directory: queueDirectory, resumption: createdFirst)
            try await within(seconds: 30, "the run") { try await relaunched.run() }
            let unknown = MultipartUploadQueue.Answer(statusCode: nil, headers: [:], body: Data())
            #expect(await relaunched.uploads.map(\.state) == [.completed(unknown)], "the answer unknown")
            #expect(try server.forms().count == 1, "no second copy")
            #expect(try server.log().filter { $0.method == "PATCH" }.count == 1)
        }

        /// Two runs of one directory, in two queues: the second is refused while the first runs.
        /// The connection drops after the last byte went out, the server having processed the form: the upload asks
        /// the server, which says it holds the whole form, and the queue records it completed, its answer unknown,
        /// not failed; no second copy goes.
        @Test func anAnswerLostAfterTheLastByteIsCompletedNotFailed() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory, resumption: createdFirst)
            let original = try form(8)
            _ = try await queue.add(original, with: URLRequest(url: server.url(scenario: "complete-then-drop")))
            try await within(seconds: 60, "the run") { try await queue.run() }
            let unknown = MultipartUploadQueue.Answer(statusCode: nil, headers: [:], body: Data())
            #expect(await queue.uploads.map(\.state) == [.completed(unknown)], "completed, the answer unknown")
            #expect(try server.forms() == [try expected(original)], "once")
        }

        @Test func oneDirectoryIsRunByOneQueueAtATime() async throws {
            let server = try await DraftServer()
            let first = try MultipartUploadQueue(directory: queueDirectory)
            _ = try await first.add(
                try form(1, fileBytes: 2_000_000), with: URLRequest(url: server.url(scenario: "slow")))
            let running = Task { try await first.run() }
            defer { running.cancel() }
            // The slow server takes 64 KiB every 50 ms: the 2 MB form takes 1.6 s.
            let started = Stopwatch()
            while await first.uploads.first?.state != .running {
                guard started.seconds < 30 else { throw WaitGaveUp(description: "the first run never started") }
                try await Task.sleep(nanoseconds: 10_000_000)
            }
            let second = try MultipartUploadQueue(directory: queueDirectory)
            let error = try await #require(throws: MultipartError.self) { try await second.run() }
            guard case .queueInUse(let busy) = error.reason else {
                Issue.record("\(error)")
                return
            }
            #expect(busy == queueDirectory)
        }

        /// A row that is not a record is one upload listed as failed; the others go on.
        @Test func aDamagedRecordIsOneFailedUpload() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            _ = try await queue.add(try form(1), with: URLRequest(url: server.url()))
            _ = try await queue.add(try form(2), with: URLRequest(url: server.url()))
            forEachRow("UPDATE uploads SET standing = 'half' WHERE id = ?", [.text(records()[0])])
            let reopened = try MultipartUploadQueue(directory: queueDirectory)
            try await within(seconds: 60, "the run") { try await reopened.run() }
            let states = await reopened.uploads.map(\.state)
            // The damaged one has no place of its own in the order: it is listed last.
            guard states.count == 2, case .completed = states[0], case .failed(let reason) = states[1] else {
                Issue.record("\(states)")
                return
            }
            #expect(reason.reason.contains("damaged"))
            #expect(try server.forms().count == 1)
        }

        /// A queue opens on its records' columns and reads a form only to start it: a record whose JSON is damaged is
        /// pending when the queue opens, and fails as it starts; the others go on.
        @Test func aQueueOpensWithoutReadingAFormAndFailsAnUnreadableOneAtItsStart() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            let ids = [
                try await queue.add(try form(1), with: URLRequest(url: server.url())),
                try await queue.add(try form(2), with: URLRequest(url: server.url())),
            ]
            forEachRow(
                "UPDATE records SET record = ? WHERE id = ?",
                [.blob(Data("{\"format\":1,".utf8)), .text(ids[0].rawValue)])
            let reopened = try MultipartUploadQueue(directory: queueDirectory)
            #expect(await reopened.upload(ids[0])?.state == .pending, "its summary is all the queue read")
            try await within(seconds: 60, "the run") { try await reopened.run() }
            guard case .failed(let reason)? = await reopened.upload(ids[0])?.state,
                case .completed? = await reopened.upload(ids[1])?.state
            else {
                Issue.record("\(await reopened.uploads.map(\.state))")
                return
            }
            #expect(reason.reason.contains("not a whole queue record"), "\(reason)")
            #expect(try server.forms().count == 1)
        }

        /// The queue's one Progress: its count only rises, through every upload's progress and end, to its total.
        @Test func theProgressNeverGoesBackAndEndsAtTheTotal() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            for index in 0..<5 {
                _ = try await queue.add(try form(index, fileBytes: 400_000), with: URLRequest(url: server.url()))
            }
            let total = queue.progress.totalUnitCount
            let events = queue.events
            let watcher = Task { () -> [Int64] in
                var counts: [Int64] = []
                var ended = 0
                for await event in events {
                    counts.append(queue.progress.completedUnitCount)
                    if case .completed = event { ended += 1 }
                    if ended == 5 { break }
                }
                return counts
            }
            try await within(seconds: 60, "the run") { try await queue.run() }
            let counts = try await within(seconds: 10, "the events") { await watcher.value }
            #expect(counts.count > 5 && zip(counts, counts.dropFirst()).allSatisfy { $0 <= $1 }, "\(counts)")
            #expect(queue.progress.completedUnitCount == total && total > 2_000_000)
        }

        /// A run cancelled with uploads in flight keeps them, with their saved state, for the next run, which resumes
        /// each where the server stands: every form once, none started over.
        @Test func aCancelledRunKeepsItsUploadsForTheNext() async throws {
            let server = try await DraftServer()
            // The state files written: an upload whose creation the server logged but whose answer the cancel beat
            // has no upload URL saved, and the next run rightly creates it again (the documented creation a stop
            // can add), so the cancel waits for each to be saved too.
            let saved = LockedValue<Set<URL>>([])
            let queue = try MultipartUploadQueue(
                directory: queueDirectory,
                resumption: MultipartResumption(events: { event in
                    if case .saved(let file) = event { saved.withLock { _ = $0.insert(file) } }
                }))
            var forms: [MultipartFormData] = []
            for index in 0..<3 {
                // Larger than loopback's socket buffers: the slow server has not read it all when the cancel comes.
                forms.append(try form(index, fileBytes: 8_000_000))
                _ = try await queue.add(forms[index], with: URLRequest(url: server.url(scenario: "slow")))
            }
            let running = Task { try await queue.run() }
            // The slow server takes 64 KiB every 50 ms: wait until it holds some of each form.
            try await waitFor(
                "the uploads to be under way", upTo: 120, every: 0.05,
                seen: { "\((try? server.log().map(\.method)) ?? [])" },
                until: {
                    try server.log().filter { $0.method == "POST" }.count == 3 && saved.withLock { $0.count } == 3
                })
            running.cancel()
            await #expect(throws: CancellationError.self) {
                try await within(seconds: 30, "the cancel") { try await running.value }
            }
            // Each is pending, or completed where its answer came as the cancel did (the slow server reads what the
            // socket holds after the client has gone).
            let kept = await queue.uploads.map(\.state)
            #expect(kept.allSatisfy { if case .completed = $0 { true } else { $0 == .pending } }, "\(kept)")
            #expect(kept.contains(.pending), "the cancel came after every upload had completed: \(kept)")
            try await within(seconds: 120, "the next run") { try await queue.run() }
            #expect(Set(try server.forms().map(\.sha256)) == Set(try forms.map { try expected($0).sha256 }))
            #expect(try server.forms().count == 3)
            let log = try server.log().map { "\($0.method) \($0.path) \($0.bytes)" }
            #expect(log.filter { $0.hasPrefix("POST") }.count == 3, "resumed, none created again: \(log)")
        }

        /// A failed upload goes again once retried; a pending one removed goes nowhere, its record gone.
        @Test func aFailedUploadIsRetriedAndARemovedOneIsGone() async throws {
            let server = try await UploadServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            let refused = try await queue.add(try form(0), with: URLRequest(url: server.url("/early/403")))
            let events = queue.events
            let watcher = Task { () -> Int in
                var (starts, failures) = (0, 0)
                for await event in events {
                    if case .started(refused) = event { starts += 1 }
                    if case .failed(refused, _) = event { failures += 1 }
                    if failures == 2 { break }
                }
                return starts
            }
            try await within(seconds: 60, "the run") { try await queue.run() }
            guard case .failed(let reason) = await queue.uploads[0].state else {
                Issue.record("\(await queue.uploads)")
                return
            }
            #expect(reason.reason.contains("403"), "\(reason)")
            #expect(!queue.progress.isFinished, "a failure is not done")
            try await queue.retry(refused)
            #expect(await queue.uploads[0].state == .pending)
            try await within(seconds: 60, "the run") { try await queue.run() }
            #expect(try await within(seconds: 10, "the events") { await watcher.value } == 2, "it went again")

            let removed = try await queue.add(try form(1), with: URLRequest(url: server.url("/headers")))
            await queue.remove(removed)
            #expect(await !queue.uploads.contains { $0.id == removed })
            #expect(records().count == 1)
            let before = try await server.log().count
            try await within(seconds: 60, "the run") { try await queue.run() }
            #expect(try await server.log().count == before, "a removed upload goes nowhere")
        }

        /// A key already in the queue adds nothing and returns its upload's ID, in this process and the next, in any
        /// state, and so does one whose upload was removed, unless asked `again`; an upload lists its key and its
        /// files.
        @Test func aKeyAddsOnceAndARemovedOneOnlyWhenAskedAgain() async throws {
            let url = URL(string: "http://127.0.0.1:9/upload")!
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            let first = try await queue.add(try form(0), with: URLRequest(url: url), key: "photo-0")
            #expect(try await queue.add(try form(0), with: URLRequest(url: url), key: "photo-0") == first)
            let other = try await queue.add(try form(1), with: URLRequest(url: url), key: "photo-1")
            let unkeyed = try await queue.add(try form(0), with: URLRequest(url: url))
            #expect(Set([first, other, unkeyed]).count == 3)
            #expect(records().count == 3)
            let upload = try #require(await queue.uploads.first)
            #expect(upload.key == "photo-0")
            #expect(upload.files == [directory.path("photo-0.jpg")].map(\.standardizedFileURL))
            #expect(await queue.uploads.last?.key == nil)

            let reopened = try MultipartUploadQueue(directory: queueDirectory)
            #expect(try await reopened.add(try form(1), with: URLRequest(url: url), key: "photo-1") == other)
            #expect(records().count == 3, "the key is on disk")
            await reopened.remove(other)
            #expect(try await reopened.add(try form(1), with: URLRequest(url: url), key: "photo-1") == other)
            #expect(records().count == 2, "a removed upload's key adds nothing")
            let again = try await reopened.add(try form(1), with: URLRequest(url: url), key: "photo-1", again: true)
            #expect(again != other, "unless asked again")
            #expect(await reopened.uploads.map(\.key) == ["photo-0", nil, "photo-1"])
        }

        /// `add(contentsOf:)`: a thousand uploads in one call, each on disk, in order, a key repeated in the call or
        /// already queued added once; one that cannot be queued fails the call, and none of it is added.
        @Test func aThousandAreAddedInOneCallOnceAKey() async throws {
            let url = URL(string: "http://127.0.0.1:9/upload")!
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            let first = try await queue.add(try form(0), with: URLRequest(url: url), key: "photo-0")
            var batch: [MultipartUploadQueue.NewUpload] = []
            for index in 0..<1_000 {
                var form = MultipartFormData()
                form.append("photo \(index)", name: "title")
                batch.append(.init(form: form, request: URLRequest(url: url), key: "photo-\(index % 500)"))
            }
            let ids = try await queue.add(contentsOf: batch)
            #expect(ids.count == 1_000)
            #expect(ids[0] == first, "a key already queued")
            #expect(ids[500] == ids[0] && ids[999] == ids[499], "a key repeated in the call")
            #expect(Set(ids).count == 500)
            #expect(records().count == 500, "the call's 499 beside the one before")
            let reopened = try MultipartUploadQueue(directory: queueDirectory)
            let uploads = await reopened.uploads
            #expect(uploads.map(\.id) == Array(ids.prefix(500)), "in the order given")
            #expect(uploads.map(\.key) == (0..<500).map { "photo-\($0)" })

            var refused = batch.prefix(3).map { upload in
                var upload = upload
                upload.key = nil
                return upload
            }
            var streamed = MultipartFormData()
            streamed.append(InputStream(data: Data(count: 10)), length: 10, name: "pipe")
            refused.insert(.init(form: streamed, request: URLRequest(url: url)), at: 1)
            await #expect(throws: MultipartError.self) { _ = try await reopened.add(contentsOf: refused) }
            #expect(records().count == 500, "none of a refused call is added")
            #expect(await reopened.uploads.count == 500)
        }

        /// Two readers of `events` (a view and a logger) each see every event of the run, in order; a stream read
        /// after the run sees none of it.
        @Test func everyReaderOfEventsSeesEveryCompletion() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            var ids: [MultipartUploadQueue.ID] = []
            for index in 0..<4 { ids.append(try await queue.add(try form(index), with: URLRequest(url: server.url()))) }
            let readers = [queue.events, queue.events].map { events in
                Task { () -> [MultipartUploadQueue.ID] in
                    var completed: [MultipartUploadQueue.ID] = []
                    for await event in events {
                        if case .completed(let id, _) = event { completed.append(id) }
                        if completed.count == 4 { break }
                    }
                    return completed
                }
            }
            try await within(seconds: 60, "the queue's run") { try await queue.run() }
            for reader in readers {
                let seen = try await within(seconds: 10, "a reader's events") { await reader.value }
                #expect(Set(seen) == Set(ids), "\(seen)")
            }
        }

        /// Pause one, prioritize another, run one at a time: the prioritized one starts first, the paused one stays
        /// paused (`run` returns with it so, and a new process finds it so, in the same order), and it completes
        /// after `resume`.
        @Test func aPausedUploadWaitsAndAPrioritizedOneGoesFirst() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory, maximumConcurrentUploads: 1)
            var ids: [MultipartUploadQueue.ID] = []
            for index in 0..<4 { ids.append(try await queue.add(try form(index), with: URLRequest(url: server.url()))) }
            try await queue.pause(ids[1])
            try await queue.prioritize(ids[3])
            let order = [ids[3], ids[0], ids[1], ids[2]]
            #expect(await queue.uploads.map(\.id) == order)
            let events = queue.events
            let started = Task { () -> [MultipartUploadQueue.ID] in
                var (started, completed) = ([MultipartUploadQueue.ID](), 0)
                for await event in events {
                    if case .started(let id) = event { started.append(id) }
                    if case .completed = event { completed += 1 }
                    if completed == 3 { break }
                }
                return started
            }
            try await within(seconds: 60, "the queue's run") { try await queue.run() }
            #expect(try await within(seconds: 10, "the events") { await started.value } == [ids[3], ids[0], ids[2]])
            #expect(await queue.uploads[2].state == .paused)
            #expect(try server.forms().count == 3)

            let reopened = try MultipartUploadQueue(directory: queueDirectory)
            #expect(await reopened.uploads.map(\.id) == order, "the order is on disk")
            #expect(await reopened.uploads[2].state == .paused, "and the pause")
            try await reopened.resume(ids[1])
            try await within(seconds: 60, "the next run") { try await reopened.run() }
            guard case .completed = await reopened.uploads[2].state else {
                Issue.record("\(await reopened.uploads)")
                return
            }
            #expect(try server.forms().count == 4)
        }

        /// An upload paused while it runs stops, its saved state kept; `run` returns with it paused, and after
        /// `resume` it goes on from where the server stands: the form once, and no more sent twice than the stalled
        /// append had in flight.
        @Test func anUploadPausedWhileItRunsGoesOnFromTheServersOffset() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            let form = try form(0, fileBytes: 6_000_000)
            let id = try await queue.add(form, with: URLRequest(url: server.url(scenario: "stall")))
            let running = Task { try await queue.run() }
            try await waitFor(
                "the upload's first append", upTo: 60, seen: { "\((try? server.log().map(\.method)) ?? [])" },
                until: { try server.log().contains { $0.method == "PATCH" } })
            try await queue.pause(id)
            try await within(seconds: 30, "the run, once the upload paused") { try await running.value }
            #expect(await queue.uploads[0].state == .paused)
            let state = queueDirectory.appendingPathComponent("state").appendingPathComponent(id.rawValue)
            #expect(!((try? FileManager.default.contentsOfDirectory(atPath: state.path)) ?? []).isEmpty, "kept")
            try await queue.resume(id)
            try await within(seconds: 60, "the run after the resume") { try await queue.run() }
            guard case .completed = await queue.uploads[0].state else {
                Issue.record("\(await queue.uploads)")
                return
            }
            #expect(try server.forms() == [try expected(form)])
            let log = try server.log()
            #expect(log.filter { $0.method == "POST" }.count == 1, "resumed, not created again: \(log)")
            let patched = log.filter { $0.method == "PATCH" }.reduce(0) { $0 + $1.bytes }
            #expect(patched - Int(form.contentLength!) <= 1 << 20, "\(log)")
        }

        /// A resume that comes before the pause has stopped the upload takes the pause back on disk too: after a
        /// cancelled run, a new process finds the upload pending, not paused.
        @Test func aResumeBeforeThePauseStoppedTheUploadLeavesNoPauseOnDisk() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            let id = try await queue.add(
                try form(0, fileBytes: 6_000_000), with: URLRequest(url: server.url(scenario: "stall")))
            let running = Task { try await queue.run() }
            try await waitFor(
                "the upload's first append", upTo: 60, seen: { "\((try? server.log().map(\.method)) ?? [])" },
                until: { try server.log().contains { $0.method == "PATCH" } })
            try await queue.pause(id)
            try await queue.resume(id)
            running.cancel()
            _ = try await within(seconds: 30, "the cancelled run") { await running.result }
            #expect(try await MultipartUploadQueue(directory: queueDirectory).uploads.map(\.state) == [.pending])
        }

        /// `removeCompleted()` removes every completed upload, record and saved state, and leaves the others.
        @Test func removeCompletedLeavesNoRecordAndNoStateOfACompletedUpload() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            // In one call: its batch goes once each of its uploads has written its record again.
            _ = try await queue.add(
                contentsOf: (0..<3).map { .init(form: try form($0), request: URLRequest(url: server.url())) })
            try FileManager.default.removeItem(at: directory.path("photo-2.jpg"))
            try await within(seconds: 60, "the queue's run") { try await queue.run() }
            let states = await queue.uploads.map(\.state)
            #expect(states.filter { if case .completed = $0 { true } else { false } }.count == 2, "\(states)")
            await queue.removeCompleted()
            let left = await queue.uploads
            #expect(left.count == 1)
            #expect(records().count == 1, "\(records())")
            guard case .failed = left.first?.state else {
                Issue.record("\(left)")
                return
            }
            let state = queueDirectory.appendingPathComponent("state")
            let kept = (try? FileManager.default.contentsOfDirectory(atPath: state.path)) ?? []
            #expect(kept.allSatisfy { $0 == left[0].id.rawValue }, "\(kept)")
            #expect(try await MultipartUploadQueue(directory: queueDirectory).uploads.count == 1, "after a reopen")
        }

        /// A file changed after `add` fails its upload; put back with other bytes and another length, `retry` sends it
        /// as it is now, and the server holds that. A file still missing makes `retry` throw, naming the part.
        @Test func aRetrySendsAChangedFileAsItIsNow() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            let original = try form(0)
            let id = try await queue.add(original, with: URLRequest(url: server.url()))
            let photo = directory.path("photo-0.jpg")
            try FileManager.default.removeItem(at: photo)
            try await within(seconds: 60, "the queue's run") { try await queue.run() }
            guard case .failed = await queue.uploads[0].state else {
                Issue.record("\(await queue.uploads)")
                return
            }
            let missing = try await #require(throws: MultipartError.self) { try await queue.retry(id) }
            #expect(missing.part?.name == "photo", "\(missing)")
            guard case .failed = await queue.uploads[0].state else {
                Issue.record("a retry that threw changed the state: \(await queue.uploads)")
                return
            }
            try Data(repeating: 42, count: 70_000).write(to: photo)
            try await queue.retry(id)
            #expect(await queue.uploads[0].state == .pending)
            // The form as it is now: the same parts, the photo's new bytes.
            let now = try formAsItIsNow(0, boundary: original.boundary)
            #expect(await queue.uploads[0].contentLength == now.contentLength)
            try await within(seconds: 60, "the queue's run") { try await queue.run() }
            guard case .completed = await queue.uploads[0].state else {
                Issue.record("\(await queue.uploads)")
                return
            }
            #expect(try server.forms() == [try expected(now)])
            #expect(queue.progress.completedUnitCount == queue.progress.totalUnitCount)
        }

        /// A file replaced under an upload the server has begun: the upload fails, naming it; after `retry`, the next
        /// run deletes the server's upload of the old file and sends the file as it is now, once, under an
        /// `Idempotency-Key` of its own (the draft server honours keys).
        @Test func aRetryDeletesTheServersUploadOfTheOldFile() async throws {
            let server = try await DraftServer()
            let queue = try MultipartUploadQueue(directory: queueDirectory)
            // Far more than loopback's socket buffers hold: the server cannot have it all when the run is cancelled.
            let original = try form(0, fileBytes: 32 << 20)
            let id = try await queue.add(original, with: URLRequest(url: server.url(scenario: "slow")))
            // The slow server takes 64 KiB every 50 ms: the run is cancelled once the append is under way.
            let events = queue.events
            let running = Task { try await queue.run() }
            try await within(seconds: 60, "the append under way") {
                for await event in events {
                    if case .progress(_, let sent, _) = event, sent >= 1 << 20 { break }
                }
            }
            running.cancel()
            _ = await running.result
            // The upload resource the first run made: the server numbers them in the order made.
            let resource = "/u/1"
            let photo = directory.path("photo-0.jpg")
            try FileManager.default.removeItem(at: photo)
            try Data(repeating: 7, count: 100_000).write(to: photo)
            try await within(seconds: 60, "the queue's run") { try await queue.run() }
            guard case .failed(let reason)? = await queue.upload(id)?.state else {
                Issue.record("\(String(describing: await queue.upload(id)))")
                return
            }
            #expect(reason.reason.contains("photo"), "\(reason)")
            try await queue.retry(id)
            try await within(seconds: 60, "the queue's run") { try await queue.run() }
            guard case .completed? = await queue.upload(id)?.state else {
                Issue.record("\(String(describing: await queue.upload(id)))")
                return
            }
            let now = try formAsItIsNow(0, boundary: original.boundary)
            #expect(try server.forms() == [try expected(now)])
            let log = try server.log()
            #expect(
                log.contains { $0.method == "DELETE" && $0.path == resource },
                "the old upload \(resource) deleted: \(log.map { "\($0.method) \($0.path)" })")
            // The file as it is now is another form: created under a key of its own, or a server that honours keys
            // would answer with the old upload.
            let keys = log.filter { $0.method == "POST" }.map(\.idempotency)
            #expect(keys.count == 2 && keys[0] != keys[1] && keys.allSatisfy { $0 != nil }, "\(keys)")
        }

        /// An application that refuses the form early (interop 10: `Upload-Complete: ?1` to an append sent with `?0`,
        /// read whole, on a connection kept alive) fails the queued upload with its status: never completed, though
        /// the answer came to an append that was not the last, and the form is not on the server.
        @Test func anEarlyRefusalFailsTheQueuedUpload() async throws {
            let server = try await DraftServer(version: 10)
            let queue = try MultipartUploadQueue(directory: queueDirectory, resumption: createdFirst)
            let id = try await queue.add(
                try form(0, fileBytes: 300_000), with: URLRequest(url: server.url(scenario: "refused-whole")))
            try await within(seconds: 60, "the run") { try await queue.run() }
            let state = await queue.upload(id)?.state
            guard case .failed(let reason)? = state else {
                Issue.record("the refused upload ended \(String(describing: state))")
                return
            }
            #expect(reason.reason.contains("400"), "\(reason)")
            #expect(try server.forms().isEmpty)
        }

        /// A creation refused with 413 (or 401) and a JSON body, the form never sent: the queued upload fails with
        /// that answer, typed (its status, its kind, the body's start), and says so in its event and to another
        /// process that opens the queue; never completed. A `HEAD` that says complete in a field its version does not
        /// read, or at an offset short of the form's length, fails it too: the server completed nothing.
        @Test func aRefusalOrAHeadThatDoesNotSayCompleteFailsTheQueuedUpload() async throws {
            let server = try await DraftServer(version: 9)
            let queue = try MultipartUploadQueue(directory: queueDirectory, resumption: createdFirst)
            var ids: [String: MultipartUploadQueue.ID] = [:]
            for (index, scenario) in ["create-refused-413", "create-refused-401", "legacy-head", "complete-short"]
                .enumerated()
            {
                ids[scenario] = try await queue.add(
                    try form(index), with: URLRequest(url: server.url(scenario: scenario)))
            }
            let events = Task {
                var failures: [MultipartUploadQueue.ID: MultipartUploadQueue.Failure] = [:]
                for await event in queue.events {
                    if case .failed(let id, let failure) = event { failures[id] = failure }
                    if failures.count == 4 { break }
                }
                return failures
            }
            try await within(seconds: 60, "the run") { try await queue.run() }
            let heard = try await within(seconds: 10, "the events") { await events.value }
            let reopened = try MultipartUploadQueue(directory: queueDirectory, resumption: createdFirst)
            for (scenario, id) in ids {
                for state in [await queue.upload(id)?.state, await reopened.upload(id)?.state] {
                    guard case .failed(let failure)? = state else {
                        Issue.record("\(scenario) ended \(String(describing: state))")
                        continue
                    }
                    #expect(heard[id] == failure, "\(scenario): the event says what the listing says")
                    if let status = Int(scenario.split(separator: "-").last ?? "") {
                        #expect(failure.statusCode == status && failure.category == .status, "\(failure)")
                        #expect(failure.answer?.body == Data("{\"refused\": \(status)}".utf8), "\(scenario)")
                        #expect(failure.answer?.headers["Content-Type"] == "application/json", "\(scenario)")
                        #expect(failure.reason == "the server answered \(status)")
                    } else {
                        #expect(failure.answer == nil && failure.category == .resumable, "\(scenario): \(failure)")
                    }
                }
            }
            #expect(try server.forms().isEmpty)
        }

        /// A busy server's upload waits in the queue for the time its wait says, on the queue's clock, and not a moment
        /// less: here a virtual one, which stands still until the test moves it. Answered 503 with no retry of its own,
        /// the upload waits `maximumDelay` (ten minutes here) from the clock's time; the run sleeps until then and
        /// starts nothing while the clock stands still, nor a second early; at that time it goes again (answered 503
        /// again, it waits ten minutes from the new time). Twenty minutes of waits take seconds of real time.
        @Test func aBusyServersUploadWaitsOnTheQueuesClock() async throws {
            let server = try await UploadServer()
            let start = Date(timeIntervalSince1970: 2_000_000_000)
            let clock = VirtualClock(at: start)
            let once = MultipartResumption(maximumAttempts: 1, initialDelay: 0.01, maximumDelay: 600)
            let queue = try MultipartUploadQueue(directory: queueDirectory, resumption: once, clock: clock.queueClock)
            let id = try await queue.add(
                try form(0, fileBytes: 1_000), with: URLRequest(url: server.url("/status/503")))
            let seen = LockedValue((starts: 0, waits: [Date]()))
            let events = queue.events
            let watcher = Task {
                for await event in events {
                    switch event {
                    case .started(id): seen.withLock { $0.starts += 1 }
                    case .waiting(id, let until): seen.withLock { $0.waits.append(until) }
                    default: break
                    }
                }
            }
            defer { watcher.cancel() }
            let real = Stopwatch()
            let run = Task { try await queue.run() }
            defer { run.cancel() }
            for (round, now) in [start, start.addingTimeInterval(600)].enumerated() {
                let until = now.addingTimeInterval(600)
                // The upload waits, and the run sleeps until the wait's end on the clock.
                try await Stopwatch.wait(atMost: 30, polling: 0.01) {
                    !(seen.withLock { $0.waits.last == until } && clock.sleeps.contains(until))
                }
                #expect(seen.withLock { $0.waits.last } == until, "round \(round): ten minutes from the clock's time")
                #expect(clock.sleeps.contains(until), "round \(round): the run sleeps until \(until)")
                #expect(await queue.upload(id)?.state == .waiting(until: until))
                #expect(seen.withLock { $0.starts } == round + 1, "round \(round): started once a round")
                clock.advance(to: until.addingTimeInterval(-1))
                #expect(clock.sleeps.contains(until), "round \(round): a second early, the run sleeps on")
                #expect(seen.withLock { $0.starts } == round + 1, "round \(round): nothing started early")
                clock.advance(to: until)
            }
            try await Stopwatch.wait(atMost: 30, polling: 0.01) { seen.withLock { $0.starts } < 3 }
            #expect(seen.withLock { $0.starts } == 3, "gone again at each wait's end")
            #expect(real.seconds < 60, "twenty minutes of waits took \(real.seconds) s")
        }

        /// An outage longer than the uploads' own retries pauses the queue's uploads to that server: each waits
        /// (`waiting`, until when), no other starts, and one probes the server every `maximumDelay` (2 s here, 15 s
        /// by default); the first answer sends them all again, within that of the server's return, while the probe
        /// still goes on (its form is the largest). Every form arrives once, and the run sleeps through the waits.
        /// Measured alone: half a second over the 2 s probe is all a late timer, wake-up and connect may take.
        @Test(.longRun, .tags(.measuredAlone)) func anOutageLongerThanTheRetriesPausesTheQueueWithOneProbe()
            async throws
        {
            let server = try await DraftServer()
            // Every connection reset from the first byte on, for 7 s.
            let proxy = try await FaultProxy(to: server.port, cuts: ["outage:1:7"])
            // Each upload gives up after 3 tries in about 0.2 s; the queue then probes every 2 s.
            let quick = MultipartResumption(maximumAttempts: 2, initialDelay: 0.05, maximumDelay: 2)
            let queue = try MultipartUploadQueue(directory: queueDirectory, resumption: quick)
            var expected: [DraftServer.Form] = []
            var ids: [MultipartUploadQueue.ID] = []
            for index in 0..<6 {
                // 64 KiB every 50 ms: the first form takes 0.8 s, the others 50 ms.
                let form = try form(index, fileBytes: index == 0 ? 1 << 20 : 50_000)
                expected.append(try self.expected(form))
                ids.append(
                    try await queue.add(
                        form, with: URLRequest(url: proxy.url(server.url(scenario: "slow-relative")))))
            }
            // Until cancelled, after the run.
            let events = queue.events
            let watcher = Task { () -> (starts: [Date], waits: [Double], lastStart: Date?, probeDone: Date?) in
                var (starts, waits, lastStart, probeDone) = ([Date](), [Double](), Date?.none, Date?.none)
                for await event in events {
                    if case .started = event { (starts, lastStart) = (starts + [Date()], Date()) }
                    if case .waiting(_, let until) = event { waits.append(until.timeIntervalSinceNow) }
                    if case .completed(ids[0], _) = event { probeDone = Date() }
                }
                return (starts, waits, lastStart, probeDone)
            }
            try await within(seconds: 120, "the run") { try await queue.run() }
            let seen = try proxy.stop()
            watcher.cancel()
            let (starts, waits, lastStart, probeDone) = await watcher.value
            let outageEnd = try #require(seen.outageEnd, "the outage began")
            let during = starts.filter { $0.timeIntervalSince1970 < outageEnd }
            // Uploading each on its own, the six would start every 2 s: 24 starts and 72 tries.
            #expect(during.count >= 4 && during.count <= 7, "the first three, then one every 2 s: \(during.count)")
            #expect(seen.outageTries <= 21, "\(seen.outageTries) tries during the outage")
            #expect(!waits.isEmpty && waits.allSatisfy { $0 <= 2 }, "waits: \(waits)")
            let back = try #require(seen.firstAfterOutage, "a connection after the outage")
            #expect(back - outageEnd <= 2.5, "the next try \(back - outageEnd) s after the server's return")
            let (last, done) = (try #require(lastStart), try #require(probeDone))
            #expect(last < done, "the others went while the probe still sent its form")
            let sleeps = await queue.sleeps
            #expect(sleeps < 30, "the run slept \(sleeps) times through 7 s of waits: a loop")
            #expect(Set(try server.forms().map(\.sha256)) == Set(expected.map(\.sha256)))
            #expect(try server.forms().count == 6, "each once")
            for upload in await queue.uploads {
                guard case .completed(let answer) = upload.state else {
                    Issue.record("\(upload.id): \(upload.state)")
                    continue
                }
                #expect(answer.statusCode == 200)
            }
        }

        /// An outage pauses the uploads to its server together: the three in flight when every connection drops wait
        /// for one probe of the server, not one each, no other upload starts until it answers, and all go on at its
        /// answer. Every form arrives once, byte-exact. Measured alone: a wait said a second past its time fails.
        @Test(.longRun, .tags(.measuredAlone)) func anOutagePausesTheUploadsOfItsServerWithOneProbe() async throws {
            let server = try await DraftServer()
            // Every connection reset once one has carried 1 MiB, and every new one for 20 s: past the 4 s its uploads
            // wait at most between tries, which those waiting behind the probe would say, gone by, before.
            let proxy = try await FaultProxy(to: server.port, cuts: ["outage:1M:20"])
            // Waits of 0.25 to 0.5 s doubling to 2 to 4 s: one upload tries 7 to 12 times in 20 s, three 21 to 36.
            var policy = MultipartResumption(initialDelay: 0.5, maximumDelay: 4)
            // The caller's own listener hears the uploads' events, as it would hear one upload's.
            let retries = LockedValue(0)
            policy.events = { if case .retrying = $0 { retries.withLock { $0 += 1 } } }
            let queue = try MultipartUploadQueue(directory: queueDirectory, resumption: policy)
            var expected: [DraftServer.Form] = []
            for index in 0..<6 {
                let form = try form(index, fileBytes: 2 << 20)
                expected.append(try self.expected(form))
                _ = try await queue.add(form, with: URLRequest(url: proxy.url(server.url(scenario: "slow-relative"))))
            }
            // Until cancelled, after the run.
            let events = queue.events
            let watcher = Task { () -> (starts: [Date], waited: [MultipartUploadQueue.ID: Date]) in
                var (starts, waited) = ([Date](), [MultipartUploadQueue.ID: Date]())
                for await event in events {
                    if case .started = event { starts.append(Date()) }
                    if case .waiting(let id, _) = event, waited[id] == nil { waited[id] = Date() }
                }
                return (starts, waited)
            }
            // What every look at the queue shows while it runs: a wait is never said past its time by more than a
            // second, however long an upload waits behind the one probing the server.
            let sampler = Task { () -> [String] in
                var stale: [String] = []
                while !Task.isCancelled {
                    let now = Date()
                    for upload in await queue.uploads {
                        if case .waiting(let until) = upload.state, until < now.addingTimeInterval(-1) {
                            stale.append("\(upload.id) until \(until) seen at \(now)")
                        }
                    }
                    try? await Task.sleep(nanoseconds: 100_000_000)
                }
                return stale
            }
            try await within(seconds: 180, "the run") { try await queue.run() }
            let seen = try proxy.stop()
            watcher.cancel()
            sampler.cancel()
            let (starts, waited) = await watcher.value
            let stale = await sampler.value
            let outageEnd = try #require(seen.outageEnd, "the outage began")
            // Each upload in flight said it waits (the outage is the run's one failure), within 10 s of the outage's
            // start: no outage is invisible.
            #expect(waited.count >= 3, "\(waited.count) uploads said they wait")
            for (id, first) in waited {
                #expect(first.timeIntervalSince1970 - (outageEnd - 20) <= 10, "\(id) said it waits only at \(first)")
            }
            let staleLooks = stale.count
            #expect(staleLooks == 0, "waits said past their time: \(stale.prefix(5))")
            #expect(retries.withLock { $0 } >= 3, "the caller's listener heard the retries")
            #expect(seen.outageTries >= 1 && seen.outageTries <= 15, "\(seen.outageTries) tries during the outage")
            let during = starts.filter { (outageEnd - 20..<outageEnd).contains($0.timeIntervalSince1970) }
            #expect(during.isEmpty, "\(during.count) uploads started during the outage")
            let back = try #require(seen.firstAfterOutage, "a connection after the outage")
            #expect(back - outageEnd <= 4, "the probe \(back - outageEnd) s after the outage ended")
            #expect(
                try server.forms().sorted(by: { $0.sha256 < $1.sha256 })
                    == expected.sorted(by: { $0.sha256 < $1.sha256 }))
            for upload in await queue.uploads {
                guard case .completed = upload.state else {
                    Issue.record("\(upload.id): \(upload.state)")
                    continue
                }
            }
        }
    }
}
