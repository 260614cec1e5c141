import Foundation
import MultipartForm
import MultipartStreamTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Problems found while appending: a typed reason that names the part.
@Suite struct AppendErrorTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    /// Appends `fileURL` as part 1 and returns the error.
    private func appendError(_ fileURL: URL, mimeType: String? = nil) throws -> MultipartError {
        var form = MultipartFormData()
        form.append("first", name: "a")
        let error = try #require(
            #expect(throws: MultipartError.self) {
                try form.append(fileURL: fileURL, name: "upload", mimeType: mimeType)
            })
        #expect(error.part?.index == 1)
        #expect(error.part?.name == "upload")
        #expect(form.count == 1, "nothing is added")
        return error
    }

    @Test func notAFileURL() throws {
        let url = URL(string: "https://example.com/a.jpg")!
        guard case .notAFileURL(url) = try appendError(url).reason else {
            Issue.record("wrong reason")
            return
        }
    }

    @Test func noSuchFile() throws {
        let url = directory.path("missing.jpg")
        let error = try appendError(url)
        guard case .fileNotFound(url) = error.reason else {
            Issue.record("\(error)")
            return
        }
        #expect(error.description == "part 1 (\"upload\"): no file at \(url.path)")
    }

    @Test func aPathThroughAFileIsNotFound() throws {
        let file = try directory.file("plain", contents: Data())
        guard case .fileNotFound = try appendError(file.appendingPathComponent("child")).reason else {
            Issue.record("wrong reason")
            return
        }
    }

    @Test func aDirectory() throws {
        guard case .isDirectory = try appendError(directory.url).reason else {
            Issue.record("wrong reason")
            return
        }
    }

    @Test func aFIFOHasNoSizeAndAppendingDoesNotBlock() throws {
        let fifo = directory.path("fifo")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        guard case .fileSizeUnavailable = try appendError(fifo).reason else {
            Issue.record("wrong reason")
            return
        }
    }

    @Test func aCharacterDeviceHasNoSize() throws {
        guard case .fileSizeUnavailable = try appendError(URL(fileURLWithPath: "/dev/zero")).reason else {
            Issue.record("wrong reason")
            return
        }
    }

    @Test func anUnopenablePath() throws {
        let tooLong = directory.path(String(repeating: "x", count: 300))
        let error = try appendError(tooLong)
        guard case .fileUnreadable(_, errno: ENAMETOOLONG) = error.reason else {
            Issue.record("\(error)")
            return
        }
        #expect(error.description.contains("File name too long"))
    }

    @Test func fileWithAMIMETypeHoldingCRLF() throws {
        let file = try directory.file("a.txt", contents: Data())
        guard
            case .invalidMIMEType("text/plain\r\nX-Evil: 1") = try appendError(
                file, mimeType: "text/plain\r\nX-Evil: 1"
            ).reason
        else {
            Issue.record("wrong reason")
            return
        }
    }

    @Test(arguments: ["", "text/plain\r\nX: y", "text/plain\n", "a\u{0}b", "a\u{7F}"])
    func anInvalidMIMETypeOnANonThrowingAppendFailsEveryOutput(mimeType: String) throws {
        var form = MultipartFormData()
        form.append("ok", name: "first")
        form.append(Data("x".utf8), name: "bad", fileName: "x.txt", mimeType: mimeType)
        form.append("ok", name: "last")
        let error = try #require(form.appendError)
        #expect(error.part?.index == 1)
        #expect(error.part?.name == "bad")
        guard case .invalidMIMEType(mimeType) = error.reason else {
            Issue.record("\(error)")
            return
        }
        #expect(throws: MultipartError.self) { try form.encode() }
        #expect(throws: MultipartError.self) { try form.writeEncodedData(to: directory.path("out")) }
        #expect(!FileManager.default.fileExists(atPath: directory.path("out").path))
        let stream = form.makeBodyStream()
        stream.open()
        #expect(stream.streamStatus == .error)
        var byte: UInt8 = 0
        #expect(stream.read(&byte, maxLength: 1) == -1, "not one byte of a form missing a part is sent")
        #expect((stream.streamError as? MultipartError)?.part?.index == 1)
    }

    @Test func theFirstAppendErrorIsKept() {
        var form = MultipartFormData()
        form.append(InputStream(data: Data()), length: 0, name: "one", mimeType: "bad\n")
        form.append(length: 0, name: "two", mimeType: "bad\r") { InputStream(data: Data()) }
        #expect(form.appendError?.part?.name == "one")
    }

    @Test(arguments: [
        ("", "v"), ("Bad Name", "v"), ("Colon:", "v"), ("Ümlaut", "v"), ("X-A\r\nX-B", "v"),
    ])
    func invalidCustomHeaderNames(name: String, value: String) throws {
        var form = MultipartFormData()
        let error = try #require(
            #expect(throws: MultipartError.self) {
                try form.append(
                    headers: [
                        (name: "Content-Disposition", value: "form-data; name=\"x\""), (name: name, value: value),
                    ], body: Data())
            })
        #expect(error.part?.index == 0)
        guard case .invalidHeaderName(name) = error.reason else {
            Issue.record("\(error)")
            return
        }
        #expect(form.count == 0)
    }

    @Test(arguments: ["a\r\nX-Injected: 1", "a\n", "a\r", "a\u{0}", "a\u{1B}[31m", "\u{7F}"])
    func headerValuesWithControlCharactersAreRefused(value: String) throws {
        var form = MultipartFormData()
        let error = try #require(
            #expect(throws: MultipartError.self) {
                try form.append(headers: [(name: "X-Note", value: value)], body: Data())
            })
        guard case .invalidHeaderValue(name: "X-Note", value: value) = error.reason else {
            Issue.record("\(error)")
            return
        }
    }

    @Test func appendingAFileDoesNotReadIt() throws {
        // A 1 TiB sparse file appends instantly: only its length is taken.
        let huge = directory.path("huge.bin")
        #expect(FileManager.default.createFile(atPath: huge.path, contents: nil))
        #expect(truncate(huge.path, 1 << 40) == 0)
        var form = MultipartFormData()
        try form.append(fileURL: huge, name: "huge")
        #expect(form.contentLength! > 1 << 40)
    }
}
