import Foundation
import MultipartForm
import MultipartStreamTestSupport
import Testing

/// Header lines on file and stream parts, JSON parts, other multipart subtypes and the read-only view of the parts,
/// checked by Werkzeug and Node.
@Suite struct PartAPITests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    @Test func headerLinesOnFileAndStreamPartsReachTheParser() throws {
        let fileBody = Data((0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let fileURL = try directory.file("scan.pdf", contents: fileBody)
        let streamBody = Data("streamed log lines\n".utf8)
        var form = MultipartFormData()
        try form.append(
            headers: [
                ("Content-Disposition", #"form-data; name="document"; filename="scan.pdf""#),
                ("Content-Type", "application/pdf"),
                ("X-Checksum", "abc123"),
            ],
            fileURL: fileURL)
        try form.append(
            headers: [
                ("Content-Disposition", #"form-data; name="log"; filename="app.log""#),
                ("Content-Type", "text/plain"), ("Content-Language", "en"),
            ],
            length: UInt64(streamBody.count)
        ) { InputStream(data: streamBody) }
        let body = try form.encode()
        #expect(UInt64(body.count) == form.contentLength!)

        let werkzeug = try Peer.werkzeug.parse(body, contentType: form.contentType)
        #expect(werkzeug.map(\.name) == ["document", "log"])
        #expect(werkzeug.map(\.body) == [fileBody, streamBody])
        #expect(werkzeug.map(\.fileName) == ["scan.pdf", "app.log"])
        #expect(werkzeug[0].headers?.contains(["X-Checksum", "abc123"]) == true, "\(werkzeug[0].headers ?? [])")
        #expect(werkzeug[1].headers?.contains(["Content-Language", "en"]) == true, "\(werkzeug[1].headers ?? [])")
        let node = try Peer.node.parse(body, contentType: form.contentType)
        #expect(
            node == [
                FormPart(name: "document", fileName: "scan.pdf", contentType: "application/pdf", body: fileBody),
                FormPart(name: "log", fileName: "app.log", contentType: "text/plain", body: streamBody),
            ])
    }

    @Test(arguments: [
        ("X Tag", "v", "name"), ("", "v", "name"), ("X-Tag", "a\r\nX-Evil: 1", "value"), ("X-Tag", "a\nb", "value"),
        ("X-Tag", "nul\u{0}", "value"),
    ])
    func headerLinesOnFileAndStreamPartsAreChecked(name: String, value: String, fault: String) throws {
        let fileURL = try directory.file("a.txt", contents: Data("a".utf8))
        let headers = [("Content-Disposition", #"form-data; name="f""#), (name, value)]
        var form = MultipartFormData()
        form.append("first", name: "a")
        let errors = [
            #expect(throws: MultipartError.self) { try form.append(headers: headers, fileURL: fileURL) },
            #expect(throws: MultipartError.self) {
                try form.append(headers: headers, length: 1) { InputStream(data: Data("a".utf8)) }
            },
        ]
        for error in errors {
            let error = try #require(error)
            #expect(error.part?.index == 1)
            #expect(error.part?.name == "f", "named by its Content-Disposition")
            switch (error.reason, fault) {
            case (.invalidHeaderName(name), "name"), (.invalidHeaderValue(name, value), "value"): break
            default: Issue.record("wrong reason: \(error)")
            }
        }
        #expect(form.count == 1, "nothing is added")
    }

    @Test func aHeaderLineHoldingAChosenBoundaryIsRefused() throws {
        var form = try MultipartFormData(boundary: "chosen-boundary")
        let error = try #require(
            #expect(throws: MultipartError.self) {
                try form.append(headers: [("X-Note", "see --chosen-boundary")], length: 0) { InputStream(data: Data()) }
            })
        guard case .boundaryInPart("chosen-boundary") = error.reason else {
            Issue.record("wrong reason: \(error)")
            return
        }
        #expect(form.count == 0)
    }

    @Test func aHeaderFilePartChecksItsFileAsTheNamedAppendDoes() throws {
        var form = MultipartFormData()
        let missing = directory.path("missing.bin")
        let error = try #require(
            #expect(throws: MultipartError.self) {
                try form.append(headers: [("Content-Disposition", "form-data; name=upload")], fileURL: missing)
            })
        guard case .fileNotFound(missing) = error.reason else {
            Issue.record("wrong reason: \(error)")
            return
        }
        #expect(error.part?.index == 0)
        #expect(form.count == 0)
    }

    struct Metadata: Codable, Equatable {
        var title: String
        var tags: [String]
        var rating: Double
    }

    @Test func aJSONPartIsEncodedWithItsEncoderAndTyped() throws {
        let value = Metadata(title: "Holiday \"2026\"\r\n", tags: ["sea", "東京"], rating: 4.5)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var form = MultipartFormData()
        try form.append(json: value, name: "metadata", encoder: encoder)
        let body = try form.encode()
        let parts = try Peer.werkzeug.parse(body, contentType: form.contentType)
        #expect(parts.count == 1)
        #expect(parts.first?.name == "metadata")
        #expect(parts.first?.contentType == "application/json")
        #expect(parts.first?.body == (try encoder.encode(value)))
        #expect(try JSONDecoder().decode(Metadata.self, from: try #require(parts.first?.body)) == value)
        #expect(form.parts.first?.contentType == "application/json")
    }

    @Test func aValueTheEncoderRefusesIsATypedErrorAndAddsNothing() throws {
        var form = MultipartFormData()
        form.append("first", name: "a")
        let error = try #require(
            #expect(throws: MultipartError.self) { try form.append(json: [Double.nan], name: "score") })
        guard case .jsonEncodingFailed(let underlying) = error.reason else {
            Issue.record("wrong reason: \(error)")
            return
        }
        #expect(underlying is EncodingError)
        #expect(error.part?.index == 1)
        #expect(error.part?.name == "score")
        #expect(form.count == 1)
    }

    @Test func otherSubtypesNameThemselvesInTheContentType() throws {
        var form = try MultipartFormData(subtype: "mixed", boundary: "mixed-boundary")
        #expect(form.contentType == "multipart/mixed; boundary=mixed-boundary")
        #expect(form.subtype == "mixed")
        try form.append(headers: [("Content-Type", "text/plain; charset=utf-8")], body: Data("plain".utf8))
        try form.append(headers: [("Content-Type", "text/html")], body: Data("<p>html</p>".utf8))
        let body = try form.encode()
        #expect(body.starts(with: Data("--mixed-boundary\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n".utf8)))
        let parts = try Peer.werkzeug.parse(body, contentType: form.contentType)
        #expect(parts.map(\.body) == [Data("plain".utf8), Data("<p>html</p>".utf8)])
        #expect(parts.map(\.contentType) == ["text/plain; charset=utf-8", "text/html"])

        let random = try MultipartFormData(subtype: "related")
        #expect(random.contentType == "multipart/related; boundary=\(random.boundary)")
        #expect(
            try MultipartFormData(subtype: "form-data", boundary: "b").contentType == "multipart/form-data; boundary=b")
    }

    @Test(arguments: ["", "mi xed", "mixed/alternative", "mixed\r\nX-Evil: 1", "mixed;", "é"])
    func aSubtypeThatIsNotATokenIsRefused(subtype: String) throws {
        let error = try #require(#expect(throws: MultipartError.self) { try MultipartFormData(subtype: subtype) })
        guard case .invalidSubtype(subtype) = error.reason else {
            Issue.record("wrong reason: \(error)")
            return
        }
        let badBoundary = try #require(
            #expect(throws: MultipartError.self) { try MultipartFormData(subtype: "mixed", boundary: "bad\r\n") })
        guard case .invalidBoundary = badBoundary.reason else {
            Issue.record("wrong reason: \(badBoundary)")
            return
        }
    }

    @Test func thePartsViewShowsWhatWasAppendedAndWhatIsSent() throws {
        let fileURL = try directory.file("clip.mp4", contents: Data(count: 1_234))
        var form = MultipartFormData()
        form.append("Ada", name: "author")
        form.append(Data([1, 2, 3]), name: "say \"hi\"\r\n", fileName: "a\"b.png")
        try form.append(fileURL: fileURL, name: "video")
        form.append(length: 10, name: "log", mimeType: "text/plain") { InputStream(data: Data(count: 10)) }
        try form.append(
            headers: [
                ("Content-Disposition", #"form-data; name="quoted \"name\""; filename=notes.txt"#), ("X-Tag", "v"),
            ],
            body: Data("notes".utf8))
        try form.append(headers: [("Content-Disposition", "form-data"), ("Content-Type", "text/plain")], body: Data())

        let parts = form.parts
        #expect(parts.map(\.name) == ["author", "say \"hi\"\r\n", "video", "log", "quoted \"name\"", nil])
        #expect(parts.map(\.fileName) == [nil, "a\"b.png", "clip.mp4", nil, "notes.txt", nil])
        #expect(parts.map(\.contentType) == [nil, "image/png", "video/mp4", "text/plain", nil, "text/plain"])
        #expect(parts.map(\.length) == [3, 3, 1_234, 10, 5, 0])
        #expect(parts[1].headers.map(\.name) == ["Content-Disposition", "Content-Type"])
        #expect(parts[1].headers.first?.value == #"form-data; name="say %22hi%22%0D%0A"; filename="a%22b.png""#)
        #expect(parts[4].headers.map(\.name) == ["Content-Disposition", "X-Tag"])
        #expect(parts[4].headers.last?.value == "v")

        // The view's header lines are the ones a parser sees.
        let seen = try Peer.werkzeug.parse(try form.encode(), contentType: form.contentType)
        for (part, parsed) in zip(parts, seen) {
            #expect(part.headers.map { [$0.name, $0.value] } == parsed.headers)
        }
        #expect(MultipartFormData().parts.isEmpty)
    }

    #if !canImport(UniformTypeIdentifiers)
        // Apple platforms ask UTType first, whose answers may differ from the package's table.
        @Test(arguments: [
            ("server.cer", "application/x-x509-ca-cert"), ("ca.CRT", "application/x-x509-ca-cert"),
            ("id.p12", "application/x-pkcs12"), ("photo.HEIC", "image/heic"),
            ("no-extension", "application/octet-stream"),
            (".cer", "application/octet-stream"),
        ])
        func commonExtensionsHaveTheirTypes(fileName: String, type: String) {
            #expect(MultipartFormData.mimeType(forFileName: fileName) == type)
        }
    #endif
}
