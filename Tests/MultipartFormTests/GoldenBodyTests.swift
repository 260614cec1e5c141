import Foundation
import MultipartForm
import MultipartStreamTestSupport
import Testing

/// The exact bytes of every append variant, with a fixed boundary.
@Suite struct GoldenBodyTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    private func form(_ build: (inout MultipartFormData) throws -> Void) throws -> MultipartFormData {
        var form = try MultipartFormData(boundary: "XyZ")
        try build(&form)
        return form
    }

    /// Checks the encoded, streamed and written bodies all equal `expected`, and so does `contentLength`.
    private func expectBody(
        _ form: MultipartFormData, _ expected: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let expectedData = Data(expected.utf8)
        let encoded = try form.encode()
        #expect(encoded.visible == expectedData.visible, sourceLocation: sourceLocation)
        #expect(form.contentLength! == UInt64(expectedData.count), sourceLocation: sourceLocation)
        #expect(try form.streamedBody(readSize: 7) == expectedData, sourceLocation: sourceLocation)
        let output = directory.path("written-\(UUID().uuidString)")
        try form.writeEncodedData(to: output)
        #expect(try Data(contentsOf: output) == expectedData, sourceLocation: sourceLocation)
    }

    @Test func emptyFormIsTheCloseDelimiterAlone() throws {
        try expectBody(try form { _ in }, "--XyZ--\r\n")
    }

    @Test func textField() throws {
        try expectBody(
            try form { $0.append("Ada Lovelace", name: "author") },
            "--XyZ\r\nContent-Disposition: form-data; name=\"author\"\r\n\r\nAda Lovelace\r\n--XyZ--\r\n"
        )
    }

    @Test func dataWithoutFileNameIsAFieldWithoutContentType() throws {
        try expectBody(
            try form { $0.append(Data([0, 1, 2]), name: "raw") },
            "--XyZ\r\nContent-Disposition: form-data; name=\"raw\"\r\n\r\n\u{0}\u{1}\u{2}\r\n--XyZ--\r\n"
        )
    }

    @Test func dataWithMIMETypeOnly() throws {
        try expectBody(
            try form { $0.append(Data("{}".utf8), name: "meta", mimeType: "application/json") },
            "--XyZ\r\nContent-Disposition: form-data; name=\"meta\"\r\nContent-Type: application/json\r\n\r\n{}\r\n--XyZ--\r\n"
        )
    }

    @Test func dataWithFileNameTakesTheTypeOfItsExtension() throws {
        try expectBody(
            try form { $0.append(Data("a,b".utf8), name: "sheet", fileName: "data.CSV") },
            "--XyZ\r\nContent-Disposition: form-data; name=\"sheet\"; filename=\"data.CSV\"\r\nContent-Type: text/csv\r\n\r\na,b\r\n--XyZ--\r\n"
        )
    }

    @Test func dataWithUnknownExtensionIsOctetStream() throws {
        try expectBody(
            try form { $0.append(Data("?".utf8), name: "blob", fileName: "thing.unknownext") },
            "--XyZ\r\nContent-Disposition: form-data; name=\"blob\"; filename=\"thing.unknownext\"\r\n"
                + "Content-Type: application/octet-stream\r\n\r\n?\r\n--XyZ--\r\n"
        )
    }

    @Test func dataWithFileNameAndMIMEType() throws {
        try expectBody(
            try form { $0.append(Data("x".utf8), name: "doc", fileName: "a.bin", mimeType: "application/x-custom") },
            "--XyZ\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"a.bin\"\r\nContent-Type: application/x-custom\r\n\r\nx\r\n--XyZ--\r\n"
        )
    }

    @Test func fileURLTakesNameAndTypeFromThePath() throws {
        let fileURL = try directory.file("photo.jpg", contents: Data("JPEGDATA".utf8))
        try expectBody(
            try form { try $0.append(fileURL: fileURL, name: "photo") },
            "--XyZ\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"photo.jpg\"\r\nContent-Type: image/jpeg\r\n\r\nJPEGDATA\r\n--XyZ--\r\n"
        )
    }

    @Test func fileURLWithOverrides() throws {
        let fileURL = try directory.file("photo.jpg", contents: Data("JPEGDATA".utf8))
        try expectBody(
            try form { try $0.append(fileURL: fileURL, name: "photo", fileName: "cat.png", mimeType: "image/x-cat") },
            "--XyZ\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"cat.png\"\r\nContent-Type: image/x-cat\r\n\r\nJPEGDATA\r\n--XyZ--\r\n"
        )
    }

    @Test func oneShotStream() throws {
        var form = try MultipartFormData(boundary: "XyZ")
        form.append(InputStream(data: Data("streamed".utf8)), length: 8, name: "log", fileName: "app.log")
        let expected =
            "--XyZ\r\nContent-Disposition: form-data; name=\"log\"; filename=\"app.log\"\r\nContent-Type: text/plain\r\n\r\nstreamed\r\n--XyZ--\r\n"
        #expect(form.contentLength! == UInt64(expected.utf8.count))
        #expect(try form.encode().visible == Data(expected.utf8).visible)
    }

    @Test func streamFactory() throws {
        try expectBody(
            try form {
                $0.append(length: 5, name: "backup", fileName: "db.sqlite", mimeType: nil) {
                    InputStream(data: Data("hello".utf8))
                }
            },
            "--XyZ\r\nContent-Disposition: form-data; name=\"backup\"; filename=\"db.sqlite\"\r\nContent-Type: application/vnd.sqlite3\r\n\r\nhello\r\n--XyZ--\r\n"
        )
    }

    @Test func customHeadersGoOutInOrderAsGiven() throws {
        try expectBody(
            try form {
                try $0.append(
                    headers: [
                        (name: "Content-Disposition", value: "form-data; name=\"custom\""),
                        (name: "Content-Type", value: "text/plain; charset=utf-8"),
                        (name: "X-Checksum", value: "\tabc"),
                    ],
                    body: Data("body".utf8)
                )
            },
            "--XyZ\r\nContent-Disposition: form-data; name=\"custom\"\r\nContent-Type: text/plain; charset=utf-8\r\n"
                + "X-Checksum: \tabc\r\n\r\nbody\r\n--XyZ--\r\n"
        )
    }

    @Test func customHeadersMayBeEmpty() throws {
        try expectBody(try form { try $0.append(headers: [], body: Data("x".utf8)) }, "--XyZ\r\n\r\nx\r\n--XyZ--\r\n")
    }

    @Test func emptyParts() throws {
        let emptyFile = try directory.file("empty.txt", contents: Data())
        try expectBody(
            try form {
                $0.append("", name: "a")
                $0.append(Data(), name: "b", fileName: "b.bin")
                try $0.append(fileURL: emptyFile, name: "c")
                $0.append(length: 0, name: "d") { InputStream(data: Data()) }
            },
            "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n\r\n"
                + "--XyZ\r\nContent-Disposition: form-data; name=\"b\"; filename=\"b.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n\r\n"
                + "--XyZ\r\nContent-Disposition: form-data; name=\"c\"; filename=\"empty.txt\"\r\nContent-Type: text/plain\r\n\r\n\r\n"
                + "--XyZ\r\nContent-Disposition: form-data; name=\"d\"\r\n\r\n\r\n--XyZ--\r\n"
        )
    }

    @Test func namesAreEscapedAsBrowsersDo() throws {
        try expectBody(
            try form { $0.append(Data(), name: "a\"b\rc\nd%e\\f", fileName: "q\"\r\n.txt") },
            "--XyZ\r\nContent-Disposition: form-data; name=\"a%22b%0Dc%0Ad%e\\f\"; filename=\"q%22%0D%0A.txt\"\r\n"
                + "Content-Type: text/plain\r\n\r\n\r\n--XyZ--\r\n"
        )
    }

    @Test func nonASCIINamesGoOutAsUTF8() throws {
        try expectBody(
            try form { $0.append("ü", name: "größe 😀") },
            "--XyZ\r\nContent-Disposition: form-data; name=\"größe 😀\"\r\n\r\nü\r\n--XyZ--\r\n"
        )
    }

    @Test func severalPartsOfEveryKind() throws {
        let fileURL = try directory.file("notes.md", contents: Data("# Notes\n".utf8))
        try expectBody(
            try form {
                $0.append("1", name: "id")
                try $0.append(fileURL: fileURL, name: "notes")
                $0.append(length: 3, name: "s") { InputStream(data: Data("abc".utf8)) }
                $0.append(Data("P".utf8), name: "d", fileName: "d.png")
            },
            "--XyZ\r\nContent-Disposition: form-data; name=\"id\"\r\n\r\n1\r\n"
                + "--XyZ\r\nContent-Disposition: form-data; name=\"notes\"; filename=\"notes.md\"\r\nContent-Type: text/markdown\r\n\r\n# Notes\n\r\n"
                + "--XyZ\r\nContent-Disposition: form-data; name=\"s\"\r\n\r\nabc\r\n"
                + "--XyZ\r\nContent-Disposition: form-data; name=\"d\"; filename=\"d.png\"\r\nContent-Type: image/png\r\n\r\nP\r\n--XyZ--\r\n"
        )
    }
}
