import Foundation
import MultipartForm
import MultipartStreamTestSupport
import Testing

/// Independent parsers read what the engine produces, so a byte-exact test cannot hide a format mistake.
@Suite struct PeerParsingTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    private func expectParsed(
        _ form: MultipartFormData,
        as expected: [FormPart],
        by peer: Peer,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let parsed = try peer.parse(form.streamedBody(), contentType: form.contentType)
        #expect(parsed == expected.map { $0.seen(by: peer) }, "\(peer)", sourceLocation: sourceLocation)
    }

    @Test(arguments: Peer.allCases)
    func anEmptyFormIsAFormWithNoFields(peer: Peer) throws {
        try expectParsed(MultipartFormData(), as: [], by: peer)
    }

    @Test(arguments: Peer.allCases)
    func everyAppendVariant(peer: Peer) throws {
        let fileBody = Data((0...255).map { UInt8($0) })
        let fileURL = try directory.file("bytes.bin", contents: fileBody)
        let photoURL = try directory.file("photo.jpg", contents: Data("not really a jpeg".utf8))
        var form = MultipartFormData()
        form.append("Ada Lovelace", name: "author")
        form.append("", name: "empty")
        form.append(Data("{\"a\":1}".utf8), name: "json", mimeType: "application/json")
        form.append(Data([0, 13, 10, 45, 45]), name: "raw", fileName: "raw.dat")
        try form.append(fileURL: fileURL, name: "file")
        try form.append(fileURL: photoURL, name: "photo", fileName: "cat.png", mimeType: "image/png")
        form.append(InputStream(data: Data("one shot".utf8)), length: 8, name: "once", fileName: "once.txt")
        form.append(length: 3, name: "replayable", fileName: "r.csv") { InputStream(data: Data("a,b".utf8)) }
        try form.append(
            headers: [
                (name: "Content-Disposition", value: "form-data; name=\"custom\""),
                (name: "Content-Type", value: "text/plain"),
            ],
            body: Data("custom body".utf8)
        )
        try expectParsed(
            form,
            as: [
                FormPart(name: "author", body: Data("Ada Lovelace".utf8)),
                FormPart(name: "empty", body: Data()),
                FormPart(name: "json", contentType: "application/json", body: Data("{\"a\":1}".utf8)),
                FormPart(
                    name: "raw", fileName: "raw.dat", contentType: "application/octet-stream",
                    body: Data([0, 13, 10, 45, 45])),
                FormPart(name: "file", fileName: "bytes.bin", contentType: "application/octet-stream", body: fileBody),
                FormPart(
                    name: "photo", fileName: "cat.png", contentType: "image/png", body: Data("not really a jpeg".utf8)),
                FormPart(name: "once", fileName: "once.txt", contentType: "text/plain", body: Data("one shot".utf8)),
                FormPart(name: "replayable", fileName: "r.csv", contentType: "text/csv", body: Data("a,b".utf8)),
                FormPart(name: "custom", contentType: "text/plain", body: Data("custom body".utf8)),
            ],
            by: peer
        )
    }

    @Test(arguments: Peer.allCases)
    func hostileAndNonASCIINames(peer: Peer) throws {
        var form = MultipartFormData()
        var expected: [FormPart] = []
        for name in ["quote\"d", "cr\rlf\n", "crlf\r\nX-Injected: 1", "100%", "größe", "名前", "😀👩‍👩‍👧", "semi;colon=1", ""] {
            form.append(Data("v".utf8), name: name, fileName: "\(name)-file.txt")
            expected.append(
                FormPart(name: name, fileName: "\(name)-file.txt", contentType: "text/plain", body: Data("v".utf8)))
        }
        try expectParsed(form, as: expected, by: peer)
    }

    /// Browsers send a backslash as it is, and Node reads it so; Werkzeug reads `\\` in a quoted name as one
    /// backslash, as RFC 2616's quoted-string did, and so differs from browsers there too.
    @Test func backslashesInNamesFollowBrowsers() throws {
        var form = MultipartFormData()
        form.append("v", name: "a\\b\\\\c\\")
        #expect(try Peer.node.parse(form.encode(), contentType: form.contentType).map(\.name) == ["a\\b\\\\c\\"])
    }

    @Test func randomFormsParseToWhatWasSent() throws {
        let seed = UInt64.random(in: .min ... .max)
        var generator = SeededGenerator(seed: seed)
        for peer in Peer.allCases {
            var forms: [RandomForm] = []
            var bodies: [(body: Data, contentType: String)] = []
            for _ in 0..<100 {
                let random = try RandomForm(using: &generator, in: directory, backslashes: peer != .werkzeug)
                forms.append(random)
                bodies.append(
                    (
                        try random.form.streamedBody(readSize: Int.random(in: 1...70_000, using: &generator)),
                        random.form.contentType
                    ))
            }
            for (index, (random, result)) in zip(forms, try peer.parse(bodies)).enumerated() {
                let expected = random.expected.map { $0.seen(by: peer) }
                switch result {
                case .success(let parsed):
                    #expect(parsed == expected, "\(peer), seed \(seed), form \(index)")
                case .failure(let failure):
                    Issue.record("\(failure), seed \(seed), form \(index)")
                }
            }
        }
    }
}

/// What the peers do with a body that holds the boundary text but not the delimiter (`CRLF--boundary`): valid
/// RFC 2046, which only forbids the delimiter. Werkzeug parses it; Node 20's undici searches for the bare boundary
/// text, finds it inside the body and rejects the whole form. So a form never sends its boundary's text: a random
/// boundary is drawn again, a chosen one refuses the part (`HostileInputTests`).
@Suite struct BoundaryTextInBodyTests {
    @Test func werkzeugAcceptsAndNodeRejectsTheBoundaryTextInsideABody() throws {
        let body = Data(
            "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\ntext--XyZ--more\r\n--XyZ--\r\n".utf8)
        let contentType = "multipart/form-data; boundary=XyZ"
        #expect(
            try Peer.werkzeug.parse(body, contentType: contentType) == [
                FormPart(name: "a", body: Data("text--XyZ--more".utf8))
            ])
        #expect(throws: Peer.Failure.self) { try Peer.node.parse(body, contentType: contentType) }
    }
}
