import Foundation
import MultipartStream
import MultipartStreamTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// Hostile input: no name, file name, type, header or body can add a header line or a part.
@Suite struct HostileInputTests {
    @Test func noNameOrFileNameCanAddAHeaderLineOrAPart() throws {
        var generator = SeededGenerator(seed: 99)
        let alphabet = ["a", "\r", "\n", "\r\n", "\0", "\"", ";", ":", "--", "\\", "=", " ", "é", "X-Injected: 1"]
        for round in 0..<2_000 {
            func text() -> String {
                (0..<Int.random(in: 0...8, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
                    .joined()
            }
            var form = MultipartFormData()
            let partCount = Int.random(in: 1...4, using: &generator)
            for _ in 0..<partCount {
                form.append(Data("v".utf8), name: text(), fileName: Bool.random(using: &generator) ? text() : nil)
            }
            #expect(form.appendError == nil)
            let body = String(decoding: try form.encode(), as: UTF8.self)
            let parts = body.components(separatedBy: "--\(form.boundary)").dropFirst().dropLast()
            #expect(parts.count == partCount, "round \(round)")
            for part in parts {
                let head = part.components(separatedBy: "\r\n\r\n")[0]
                let lines = head.components(separatedBy: "\r\n").dropFirst()
                #expect(lines.first?.hasPrefix("Content-Disposition: form-data; name=\"") == true, "round \(round)")
                #expect(lines.count <= 2, "round \(round): \(lines)")
                #expect(lines.dropFirst().allSatisfy { $0.hasPrefix("Content-Type: ") }, "round \(round)")
                #expect(!head.contains("\0"), "round \(round)")
            }
        }
    }

    @Test func aNULInANameIsEscaped() throws {
        var form = try MultipartFormData(boundary: "B0undary")
        form.append("v", name: "a\0b")
        #expect(String(decoding: try form.encode(), as: UTF8.self).contains("name=\"a%00b\""))
    }

    @Test(arguments: ["text/plain\r\nX-Injected: 1", "text/plain\0", "text/plain\n\n--b\r\n"])
    func aTypeThatCouldForgeAHeaderIsRefused(type: String) throws {
        var form = try MultipartFormData(boundary: "B0undary")
        form.append(Data(), name: "a", fileName: "a.txt", mimeType: type)
        form.append(length: 0, name: "b", mimeType: type) { InputStream(data: Data()) }
        guard case .invalidMIMEType(type) = form.appendError?.reason else {
            Issue.record("\(String(describing: form.appendError))")
            return
        }
        #expect(form.count == 0)
        #expect(throws: MultipartError.self) { try form.encode() }
    }

    @Test func aRandomBoundaryFoundInAPartIsDrawnAgain() throws {
        var form = MultipartFormData()
        let first = form.boundary
        form.append(Data("before \(first) after".utf8), name: "data")
        let second = form.boundary
        #expect(second != first)
        form.append("v", name: "name with \(second) inside")
        #expect(form.boundary != second)
        #expect(form.appendError == nil)
        let body = try form.encode()
        #expect(UInt64(body.count) == form.contentLength!)
        #expect(
            try Peer.node.parse(body, contentType: form.contentType) == [
                FormPart(name: "data", body: Data("before \(first) after".utf8)),
                FormPart(name: "name with \(second) inside", body: Data("v".utf8)),
            ])
    }

    @Test func aChosenBoundaryFoundInAPartRefusesThePart() throws {
        var form = try MultipartFormData(boundary: "XyZ")
        form.append("fine", name: "a")
        form.append("holds XyZ", name: "b")
        guard case .boundaryInPart("XyZ") = form.appendError?.reason else {
            Issue.record("\(String(describing: form.appendError))")
            return
        }
        #expect(form.appendError?.part?.index == 1)
        #expect(form.boundary == "XyZ")
        let error = try #require(throws: MultipartError.self) {
            try form.append(headers: [(name: "Content-Disposition", value: "form-data; name=\"XyZ\"")], body: Data())
        }
        guard case .boundaryInPart = error.reason else {
            Issue.record("\(error)")
            return
        }
    }
}

/// Faults outside the process: permissions, full and read-only disks, slow streams. Linux only: it mounts tmpfs
/// file systems and runs as another user with runuser, as root.
@Suite(.enabled(if: isLinux)) struct EnvironmentFaultTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    /// A tmpfs of `size` mounted on a new directory for the test (the tests run as root), unmounted after.
    private func withMount(_ options: String, _ body: (URL) throws -> Void) throws {
        let mountPoint = directory.path("mount-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: false)
        let status = try shell("mount -t tmpfs -o \(options) tmpfs '\(mountPoint.path)'")
        try #require(status == 0, "mounting a tmpfs needs root, as CI has")
        defer { _ = try? shell("umount '\(mountPoint.path)'") }
        try body(mountPoint)
    }

    private func shell(_ command: String) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        try process.startAlone()
        process.waitUntilExit()
        return process.terminationStatus
    }

    private func bigForm() -> MultipartFormData {
        var form = MultipartFormData()
        form.append(Data(count: 1 << 20), name: "big", fileName: "big.bin")
        return form
    }

    @Test func aFullDiskFailsTheWriteAndRemovesThePartialFile() throws {
        try withMount("size=64k") { mountPoint in
            let output = mountPoint.appendingPathComponent("body.multipart")
            let error = try #require(throws: MultipartError.self) { try bigForm().writeEncodedData(to: output) }
            guard case .outputWriteFailed(_, errno: ENOSPC) = error.reason else {
                Issue.record("\(error)")
                return
            }
            #expect(!FileManager.default.fileExists(atPath: output.path))
        }
    }

    @Test func aReadOnlyLocationFailsTheWrite() throws {
        try withMount("size=64k,ro") { mountPoint in
            let error = try #require(throws: MultipartError.self) {
                try bigForm().writeEncodedData(to: mountPoint.appendingPathComponent("body.multipart"))
            }
            guard case .outputWriteFailed(_, errno: EROFS) = error.reason else {
                Issue.record("\(error)")
                return
            }
        }
    }

    @Test func aStreamThatBlocksForAWhileStillGivesTheExactBody() throws {
        var form = try MultipartFormData(boundary: "B0undary")
        let bytes = (0..<20_000).map { UInt8(truncatingIfNeeded: $0) }
        form.append(length: UInt64(bytes.count), name: "slow") { SlowStream(bytes, chunk: 1_000, pause: 0.005) }
        let streamed = form.makeBodyStream().drain(readSize: 4_096)
        #expect(streamed.error == nil)
        #expect(streamed.bytes == (try form.encode()))
        #expect(streamed.bytes.range(of: Data(bytes)) != nil)
    }
}

extension URLSessionSuites {
    /// Many threads and tasks at once; run under ThreadSanitizer in CI.
    @Suite struct ConcurrencyTests {
        @Test func oneFormStreamedFromManyThreadsAtOnce() throws {
            let directory = try TemporaryDirectory()
            var form = MultipartFormData()
            form.append("field", name: "a")
            try form.append(fileURL: directory.file("f.bin", contents: Data(repeating: 3, count: 300_000)), name: "f")
            form.append(length: 5, name: "s") { InputStream(data: Data("12345".utf8)) }
            let expected = try form.encode()
            let results = Results(count: 16)
            DispatchQueue.concurrentPerform(iterations: 16) { [form] index in
                results.set(index, form.makeBodyStream().drain(readSize: 1_000 + index).bytes)
            }
            #expect(results.all.allSatisfy { $0 == expected })
        }

        @Test func eightUploadsAtOnce() async throws {
            let server = try await UploadServer()
            let url = server.url()
            try await withThrowingTaskGroup(of: (Int, UploadServer.Seen?).self) { group in
                for index in 0..<8 {
                    group.addTask {
                        var form = MultipartFormData()
                        form.append("upload \(index)", name: "index")
                        form.append(
                            Data(repeating: UInt8(index), count: 200_000 * (index + 1)), name: "f", fileName: "f.bin")
                        let strategy: MultipartUploadStrategy = index.isMultiple(of: 2) ? .stream : .file
                        let (data, _) = try await URLSession(configuration: .ephemeral).upload(
                            form, with: URLRequest(url: url), strategy: strategy)
                        return (index, try JSONDecoder().decode(UploadServer.Seen.self, from: data))
                    }
                }
                for try await (index, seen) in group {
                    let parts = try #require(seen?.parts)
                    #expect(parts.first?.body == Data("upload \(index)".utf8))
                    #expect(parts.last?.body == Data(repeating: UInt8(index), count: 200_000 * (index + 1)))
                }
            }
        }
    }
}

/// Results written by concurrent workers.
private final class Results: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Lock()
    private var values: [Data]

    init(count: Int) {
        values = Array(repeating: Data(), count: count)
    }

    func set(_ index: Int, _ value: Data) {
        lock.withLock { values[index] = value }
    }

    var all: [Data] { lock.withLock { values } }
}

/// A caller stream that yields `chunk` bytes per read after a pause, as a slow network or pipe would.
private final class SlowStream: InputStream {
    private let bytes: [UInt8]
    private let chunk: Int
    private let pause: TimeInterval
    private var offset = 0
    private var status: Stream.Status = .notOpen

    init(_ bytes: [UInt8], chunk: Int, pause: TimeInterval) {
        self.bytes = bytes
        self.chunk = chunk
        self.pause = pause
        super.init(data: Data())
    }

    override func open() { status = .open }
    override func close() { status = .closed }
    override var streamStatus: Stream.Status { status }
    override var streamError: (any Error)? { nil }
    override var hasBytesAvailable: Bool { offset < bytes.count }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        Thread.sleep(forTimeInterval: pause)
        let count = min(len, chunk, bytes.count - offset)
        bytes.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + offset, count: count) }
        offset += count
        return count
    }
}
