import Foundation
import MultipartForm
import MultipartStreamTestSupport
import Testing

@Suite struct BoundaryTests {
    @Test func theDefaultBoundaryHas128RandomBits() {
        let boundaries = (0..<1_000).map { _ in MultipartFormData().boundary }
        #expect(Set(boundaries).count == boundaries.count)
        for boundary in boundaries.prefix(10) {
            #expect(boundary.hasPrefix("MultipartStream-"))
            let random = boundary.dropFirst("MultipartStream-".count)
            #expect(random.count == 32)
            #expect(random.allSatisfy { $0.isHexDigit })
            #expect((try? MultipartFormData(boundary: boundary)) != nil, "the default is a valid boundary")
        }
        // Every one of the 128 bits varies across forms.
        let words = boundaries.map {
            UInt64($0.suffix(16), radix: 16)! ^ UInt64($0.dropFirst(16).prefix(16), radix: 16)!
        }
        #expect(words.reduce(0, |) == .max)
        #expect(words.reduce(.max, &) == 0)
    }

    @Test(arguments: [
        "a", "simple", String(repeating: "z", count: 70), "with space inside", "'()+_,-./:=?", "0123456789",
    ])
    func validBoundaries(boundary: String) throws {
        #expect(try MultipartFormData(boundary: boundary).boundary == boundary)
    }

    @Test(arguments: [
        "", String(repeating: "z", count: 71), "ends in space ", "quote\"", "semi;colon", "crlf\r\n", "ünïcode",
        "tab\t", "at@", "brace{",
    ])
    func invalidBoundariesAreRefused(boundary: String) throws {
        let error = try #require(#expect(throws: MultipartError.self) { try MultipartFormData(boundary: boundary) })
        guard case .invalidBoundary(boundary) = error.reason else {
            Issue.record("\(error)")
            return
        }
        #expect(error.part?.index == nil)
    }

    @Test func aTokenBoundaryIsUnquoted() throws {
        #expect(try MultipartFormData(boundary: "abc-123").contentType == "multipart/form-data; boundary=abc-123")
        #expect(MultipartFormData().contentType.hasPrefix("multipart/form-data; boundary=MultipartStream-"))
    }

    @Test(arguments: ["a b", "a:b", "a=b", "a/b", "a?b", "(a)", "a,b"])
    func aBoundaryThatIsNotATokenIsQuoted(boundary: String) throws {
        #expect(
            try MultipartFormData(boundary: boundary).contentType == "multipart/form-data; boundary=\"\(boundary)\"")
    }

    @Test func quotedBoundariesParseWithThePeers() throws {
        var form = try MultipartFormData(boundary: "a b:c=d")
        form.append("v", name: "n")
        for peer in Peer.allCases {
            #expect(try peer.parse(form.encode(), contentType: form.contentType).map(\.name) == ["n"], "\(peer)")
        }
    }
}

@Suite struct MIMETypeTests {
    private func type(of fileName: String) throws -> String? {
        var form = try MultipartFormData(boundary: "B0undary")
        form.append(Data(), name: "f", fileName: fileName)
        let body = String(decoding: try form.encode(), as: UTF8.self)
        return body.components(separatedBy: "\r\n").first { $0.hasPrefix("Content-Type: ") }?.dropFirst(14).description
    }

    @Test(arguments: [
        ("photo.jpg", "image/jpeg"), ("photo.JPEG", "image/jpeg"), ("a.png", "image/png"), ("a.gif", "image/gif"),
        ("a.heic", "image/heic"), ("a.webp", "image/webp"), ("a.svg", "image/svg+xml"), ("clip.mp4", "video/mp4"),
        ("clip.mov", "video/quicktime"), ("clip.webm", "video/webm"), ("song.mp3", "audio/mpeg"),
        ("voice.m4a", "audio/mp4"), ("a.wav", "audio/wav"), ("doc.pdf", "application/pdf"),
        ("a.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        ("a.xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"), ("notes.txt", "text/plain"),
        ("app.log", "text/plain"), ("data.json", "application/json"), ("feed.xml", "application/xml"),
        ("table.csv", "text/csv"), ("index.html", "text/html"), ("a.zip", "application/zip"),
        ("a.tar.gz", "application/gzip"), ("a.tar", "application/x-tar"), ("a.7z", "application/x-7z-compressed"),
        ("README.md", "text/markdown"), ("font.woff2", "font/woff2"),
    ])
    func commonExtensions(fileName: String, expected: String) throws {
        #expect(try type(of: fileName) == expected)
    }

    @Test(arguments: ["noextension", ".hidden", "trailingdot.", "a.unknownextension"])
    func unknownOrMissingExtensionsAreOctetStream(fileName: String) throws {
        #expect(try type(of: fileName) == "application/octet-stream")
    }

    @Test func theTableKnowsAtLeastSixtyExtensions() throws {
        let source = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../../Sources/MultipartForm/Form/MIMEType.swift").standardized,
            encoding: .utf8
        )
        let entries = source.components(separatedBy: "\": \"").count - 1
        #expect(entries >= 60)
    }
}
