import Foundation

/// The header block of one part, encoded once when the part is appended: each line `Name: value\r\n`, then `\r\n`.
package struct PartHeaders: Sendable {
    package private(set) var bytes: [UInt8] = []

    /// `Content-Disposition: form-data; name="…"[; filename="…"]`, plus `Content-Type` when there is one.
    ///
    /// Names and filenames are escaped as browsers do (WHATWG HTML, "multipart/form-data encoding"): `"` becomes
    /// `%22`, CR `%0D` and LF `%0A`; NUL, which no browser sends, becomes `%00`. Everything else, non-ASCII
    /// included, goes out as UTF-8. RFC 7578 §4.2 forbids `filename*`, so there is none. The MIME type must already
    /// be validated.
    init(name: String, fileName: String?, mimeType: String?) {
        appendLine(name: "Content-Disposition", value: Self.formDataDisposition(name: name, fileName: fileName))
        if let mimeType {
            appendLine(name: "Content-Type", value: Array(mimeType.utf8))
        }
        bytes += "\r\n".utf8
    }

    /// The header block `encoded` holds, each line checked as a caller's are; `nil` unless it is lines of
    /// `Name: value` and the check makes the same bytes again.
    package init?(encoded: [UInt8]) {
        guard encoded.count >= 2, encoded.suffix(2).elementsEqual("\r\n".utf8) else { return nil }
        var lines: [(name: String, value: String)] = []
        var rest = encoded.dropLast(2)[...]
        while !rest.isEmpty {
            guard let end = rest.indices.first(where: { rest[$0] == UInt8(ascii: "\r") }), end + 1 < rest.endIndex,
                rest[end + 1] == UInt8(ascii: "\n"),
                let line = String(validUTF8: rest[rest.startIndex..<end]),
                let colon = line.firstIndex(of: ":"), line[line.index(after: colon)...].hasPrefix(" ")
            else { return nil }
            lines.append((String(line[..<colon]), String(line[line.index(colon, offsetBy: 2)...])))
            rest = rest[(end + 2)...]
        }
        guard let checked = try? PartHeaders(validating: lines), checked.bytes == encoded else { return nil }
        self = checked
    }

    /// `form-data; name="…"[; filename="…"]`, escaped as above: the value the named appends send, and what the
    /// `multipart` command writes when a field has header lines of its own.
    package static func formDataDisposition(name: String, fileName: String?) -> [UInt8] {
        var disposition = Array("form-data; name=\"".utf8)
        appendEscaped(name, to: &disposition)
        disposition.append(UInt8(ascii: "\""))
        if let fileName {
            disposition += "; filename=\"".utf8
            appendEscaped(fileName, to: &disposition)
            disposition.append(UInt8(ascii: "\""))
        }
        return disposition
    }

    /// Caller-supplied header lines, each validated so that no value can end the line and forge another header.
    init(validating headers: [(name: String, value: String)]) throws(MultipartError.Reason) {
        for (name, value) in headers {
            guard !name.isEmpty, name.utf8.allSatisfy(Boundary.isTokenCharacter) else {
                throw .invalidHeaderName(name)
            }
            guard Self.isValidValue(value) else { throw .invalidHeaderValue(name: name, value: value) }
            appendLine(name: name, value: Array(value.utf8))
        }
        bytes += "\r\n".utf8
    }

    /// The `name` and `filename` parameters of the first `Content-Disposition` among caller-supplied header lines:
    /// tokens, or quoted strings with their `\` escapes undone; `nil` where there is none.
    static func disposition(in headers: [(name: String, value: String)]) -> (name: String?, fileName: String?) {
        guard let value = headers.first(where: { $0.name.lowercased() == "content-disposition" })?.value else {
            return (nil, nil)
        }
        enum State { case type, key, token, quoted, escaped, afterQuoted }
        var state = State.type
        var key = ""
        var parameter = ""
        var parameters: [String: String] = [:]
        func keep() {
            let key = key.trimmingCharacters(in: .whitespaces).lowercased()
            if parameters[key] == nil { parameters[key] = parameter }
        }
        for character in value {
            switch (state, character) {
            case (.type, ";"), (.key, ";"): (state, key) = (.key, "")
            case (.type, _): break
            case (.key, "="): (state, parameter) = (.token, "")
            case (.key, _): key.append(character)
            case (.token, "\"") where parameter.allSatisfy(\.isWhitespace): (state, parameter) = (.quoted, "")
            case (.token, ";"), (.afterQuoted, ";"):
                if state == .token { parameter = parameter.trimmingCharacters(in: .whitespaces) }
                keep()
                (state, key) = (.key, "")
            case (.token, _): parameter.append(character)
            case (.quoted, "\\"): state = .escaped
            case (.quoted, "\""): state = .afterQuoted
            case (.quoted, _): parameter.append(character)
            case (.escaped, _): (state, parameter) = (.quoted, parameter + String(character))
            case (.afterQuoted, _): break
            }
        }
        if state == .token { parameter = parameter.trimmingCharacters(in: .whitespaces) }
        if state == .token || state == .afterQuoted { keep() }
        return (parameters["name"], parameters["filename"])
    }

    /// The header lines, decoded from ``bytes``; values hold no CR or LF, so each line splits cleanly.
    var lines: [(name: String, value: String)] {
        var lines: [(name: String, value: String)] = []
        var rest = bytes[...]
        while let cr = rest.firstIndex(of: UInt8(ascii: "\r")), cr != rest.startIndex {
            let line = rest[..<cr]
            let colon = line.firstIndex(of: UInt8(ascii: ":")) ?? line.endIndex
            let valueStart = min(colon + 2, line.endIndex)
            lines.append(
                (String(decoding: line[..<colon], as: UTF8.self), String(decoding: line[valueStart...], as: UTF8.self)))
            rest = rest[(cr + 2)...]
        }
        return lines
    }

    /// A header value may hold any byte but the controls (horizontal tab aside): CR and LF would start a new
    /// header line or end the block, and NUL truncates values in C servers. Also the `multipart` command's check of
    /// `-H` values.
    package static func isValidValue(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
    }

    private mutating func appendLine(name: String, value: [UInt8]) {
        bytes += name.utf8
        bytes += ": ".utf8
        bytes += value
        bytes += "\r\n".utf8
    }

    private static func appendEscaped(_ string: String, to output: inout [UInt8]) {
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output += "%22".utf8
            case UInt8(ascii: "\r"): output += "%0D".utf8
            case UInt8(ascii: "\n"): output += "%0A".utf8
            // Not in the WHATWG rule (browsers cannot send it), but NUL ends strings in C servers.
            case 0: output += "%00".utf8
            default: output.append(byte)
            }
        }
    }
}
