import Foundation
import MultipartKit
import MultipartStreamTestSupport

/// vapor/multipart-kit's parser as a peer. Its `MultipartPart.name` splits the `Content-Disposition` value on `;`
/// and `=` without regard to quotes, so names holding either come back cut; the check therefore compares what the
/// parser itself produces (header values and body bytes) with what was sent, and reports the name as the raw
/// `Content-Disposition` value.
enum MultipartKitParser {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static func parse(_ body: Data, boundary: String) throws -> [FormPart] {
        let parser = MultipartParser(boundary: boundary)
        var parts: [FormPart] = []
        var headers: [(String, String)] = []
        var partBody = Data()
        parser.onHeader = { name, value in headers.append((name, value)) }
        parser.onBody = { buffer in
            partBody.append(contentsOf: buffer.readableBytesView)
            buffer.moveReaderIndex(to: buffer.writerIndex)
        }
        parser.onPartComplete = {
            func header(_ name: String) -> String? {
                headers.first { $0.0.caseInsensitiveCompare(name) == .orderedSame }?.1
            }
            parts.append(
                FormPart(name: header("Content-Disposition") ?? "", contentType: header("Content-Type"), body: partBody)
            )
            headers = []
            partBody = Data()
        }
        try parser.execute([UInt8](body))
        return parts
    }

    /// What multipart-kit reports for a part that was sent as `sent`: the `Content-Disposition` value as it went on
    /// the wire, escaped as browsers escape it.
    static func seen(_ sent: FormPart) -> FormPart {
        func escaped(_ text: String) -> String {
            text.replacingOccurrences(of: "\"", with: "%22").replacingOccurrences(of: "\r", with: "%0D")
                .replacingOccurrences(of: "\n", with: "%0A")
        }
        var disposition = "form-data; name=\"\(escaped(sent.name))\""
        if let fileName = sent.fileName { disposition += "; filename=\"\(escaped(fileName))\"" }
        return FormPart(name: disposition, contentType: sent.contentType, body: sent.body)
    }
}
