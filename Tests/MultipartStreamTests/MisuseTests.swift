import Foundation
import MultipartStream
import MultipartStreamTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// Misuse by careless callers and odd `InputStream` subclasses: files changed in place at the same size, streams
    /// that run long without saying so, that fail without an error or are handed out twice, lengths past any limit,
    /// and a cancel while a caller stream blocks. Each ends in an error that names the part, never a trap, a hang or a
    /// wrong body sent as success.
    @Suite struct MisuseTests {
        let directory: TemporaryDirectory

        init() throws {
            directory = try TemporaryDirectory()
        }

        // MARK: Files changed at the same size

        /// A form of `file`, made an hour old first: a change in the same tick of the file system's clock as the
        /// file's creation would carry the same times, which is the documented limit, not what these tests test.
        private func form(with file: URL) throws -> MultipartFormData {
            try FileManager.default.setAttributes(
                [.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: file.path)
            var form = MultipartFormData()
            try form.append(fileURL: file, name: "doc")
            return form
        }

        /// The file's change time, in nanoseconds.
        private func changeTime(of file: URL) -> Int {
            var info = stat()
            _ = stat(file.path, &info)
            return info.st_ctim.tv_sec * 1_000_000_000 + info.st_ctim.tv_nsec
        }

        private func expectChanged(_ form: MultipartFormData, _ file: URL) {
            do {
                _ = try form.encode()
                Issue.record("a changed file was encoded")
            } catch {
                guard case .fileChanged(let url) = error.reason else {
                    Issue.record("\(error)")
                    return
                }
                #expect(url == file)
                #expect(error.part?.name == "doc")
                #expect(
                    error.description.contains(
                        "was replaced, modified, or had its permissions or owner changed after it was appended"))
            }
        }

        @Test func aFileRenamedOverByOneOfTheSameSizeFails() throws {
            let file = try directory.file("doc.bin", contents: Data(repeating: 1, count: 4_096))
            let form = try form(with: file)
            let other = try directory.file("other.bin", contents: Data(repeating: 2, count: 4_096))
            #expect(rename(other.path, file.path) == 0)
            expectChanged(form, file)
        }

        @Test func aFileSwappedForASymlinkToOneOfTheSameSizeFails() throws {
            let file = try directory.file("doc.bin", contents: Data(repeating: 1, count: 4_096))
            let form = try form(with: file)
            let other = try directory.file("other.bin", contents: Data(repeating: 2, count: 4_096))
            try FileManager.default.removeItem(at: file)
            try FileManager.default.createSymbolicLink(at: file, withDestinationURL: other)
            expectChanged(form, file)
        }

        @Test func aFileOverwrittenInPlaceFails() throws {
            let file = try directory.file("doc.bin", contents: Data(repeating: 1, count: 4_096))
            let form = try form(with: file)
            let handle = try FileHandle(forWritingTo: file)
            handle.write(Data(repeating: 9, count: 10))
            try handle.close()
            expectChanged(form, file)
        }

        @Test func aFileWhoseModificationTimeWasPutBackFails() throws {
            let file = try directory.file("doc.bin", contents: Data(repeating: 1, count: 4_096))
            let form = try form(with: file)
            let appended = try FileManager.default.attributesOfItem(atPath: file.path)[.modificationDate]
            // The documented limit is a change within one tick of the file system's clock (jiffies, at most 10 ms
            // on Linux) of the append; this test is about the change time, so it writes (the same bytes each time)
            // until the change time has moved.
            let before = changeTime(of: file)
            try waitFor("the change time to move", upTo: 5, every: 0.001) {
                let handle = try FileHandle(forWritingTo: file)
                handle.write(Data(repeating: 9, count: 10))
                try handle.close()
                return changeTime(of: file) != before
            }
            // As `touch -r` does: the old modification time, but the inode's change time moves.
            try FileManager.default.setAttributes([.modificationDate: appended as Any], ofItemAtPath: file.path)
            expectChanged(form, file)
        }

        @Test func aFileTruncatedAndRegrownFails() throws {
            let file = try directory.file("doc.bin", contents: Data(repeating: 1, count: 4_096))
            let form = try form(with: file)
            #expect(truncate(file.path, 0) == 0)
            #expect(truncate(file.path, 4_096) == 0)
            expectChanged(form, file)
        }

        /// Streams a 1 MiB file part, does `change` to the file after its first KiB, and returns the stream's error
        /// once it reads to the end, which must be `.fileChanged`.
        private func errorOfAFileChanged(
            whileItIsRead change: (URL) throws -> Void
        ) throws -> MultipartError? {
            let file = try directory.file("doc.bin", contents: Data(repeating: 1, count: 1 << 20))
            let stream = try form(with: file).makeBodyStream()
            stream.open()
            var buffer = [UInt8](repeating: 0, count: 1_024)
            #expect(stream.read(&buffer, maxLength: buffer.count) == buffer.count)
            try change(file)
            var last = 0
            repeat { last = stream.read(&buffer, maxLength: buffer.count) } while last > 0
            #expect(last == -1)
            let error = stream.streamError as? MultipartError
            guard case .fileChanged = error?.reason else {
                Issue.record("\(String(describing: stream.streamError))")
                return nil
            }
            return error
        }

        @Test func aFileOverwrittenWhileItIsReadFailsAtItsLastByte() throws {
            _ = try errorOfAFileChanged { file in
                let handle = try FileHandle(forWritingTo: file)
                handle.seek(toFileOffset: 1 << 19)
                handle.write(Data(repeating: 9, count: 10))
                try handle.close()
            }
        }

        /// A change of permissions (or owner) mid-read moves the file's change time, which the identity check reads
        /// as a change: the same check is what catches a same-length rewrite whose writer put the old mtime back.
        /// So it fails the part, as Reliability.md and `.fileChanged` say.
        @Test func aFileWhosePermissionsChangeWhileItIsReadFails() throws {
            let error = try errorOfAFileChanged { file in
                // chmod until the change time moves: two within one tick of the file system's clock read the same.
                let before = changeTime(of: file)
                var mode: mode_t = 0o600
                try waitFor("the change time to move", upTo: 5, every: 0.001) {
                    #expect(chmod(file.path, mode) == 0)
                    mode = mode == 0o600 ? 0o644 : 0o600
                    return changeTime(of: file) != before
                }
            }
            #expect(error?.localizedDescription.contains("permissions") == true)
        }

        @Test func anUnchangedFileStillStreams() throws {
            let file = try directory.file("doc.bin", contents: Data(repeating: 1, count: 4_096))
            let form = try form(with: file)
            let parts = try Peer.node.parse(try form.encode(), contentType: form.contentType)
            #expect(parts.first?.body == Data(repeating: 1, count: 4_096))
        }

        // MARK: Odd InputStream subclasses

        @Test func aStreamThatRunsLongWithoutSayingSoFails() throws {
            // Overrides only open, close and read: its hasBytesAvailable and streamStatus are the base class's.
            var form = MultipartFormData()
            form.append(length: 100, name: "log") { BareStream(Array(repeating: 7, count: 110)) }
            let error = try #require(throws: MultipartError.self) { try form.encode() }
            guard case .streamLongerThanDeclared(length: 100) = error.reason else {
                Issue.record("\(error)")
                return
            }
            #expect(error.part?.name == "log")

            var exact = MultipartFormData()
            exact.append(length: 110, name: "log") { BareStream(Array(repeating: 7, count: 110)) }
            #expect(try Peer.node.parse(try exact.encode(), contentType: exact.contentType).first?.body.count == 110)
        }

        @Test func aStreamThatFailsWithoutAnErrorFailsThePart() throws {
            var form = MultipartFormData()
            form.append(length: 100, name: "log") { BareStream(Array(repeating: 7, count: 10), thenFail: true) }
            let error = try #require(throws: MultipartError.self) { try form.encode() }
            guard case .streamFailed(nil) = error.reason else {
                Issue.record("\(error)")
                return
            }
            #expect(error.description.contains("stream failed without saying why"))
        }

        @Test func aFactoryThatHandsOutTheSameStreamTwiceFailsTheSecondTime() throws {
            // As a careless caller writes it: one stream made outside the closure, returned on every call.
            nonisolated(unsafe) let shared = InputStream(data: Data(repeating: 5, count: 100))
            var form = MultipartFormData()
            form.append(length: 100, name: "log") { shared }
            #expect(try form.encode().count == Int(form.contentLength!))
            #expect(throws: MultipartError.self) { try form.encode() }
        }

        @Test func aStreamClosedBeforeItWasAppendedFails() throws {
            let stream = InputStream(data: Data(repeating: 5, count: 100))
            stream.open()
            stream.close()
            var form = MultipartFormData()
            form.append(stream, length: 100, name: "log")
            #expect(throws: MultipartError.self) { try form.encode() }
        }

        // MARK: Numbers past any limit

        @Test func aLengthPastWhatContentLengthCanSayIsRefused() throws {
            var form = MultipartFormData()
            form.append("a", name: "first")
            form.append(InputStream(data: Data()), length: UInt64.max - 10, name: "huge")
            guard case .bodyTooLong(partLength: UInt64.max - 10) = form.appendError?.reason else {
                Issue.record("\(String(describing: form.appendError))")
                return
            }
            #expect(form.appendError?.part?.name == "huge")
            #expect(form.count == 1, "the part was not added")
            #expect(throws: MultipartError.self) { try form.encode() }

            var factories = MultipartFormData()
            factories.append(length: UInt64(Int64.max) / 2, name: "a") { InputStream(data: Data()) }
            factories.append(length: UInt64(Int64.max) / 2, name: "b") { InputStream(data: Data()) }
            #expect(factories.appendError?.part?.name == "b")
        }

        @Test func aNegativeReadLengthFailsTheStream() {
            var form = MultipartFormData()
            form.append("v", name: "n")
            let stream = form.makeBodyStream()
            stream.open()
            var byte: UInt8 = 0
            #expect(stream.read(&byte, maxLength: -1) == -1)
            #expect(stream.streamStatus == .error)
            guard case .invalidReadLength(-1) = (stream.streamError as? MultipartError)?.reason else {
                Issue.record("\(String(describing: stream.streamError))")
                return
            }
        }

        // MARK: Cancel while a caller stream blocks

        @Test func closeReturnsAtOnceWhileAReadIsBlockedAndTheReadThenFails() async throws {
            let blocked = BlockingStream()
            let gate = blocked.gate
            var form = MultipartFormData()
            form.append(blocked, length: 100, name: "slow")
            // Used from two threads at once, as URLSession and a cancel do; its state is behind its lock. The threads
            // are threads of their own: blocking the concurrency pool's few could starve the other suites.
            nonisolated(unsafe) let stream = form.makeBodyStream()
            stream.open()
            let read = Outcome()
            Thread.detachNewThread {
                var buffer = [UInt8](repeating: 0, count: 256)
                read.set(stream.read(&buffer, maxLength: buffer.count))
            }
            #expect(await gate.entered.waitOffThePool())
            let closed = Outcome()
            Thread.detachNewThread {
                stream.close()
                closed.set(0)
            }
            #expect(await closed.done.waitOffThePool(seconds: 10), "close() waited for the blocked read")
            #expect(stream.streamStatus == .closed)
            gate.release.signal()
            #expect(await read.done.waitOffThePool())
            #expect(read.value == -1, "the read that was blocked hands out nothing")
        }

        @Test func openingAgainWhileAReadIsBlockedStartsOverAndTheReadHandsOutNothing() async throws {
            // Handed to the factory once, from the thread that reads the form.
            nonisolated(unsafe) let blocked = BlockingStream()
            let gate = blocked.gate
            let streamsMade = StreamsMade()
            let body = Data(repeating: 7, count: 100)
            var form = try MultipartFormData(boundary: "reopen")
            form.append(length: 100, name: "slow") { streamsMade.next() == 0 ? blocked : InputStream(data: body) }
            var expected = try MultipartFormData(boundary: "reopen")
            expected.append(length: 100, name: "slow") { InputStream(data: body) }
            nonisolated(unsafe) let stream = form.makeBodyStream()
            stream.open()
            var head = [UInt8](repeating: 0, count: 10)
            #expect(stream.read(&head, maxLength: head.count) == head.count, "the delimiter, before the part's stream")
            let read = Outcome()
            Thread.detachNewThread {
                var buffer = [UInt8](repeating: 0, count: 4_096)
                read.set(stream.read(&buffer, maxLength: buffer.count))
            }
            #expect(await gate.entered.waitOffThePool())
            // Linux URLSession opens a stream again when it resends; here it comes while a read is blocked.
            stream.open()
            #expect(stream.streamStatus == .open)
            gate.release.signal()
            #expect(await read.done.waitOffThePool())
            #expect(read.value == -1, "the read that was blocked hands out nothing")
            var sent: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4_096)
            while true {
                let count = stream.read(&buffer, maxLength: buffer.count)
                #expect(count >= 0, "\(String(describing: stream.streamError))")
                if count <= 0 { break }
                sent += buffer[..<count]
            }
            #expect(Data(sent) == (try expected.encode()), "started over from the first byte")
        }

        @Test func cancellingAnUploadWhoseStreamBlocksReturnsAtOnce() async throws {
            let server = try await UploadServer()
            let blocked = BlockingStream()
            let gate = blocked.gate
            var form = MultipartFormData()
            form.append(blocked, length: 100, name: "slow")
            let session = URLSession(configuration: .ephemeral)
            let request = URLRequest(url: server.url())
            let upload = Task { [form] in try await session.upload(form, with: request) }
            #expect(await gate.entered.waitOffThePool())
            // Lets the stream go after 20 s whatever happens, from a thread of its own, so nothing can hang.
            let watchdog = Outcome()
            DispatchQueue.global().asyncAfter(deadline: .now() + 20) {
                watchdog.set(1)
                gate.release.signal()
            }
            upload.cancel()
            await #expect(throws: CancellationError.self) { try await upload.value }
            #expect(watchdog.value == nil, "the cancel waited for the blocked stream")
            gate.release.signal()
        }

        // MARK: Credentials

        @Test func aStoredCredentialAnswersEveryUploadNotOnlyTheFirst() async throws {
            let server = try await UploadServer()
            let url = server.url("/auth")
            let configuration = URLSessionConfiguration.ephemeral
            let storage = URLCredentialStorage()
            let space = URLProtectionSpace(
                host: url.host!, port: url.port!, protocol: "http", realm: "uploads",
                authenticationMethod: NSURLAuthenticationMethodHTTPBasic)
            storage.setDefaultCredential(URLCredential(user: "u", password: "p", persistence: .forSession), for: space)
            configuration.urlCredentialStorage = storage
            var form = MultipartFormData()
            form.append("v", name: "n")
            for attempt in 1...3 {
                let (data, response) = try await URLSession(configuration: configuration).upload(
                    form, with: URLRequest(url: url))
                #expect((response as? HTTPURLResponse)?.statusCode == 200, "upload \(attempt)")
                #expect(try server.seen(in: data).parts?.count == 1, "upload \(attempt)")
            }
        }
    }
}

/// A subclass that overrides only open, close and read, as hand-written ones often do: its `streamStatus` and
/// `hasBytesAvailable` are the base class's, and it can fail without setting an error.
private final class BareStream: InputStream {
    private let bytes: [UInt8]
    private let thenFail: Bool
    private var offset = 0

    init(_ bytes: [UInt8], thenFail: Bool = false) {
        self.bytes = bytes
        self.thenFail = thenFail
        super.init(data: Data())
    }

    override func open() {}
    override func close() {}

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        let count = min(len, bytes.count - offset)
        guard count > 0 else { return thenFail ? -1 : 0 }
        bytes.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + offset, count: count) }
        offset += count
        return count
    }
}

/// Where a ``BlockingStream``'s read signals that it has started, and waits to be let go.
private final class Gate: Sendable {
    let entered = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
}

/// A caller stream whose first read blocks until its gate is released, then ends.
private final class BlockingStream: InputStream {
    let gate = Gate()
    private var status: Stream.Status = .notOpen

    init() {
        super.init(data: Data())
    }

    override func open() { status = .open }
    override func close() { status = .closed }
    override var streamStatus: Stream.Status { status }
    override var hasBytesAvailable: Bool { status == .open }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        gate.entered.signal()
        gate.release.wait()
        status = .atEnd
        return 0
    }
}

/// A value set once on another thread.
private final class Outcome: @unchecked Sendable {
    // @unchecked: `stored` is guarded by `lock`.
    let done = DispatchSemaphore(value: 0)
    private let lock = Lock()
    private var stored: Int?

    func set(_ value: Int) {
        lock.withLock { stored = value }
        done.signal()
    }

    var value: Int? { lock.withLock { stored } }
}

extension DispatchSemaphore {
    /// Waits for the semaphore on a dispatch thread, not one of the concurrency pool's; false after `seconds`.
    fileprivate func waitOffThePool(seconds: Int = 30) async -> Bool {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: self.wait(timeout: .now() + .seconds(seconds)) == .success)
            }
        }
    }
}

/// How many streams a factory has made, from the threads that read the form.
private final class StreamsMade: @unchecked Sendable {
    // @unchecked: `count` is guarded by `lock`.
    private let lock = Lock()
    private var count = 0

    /// The number of streams made before this one.
    func next() -> Int {
        lock.withLock {
            defer { count += 1 }
            return count
        }
    }
}
