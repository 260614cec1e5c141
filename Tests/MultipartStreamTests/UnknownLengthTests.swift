import Foundation
import MultipartStream
import MultipartStreamTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// A stream of unknown length (a pipe): the same bytes through every way out; spooled once where the upload
    /// needs a length, streamed with no copy to a server that speaks the resumable-upload draft, and never a wrong
    /// body whatever fails.
    @Suite(.serialized) struct UnknownLengthTests {
        let directory: TemporaryDirectory
        let streamed: [UInt8]
        let photo: URL
        /// The same form with the stream's length given: what the server must get, byte for byte.
        let sized: MultipartFormData
        let expected: DraftServer.Form

        init() throws {
            directory = try TemporaryDirectory()
            var generator = SeededGenerator(seed: 35)
            streamed = [UInt8].random(count: 350_000, using: &generator)
            photo = try directory.file("photo.jpg", contents: Data([UInt8].random(count: 20_000, using: &generator)))
            var sized = try MultipartFormData(boundary: "Unknown-Length")
            sized.append("Ada", name: "author")
            let bytes = Data(streamed)
            sized.append(length: UInt64(bytes.count), name: "backup", fileName: "b.tar") { InputStream(data: bytes) }
            try sized.append(fileURL: photo, name: "photo")
            self.sized = sized
            let encoded = try directory.file("sized.multipart", contents: try sized.encode())
            expected = DraftServer.Form(bytes: Int(sized.contentLength!), sha256: try sha256sum(encoded))
        }

        /// The form with the stream appended without its length, ending as `ending` says after its bytes.
        private func form(
            _ ending: ScriptedStream.Ending = .end, whenLengthIsNeeded: MultipartFormData.UnknownLength = .spool
        ) throws -> MultipartFormData {
            var form = try MultipartFormData(boundary: "Unknown-Length")
            form.append("Ada", name: "author")
            form.append(
                ScriptedStream(streamed, then: ending), name: "backup", fileName: "b.tar",
                whenLengthIsNeeded: whenLengthIsNeeded)
            try form.append(fileURL: photo, name: "photo")
            return form
        }

        private var sent: [FormPart] {
            [
                FormPart(name: "author", body: Data("Ada".utf8)),
                FormPart(name: "backup", fileName: "b.tar", contentType: "application/x-tar", body: Data(streamed)),
                FormPart(
                    name: "photo", fileName: "photo.jpg", contentType: "image/jpeg",
                    body: try! Data(contentsOf: photo)),
            ]
        }

        private func session() -> URLSession {
            URLSession(configuration: .ephemeral)
        }

        // MARK: The form

        @Test func aFormWithAStreamOfUnknownLengthHasNoLengthAndTheSameBytes() async throws {
            let whole = try sized.encode()
            let form = try form()
            #expect(form.contentLength == nil && form.parts[1].length == nil && form.parts[2].length == 20_000)
            #expect(form.makeBodyStream().contentLength == nil)
            #expect(try self.form().encode() == whole, "encode()")
            let written = directory.path("written.multipart")
            try self.form().writeEncodedData(to: written)
            #expect(try Data(contentsOf: written) == whole, "writeEncodedData(to:)")
            var chunks: [UInt8] = []
            for try await chunk in try self.form().bodyChunks(maximumSize: 100_000) {
                #expect(chunk.count <= 100_000 && !chunk.isEmpty)
                chunks += chunk
            }
            #expect(Data(chunks) == whole, "bodyChunks()")
            let drained = try self.form().makeBodyStream().drain()
            #expect(drained.error == nil && drained.bytes == whole, "a body stream, read to its end")
            // Nothing after its first byte is known: a start there names the part.
            let late = try self.form().makeBodyStream(startingAt: 200).drain()
            guard case .cannotResumeOneShotStream(200) = late.error?.reason, late.error?.part?.index == 1 else {
                Issue.record("\(String(describing: late.error))")
                return
            }
        }

        @Test func aStreamThatFailsFailsTheBodyNamingItsPart() throws {
            let drained = try form(.fail(ScriptedStream.Fault())).makeBodyStream().drain()
            guard case .streamFailed = drained.error?.reason, drained.error?.part?.name == "backup" else {
                Issue.record("\(String(describing: drained.error))")
                return
            }
            #expect(drained.bytes.count < Int(expected.bytes))
        }

        // MARK: Spooled where a length is needed

        @Test(arguments: [UploadServer.Kind.node, .werkzeug], [MultipartUploadStrategy.automatic, .stream, .file])
        func everyOtherStrategySpoolsItOnceAndSendsTheExactLength(
            server kind: UploadServer.Kind, strategy: MultipartUploadStrategy
        ) async throws {
            let server = try await UploadServer(kind)
            let before = try TemporaryBodies.names()
            let reports = ProgressReports()
            let (data, response) = try await session().upload(
                try form(), with: URLRequest(url: server.url()), strategy: strategy, progress: reports.append)
            let seen = try server.seen(in: data)
            #expect((response as? HTTPURLResponse)?.statusCode == 200, "\(seen.error ?? "")")
            #expect(seen.contentLength == String(expected.bytes) && seen.transferEncoding == nil)
            #expect(seen.parts == sent.map { $0.seen(by: kind == .node ? .node : .werkzeug) })
            #expect(
                reports.values.last
                    == MultipartUploadProgress(bytesSent: UInt64(expected.bytes), totalBytes: UInt64(expected.bytes)))
            #expect(try await TemporaryBodies.noneLeft(since: before), "the spool is removed")
        }

        @Test func aResumableUploadToAServerWithoutTheDraftSpoolsIt() async throws {
            let server = try await UploadServer(.werkzeug)
            let events = EventLog()
            let resumption = MultipartResumption(events: events.record)
            let (data, _) = try await session().upload(
                try form(), with: URLRequest(url: server.url()), strategy: .resumable(resumption))
            let seen = try server.seen(in: data)
            #expect(seen.contentLength == String(expected.bytes) && seen.parts == sent.map { $0.seen(by: .werkzeug) })
            #expect(events.all.contains(.spooled(contentLength: UInt64(expected.bytes))), "\(events.all)")
            #expect(
                events.all.contains(.notResumable)
                    && !events.all.contains { if case .streaming = $0 { true } else { false } })
            #expect(try TemporaryBodies.spools().isEmpty)
        }

        @Test func aStreamThatMayNotBeSpooledFailsBeforeAnyOfItIsRead() async throws {
            let server = try await UploadServer()
            let stream = ScriptedStream(streamed)
            var form = MultipartFormData()
            form.append("x", name: "first")
            form.append(stream, name: "backup", whenLengthIsNeeded: .fail)
            let error = try await #require(throws: MultipartError.self) {
                _ = try await session().upload(form, with: URLRequest(url: server.url()), strategy: .stream)
            }
            guard case .lengthUnknown = error.reason else {
                Issue.record("\(error)")
                return
            }
            #expect(error.part?.index == 1 && error.part?.name == "backup")
            #expect(error.description.hasPrefix("part 1 (\"backup\"): a stream of unknown length"))
            #expect(stream.streamStatus == .notOpen, "not read")
            #expect(try await server.log().isEmpty, "nothing sent")
        }

        @Test func aTaskCannotSendIt() async throws {
            let server = try await UploadServer()
            let error: (any Error)? = await withCheckedContinuation { continuation in
                let task = session().multipartUploadTask(with: URLRequest(url: server.url()), form: try! form()) {
                    continuation.resume(returning: $2)
                }
                task.resume()
            }
            guard case .lengthUnknown? = (error as? MultipartError)?.reason else {
                Issue.record("\(String(describing: error))")
                return
            }
        }

        @Test func aSpoolIsRemovedWhenTheStreamFails() async throws {
            let server = try await UploadServer()
            let failing = try await #require(throws: MultipartError.self) {
                _ = try await session().upload(
                    try form(.fail(ScriptedStream.Fault())), with: URLRequest(url: server.url()), strategy: .stream)
            }
            guard case .streamFailed = failing.reason, failing.part?.name == "backup" else {
                Issue.record("\(failing)")
                return
            }
            #expect(try TemporaryBodies.spools().isEmpty)
            #expect(try await server.log().isEmpty, "nothing sent")
        }

        @Test func aCancelDoesNotWaitForAStreamThatNeverYields() async throws {
            let server = try await UploadServer()
            let stuck = StuckStream(first: 1_000)
            defer { stuck.release() }
            var form = MultipartFormData()
            form.append(stuck, name: "pipe")
            let (stuckForm, request) = (form, URLRequest(url: server.url()))
            let upload = Task { try await URLSession(configuration: .ephemeral).upload(stuckForm, with: request) }
            try await waitFor("the copy to block in the stream") { stuck.isBlocked }
            #expect(try TemporaryBodies.spools().count == 1, "copying, blocked in the stream")
            let cancelled = Stopwatch()
            upload.cancel()
            await #expect(throws: CancellationError.self) { try await upload.value }
            // The stream never yields: a cancel that waits for it never returns, far past the bound.
            #expect(cancelled.seconds < CancelBound.seconds(promised: 2), "returned at once")
            #expect(try TemporaryBodies.spools().isEmpty, "the spool is removed at once")
        }

        // MARK: Streamed to a server that speaks the draft

        /// Appends of 100,000 bytes: the stream's 350,000 go out in four.
        private var appending: MultipartResumption {
            var resumption = MultipartResumption(maximumAttempts: 4, initialDelay: 0.05, maximumDelay: 0.2)
            resumption.bufferedAppendSize = 100_000
            return resumption
        }

        private func resumable(_ server: DraftServer, _ scenario: String, _ ending: ScriptedStream.Ending = .end)
            async throws -> (Data, URLResponse)
        {
            try await session().upload(
                try form(ending), with: URLRequest(url: server.url(scenario: scenario)), strategy: .resumable(appending)
            )
        }

        @Test func itIsStreamedInBoundedAppendsWithNoCopy() async throws {
            let server = try await DraftServer()
            let events = EventLog()
            var resumption = appending
            resumption.events = events.record
            let reports = ProgressReports()
            let (_, response) = try await session().upload(
                try form(), with: URLRequest(url: server.url()), strategy: .resumable(resumption),
                progress: reports.append)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try server.forms() == [expected])
            let log = try server.log()
            #expect(log.map(\.method) == ["OPTIONS", "POST", "PATCH", "PATCH", "PATCH", "PATCH"])
            let patches = log.filter { $0.method == "PATCH" }
            #expect(patches.map(\.bytes) == [100_000, 100_000, 100_000, expected.bytes - 300_000])
            #expect(patches.map(\.complete) == ["?0", "?0", "?0", "?1"])
            #expect(log[1].length == nil, "created without a length")
            #expect(events.all.contains(.streaming(appendSize: 100_000)))
            #expect(try TemporaryBodies.spools().isEmpty, "no spool")
            #expect(reports.values.first?.totalBytes == nil, "no length while the stream runs")
            #expect(
                reports.values.last
                    == MultipartUploadProgress(bytesSent: UInt64(expected.bytes), totalBytes: UInt64(expected.bytes)))
        }

        @Test func aDropInsideTheLastAppendResendsOnlyItsRest() async throws {
            let server = try await DraftServer()
            _ = try await resumable(server, "drop-last")
            #expect(try server.forms() == [expected])
            let patches = try server.log().filter { $0.method == "PATCH" }
            let last = expected.bytes - 300_000
            #expect(patches.map(\.bytes) == [100_000, 100_000, 100_000, last / 2, last - last / 2], "\(patches)")
            #expect(patches.last?.offset == String(300_000 + last / 2) && patches.last?.complete == "?1")
        }

        @Test func aDropOnceTheServerHasEveryByteCompletesWithAnEmptyAppend() async throws {
            let server = try await DraftServer()
            _ = try await resumable(server, "drop-at-end")
            #expect(try server.forms() == [expected])
            let log = try server.log()
            #expect(log.suffix(2).map(\.method) == ["HEAD", "PATCH"], "\(log)")
            #expect(log.last?.bytes == 0 && log.last?.offset == String(expected.bytes) && log.last?.complete == "?1")
        }

        @Test func aTooLargeAppendIsHalvedUntilItFits() async throws {
            let server = try await DraftServer()
            var resumption = appending
            resumption.bufferedAppendSize = 1 << 20
            _ = try await session().upload(
                try form(), with: URLRequest(url: server.url(scenario: "too-large")), strategy: .resumable(resumption))
            #expect(try server.forms() == [expected])
            let patches = try server.log().filter { $0.method == "PATCH" }
            // The whole form at once (the stream ended within the first append), then half, then half again.
            #expect(
                patches.map(\.bytes).prefix(3) == [expected.bytes, expected.bytes / 2, expected.bytes / 4], "\(patches)"
            )
            #expect(patches.dropFirst(2).allSatisfy { $0.bytes <= 120_000 })
        }

        @Test func anOffsetBelowWhatTheServerAcknowledgedIsABreachAndTheUploadIsDeleted() async throws {
            let server = try await DraftServer()
            let error = try await #require(throws: MultipartError.self) {
                _ = try await resumable(server, "offset-down")
            }
            guard case .offsetOutOfRange = error.reason else {
                Issue.record("\(error)")
                return
            }
            #expect(try server.log().last?.method == "DELETE")
            #expect(try server.forms().isEmpty)
        }

        @Test func bytesNoLongerHeldAreAClearErrorNeverAGap() async throws {
            // The upload is gone after its first append was acknowledged; a new one would need bytes released.
            let server = try await DraftServer()
            let error = try await #require(throws: MultipartError.self) {
                _ = try await resumable(server, "gone-second")
            }
            guard case .offsetNotBuffered(offset: 0, bufferStart: 100_000) = error.reason else {
                Issue.record("\(error)")
                return
            }
            let log = try server.log()
            #expect(log.map(\.method) == ["OPTIONS", "POST", "PATCH", "PATCH", "POST", "DELETE"], "\(log)")
            #expect(try server.forms().isEmpty)
        }

        @Test func aCancelWhileTheNextAppendWaitsForTheStreamDeletesTheUploadAtOnce() async throws {
            let server = try await DraftServer()
            let stuck = StuckStream(first: 150_000)
            defer { stuck.release() }
            var form = MultipartFormData()
            form.append(stuck, name: "pipe")
            let (stuckForm, request, resumption) = (form, URLRequest(url: server.url()), appending)
            let upload = Task {
                try await URLSession(configuration: .ephemeral).upload(
                    stuckForm, with: request, strategy: .resumable(resumption))
            }
            try await waitFor(
                "the stream to block in the append", seen: { "\((try? server.log()) ?? [])" },
                until: { try !server.log().filter({ $0.method == "PATCH" }).isEmpty && stuck.isBlocked })
            let cancelled = Stopwatch()
            upload.cancel()
            await #expect(throws: CancellationError.self) { try await upload.value }
            // The stream never yields: a cancel that waits for it never returns, far past the bound.
            #expect(cancelled.seconds < CancelBound.seconds(promised: 2), "returned at once")
            // The DELETE goes on a task of its own, so that the cancel returns at once: it may come after.
            try await waitFor(
                "the DELETE", seen: { "\((try? server.log()) ?? [])" },
                until: { try server.log().contains { $0.method == "DELETE" } })
            #expect(try server.log().map(\.method) == ["OPTIONS", "POST", "PATCH", "DELETE"])
            #expect(try server.forms().isEmpty)
        }

        @Test func aStreamThatFailsMidwayFailsTheUploadAndDeletesIt() async throws {
            let server = try await DraftServer()
            let error = try await #require(throws: MultipartError.self) {
                _ = try await resumable(server, "default", .fail(ScriptedStream.Fault()))
            }
            guard case .streamFailed = error.reason, error.part?.name == "backup" else {
                Issue.record("\(error)")
                return
            }
            let log = try server.log()
            #expect(log.filter { $0.method == "PATCH" }.map(\.bytes) == [100_000, 100_000, 100_000], "\(log)")
            #expect(log.last?.method == "DELETE")
            #expect(try server.forms().isEmpty)
        }
    }
}

/// A pipe whose writer stalls: `first` bytes, then a read that blocks until ``release()``, then the end.
private final class StuckStream: InputStream {
    // `blocked` is guarded by `lock`, read by the test; the rest is touched by the one thread that reads it.
    private let first: Int
    private var given = 0
    private let released = DispatchSemaphore(value: 0)
    private var status: Stream.Status = .notOpen
    private let lock = NSLock()
    private var blocked = false

    /// Whether a read is blocked (or was) after the first bytes: the moment the test waits for.
    var isBlocked: Bool { lock.withLock { blocked } }

    init(first: Int) {
        self.first = first
        super.init(data: Data())
    }

    /// Lets the blocked read return, so that no thread stays blocked after the test.
    func release() {
        released.signal()
    }

    override func open() { status = .open }
    override func close() { status = .closed }
    override var streamStatus: Stream.Status { status }
    override var streamError: (any Error)? { nil }
    override var hasBytesAvailable: Bool { status == .open }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        guard given < first else {
            lock.withLock { blocked = true }
            released.wait()
            released.signal()
            return 0
        }
        let count = min(len, first - given)
        buffer.update(repeating: 0x62, count: count)
        given += count
        return count
    }
}

/// The events of a resumable upload, in order.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [MultipartResumption.Event] = []

    var all: [MultipartResumption.Event] { lock.withLock { events } }

    @Sendable func record(_ event: MultipartResumption.Event) {
        lock.withLock { events.append(event) }
    }
}
