import Foundation
import MultipartStream

/// A form of random parts of every kind, with what each part should look like once parsed.
public struct RandomForm {
    /// The form.
    public var form: MultipartFormData
    /// Its parts as appended, in order.
    public var expected: [FormPart]

    /// Characters names and filenames are drawn from: quotes, CR, LF, `%`, separators, non-ASCII and emoji.
    public static let hostileCharacters: [String] = [
        "a", "b", "Z", "0", "7", " ", "\"", "\r", "\n", "%", "\\", ";", "=", ":", "/", ",", "-", "_", ".", "é", "ß",
        "東", "😀", "👩‍👩‍👧", "\t",
    ]

    /// Draws 0 to `maxParts` parts of every kind (text, data, file, one-shot and replayable streams).
    ///
    /// - Parameter backslashes: Werkzeug reads a backslash in a quoted name as an escape, as RFC 2616 did, where
    ///   browsers and Node send and read it literally; forms for Werkzeug leave it out.
    public init(
        using generator: inout SeededGenerator,
        in directory: TemporaryDirectory,
        maxParts: Int = 12,
        maxBodyLength: Int = 3_000,
        backslashes: Bool = true
    ) throws {
        form = MultipartFormData()
        expected = []
        let partCount = Int.random(in: 0...maxParts, using: &generator)
        for index in 0..<partCount {
            let name = Self.randomText(using: &generator, backslashes: backslashes)
            let body = Data(Self.randomBody(boundary: form.boundary, maxLength: maxBodyLength, using: &generator))
            let fileName =
                Bool.random(using: &generator)
                ? Self.randomText(using: &generator, backslashes: backslashes, minLength: 1) : nil
            let mimeType =
                Bool.random(using: &generator)
                ? ["text/plain", "image/png", "application/json", "application/octet-stream", "video/mp4"]
                    .randomElement(using: &generator)
                : nil
            // A file part's type is the one given, else the one of its file name's extension.
            let fileType = mimeType ?? fileName.map(MultipartFormData.mimeType(forFileName:))
            switch Int.random(in: 0..<5, using: &generator) {
            case 0:
                let text = String(decoding: body, as: UTF8.self)
                form.append(text, name: name)
                expected.append(FormPart(name: name, body: Data(text.utf8)))
            case 1:
                form.append(body, name: name, fileName: fileName, mimeType: mimeType)
                expected.append(FormPart(name: name, fileName: fileName, contentType: fileType, body: body))
            case 2:
                let fileURL = try directory.file("part-\(index)-\(UUID().uuidString).bin", contents: body)
                try form.append(fileURL: fileURL, name: name, fileName: fileName, mimeType: mimeType)
                let sentName = fileName ?? fileURL.lastPathComponent
                let type = mimeType ?? MultipartFormData.mimeType(forFileName: sentName)
                expected.append(FormPart(name: name, fileName: sentName, contentType: type, body: body))
            case 3:
                let stream = InputStream(data: body)
                form.append(stream, length: UInt64(body.count), name: name, fileName: fileName, mimeType: mimeType)
                expected.append(FormPart(name: name, fileName: fileName, contentType: fileType, body: body))
            default:
                form.append(length: UInt64(body.count), name: name, fileName: fileName, mimeType: mimeType) {
                    InputStream(data: body)
                }
                expected.append(FormPart(name: name, fileName: fileName, contentType: fileType, body: body))
            }
        }
    }

    /// A name or filename. Browsers, and so parsers, read `%22`, `%0D` and `%0A` as escapes, so a name that holds
    /// one of those texts cannot round-trip anywhere; such names are drawn again.
    public static func randomText(using generator: inout SeededGenerator, backslashes: Bool, minLength: Int = 0)
        -> String
    {
        let characters = backslashes ? hostileCharacters : hostileCharacters.filter { $0 != "\\" }
        while true {
            let length = Int.random(in: minLength...12, using: &generator)
            let text = (0..<length).map { _ in characters.randomElement(using: &generator)! }.joined()
            let lowered = text.lowercased()
            if !["%22", "%0d", "%0a"].contains(where: lowered.contains) { return text }
        }
    }

    /// Random bytes, CRLF runs and near-delimiters: the delimiter `\r\n--boundary` with a character changed or missing,
    /// a dash missing, or without its CRLF. None is a delimiter, so parsers must not split there. None holds the whole
    /// boundary either: RFC 2046 allows that, but Node 20's undici finds the boundary text anywhere and then fails.
    public static func randomBody(boundary: String, maxLength: Int, using generator: inout SeededGenerator) -> [UInt8] {
        let length = Int.random(in: 0...maxLength, using: &generator)
        var body: [UInt8] = []
        while body.count < length {
            switch Int.random(in: 0..<6, using: &generator) {
            case 0: body += "\r\n\r\n\r\n".utf8
            case 1: body += "\r\n--\(boundary.dropLast())!".utf8
            case 2: body += "\r\n-\(boundary.dropLast())--\r\n".utf8
            case 3: body += "x--\(boundary.dropFirst())--\r\n--\(boundary.prefix(10))\r\n".utf8
            default: body += [UInt8].random(count: Int.random(in: 1...64, using: &generator), using: &generator)
            }
        }
        return Array(body.prefix(length))
    }
}
