import Foundation
import MultipartForm
import MultipartStreamTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A source that fails or changes after it was appended fails the body at its part: -1, `.error`, and a
/// `streamError` naming the part and the reason.
@Suite struct StreamingFaultTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    /// A form of a field, then the part under test at index 1, then a field.
    private func form(_ appendPart: (inout MultipartFormData) throws -> Void) throws -> MultipartFormData {
        var form = try MultipartFormData(boundary: "B0undary")
        form.append("before", name: "a")
        try appendPart(&form)
        form.append("after", name: "z")
        return form
    }

    /// Drains the form's stream and returns its error, which must name part 1 and be `.error`; also checks that
    /// `encode()` and `writeEncodedData(to:)` fail the same way, leaving no file behind.
    private func failure(
        of form: MultipartFormData, readSize: Int = 65_536, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> MultipartError.Reason {
        let stream = form.makeBodyStream()
        let drained = stream.drain(readSize: readSize)
        let error = try #require(
            drained.error, "the stream sent \(drained.bytes.count) bytes without failing",
            sourceLocation: sourceLocation)
        #expect(drained.bytes.count < Int(form.contentLength!), sourceLocation: sourceLocation)
        #expect(stream.streamStatus == .error, sourceLocation: sourceLocation)
        #expect(error.part?.index == 1, sourceLocation: sourceLocation)
        #expect(error.part?.name == "part", sourceLocation: sourceLocation)
        #expect(error.description.hasPrefix("part 1 (\"part\"): "), sourceLocation: sourceLocation)
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(
            stream.read(&buffer, maxLength: 16) == -1, "a failed stream stays failed", sourceLocation: sourceLocation)
        return error.reason
    }

    private func expectNoOpenDescriptor(under directory: URL, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(OpenDescriptors.count(under: directory) == 0, sourceLocation: sourceLocation)
    }

    // MARK: Files

    @Test func fileRemovedAfterAppend() throws {
        let fileURL = try directory.file("gone.bin", contents: Data(count: 100))
        let form = try form { try $0.append(fileURL: fileURL, name: "part") }
        try FileManager.default.removeItem(at: fileURL)
        guard case .fileVanished(let url) = try failure(of: form) else {
            Issue.record("wrong reason")
            return
        }
        #expect(url == fileURL)
    }

    @Test func fileTruncatedAfterAppend() throws {
        let fileURL = try directory.file("short.bin", contents: Data(count: 100))
        let form = try form { try $0.append(fileURL: fileURL, name: "part") }
        #expect(truncate(fileURL.path, 40) == 0)
        guard case .fileSizeChanged(_, expected: 100, actual: 40) = try failure(of: form) else {
            Issue.record("wrong reason")
            return
        }
    }

    @Test func fileExtendedAfterAppend() throws {
        let fileURL = try directory.file("long.bin", contents: Data(count: 100))
        let form = try form { try $0.append(fileURL: fileURL, name: "part") }
        #expect(truncate(fileURL.path, 150) == 0)
        guard case .fileSizeChanged(_, expected: 100, actual: 150) = try failure(of: form) else {
            Issue.record("wrong reason")
            return
        }
    }

    @Test func fileReplacedByADirectory() throws {
        let fileURL = try directory.file("dir", contents: Data(count: 10))
        let form = try form { try $0.append(fileURL: fileURL, name: "part") }
        try FileManager.default.removeItem(at: fileURL)
        try FileManager.default.createDirectory(at: fileURL, withIntermediateDirectories: false)
        guard case .isDirectory = try failure(of: form) else {
            Issue.record("wrong reason")
            return
        }
    }

    @Test func fileReplacedByAFIFOFailsWithoutBlocking() throws {
        let fileURL = try directory.file("fifo", contents: Data(count: 10))
        let form = try form { try $0.append(fileURL: fileURL, name: "part") }
        try FileManager.default.removeItem(at: fileURL)
        #expect(mkfifo(fileURL.path, 0o600) == 0)
        guard case .fileSizeUnavailable = try failure(of: form) else {
            Issue.record("wrong reason")
            return
        }
    }

    @Test func fileTruncatedWhileItIsRead() throws {
        let fileURL = try directory.file("shrinking.bin", contents: Data(repeating: 1, count: 100_000))
        let form = try form { try $0.append(fileURL: fileURL, name: "part") }
        let stream = form.makeBodyStream()
        stream.open()
        var buffer = [UInt8](repeating: 0, count: 1_000)
        #expect(stream.read(&buffer, maxLength: 1_000) == 1_000)
        #expect(OpenDescriptors.count(under: directory.url) == 1, "the file is open while its part is read")
        #expect(truncate(fileURL.path, 500) == 0)
        let drained = stream.drain(readSize: 1_000)
        let error = try #require(drained.error)
        guard case .fileSizeChanged(_, expected: 100_000, actual: 500) = error.reason else {
            Issue.record("\(error)")
            return
        }
        #expect(error.part?.index == 1)
        expectNoOpenDescriptor(under: directory.url)
    }

    @Test func fileExtendedWhileItIsRead() throws {
        let fileURL = try directory.file("growing.bin", contents: Data(repeating: 1, count: 100_000))
        let form = try form { try $0.append(fileURL: fileURL, name: "part") }
        let stream = form.makeBodyStream()
        stream.open()
        var buffer = [UInt8](repeating: 0, count: 1_000)
        #expect(stream.read(&buffer, maxLength: 1_000) == 1_000)
        let handle = try FileHandle(forWritingTo: fileURL)
        handle.seekToEndOfFile()
        handle.write(Data(repeating: 2, count: 10))
        try handle.close()
        let error = try #require(stream.drain(readSize: 1_000).error)
        guard case .fileSizeChanged(_, expected: 100_000, actual: 100_010) = error.reason else {
            Issue.record("\(error)")
            return
        }
        expectNoOpenDescriptor(under: directory.url)
    }

    @Test func fileFailuresReachWriteEncodedDataAndLeaveNoPartialFile() throws {
        let fileURL = try directory.file("gone.bin", contents: Data(count: 100))
        let form = try form { try $0.append(fileURL: fileURL, name: "part") }
        try FileManager.default.removeItem(at: fileURL)
        let output = directory.path("out.multipart")
        let error = #expect(throws: MultipartError.self) { try form.writeEncodedData(to: output) }
        #expect(error?.part?.index == 1)
        #expect(!FileManager.default.fileExists(atPath: output.path))
        #expect(throws: MultipartError.self) { try form.encode() }
    }

    // MARK: Caller streams

    @Test(arguments: [1, 3, 65_536])
    func streamThatEndsEarly(readSize: Int) throws {
        let form = try form { $0.append(ScriptedStream(Array(repeating: 1, count: 10)), length: 20, name: "part") }
        guard case .streamEndedEarly(expected: 20, received: 10) = try failure(of: form, readSize: readSize) else {
            Issue.record("wrong reason")
            return
        }
    }

    @Test func streamThatEndsBeforeItsFirstByte() throws {
        let form = try form { $0.append(length: 5, name: "part") { ScriptedStream([]) } }
        guard case .streamEndedEarly(expected: 5, received: 0) = try failure(of: form) else {
            Issue.record("wrong reason")
            return
        }
    }

    @Test(arguments: [1, 3, 65_536])
    func streamLongerThanDeclared(readSize: Int) throws {
        let form = try form { $0.append(ScriptedStream(Array(repeating: 1, count: 21)), length: 20, name: "part") }
        guard case .streamLongerThanDeclared(length: 20) = try failure(of: form, readSize: readSize) else {
            Issue.record("wrong reason")
            return
        }
    }

    @Test func streamThatFailsMidway() throws {
        let stream = ScriptedStream(Array(repeating: 1, count: 10), then: .fail(ScriptedStream.Fault()))
        let form = try form { $0.append(stream, length: 20, name: "part") }
        guard case .streamFailed(let underlying) = try failure(of: form) else {
            Issue.record("wrong reason")
            return
        }
        #expect(underlying is ScriptedStream.Fault)
        #expect(stream.closeCount == 1, "the failed stream is closed")
    }

    @Test func streamThatFailsToOpen() throws {
        let form = try form {
            $0.append(length: 20, name: "part") { ScriptedStream([], then: .failToOpen(ScriptedStream.Fault())) }
        }
        guard case .streamFailed(let underlying) = try failure(of: form) else {
            Issue.record("wrong reason")
            return
        }
        #expect(underlying is ScriptedStream.Fault)
    }

    @Test func streamOfAMissingFile() throws {
        let missing = directory.path("missing")
        let form = try form { $0.append(length: 20, name: "part") { InputStream(url: missing)! } }
        guard case .streamFailed = try failure(of: form) else {
            Issue.record("wrong reason")
            return
        }
    }

    @Test func streamFactoryThatThrows() throws {
        let form = try form { $0.append(length: 20, name: "part") { throw ScriptedStream.Fault() } }
        guard case .streamFactoryFailed(let underlying) = try failure(of: form) else {
            Issue.record("wrong reason")
            return
        }
        #expect(underlying is ScriptedStream.Fault)
        #expect(try failure(of: form).description.contains("disk on fire"))
    }

    @Test func aStreamIsClosedWhenItsPartIsDone() throws {
        let stream = ScriptedStream(Array(repeating: 1, count: 10))
        var form = try MultipartFormData(boundary: "B0undary")
        form.append(stream, length: 10, name: "s")
        form.append("after", name: "z")
        let body = form.makeBodyStream()
        body.open()
        var buffer = [UInt8](repeating: 0, count: 70)
        _ = body.read(&buffer, maxLength: 70)
        #expect(stream.closeCount == 1)
        #expect(body.drain().error == nil)
    }
}
