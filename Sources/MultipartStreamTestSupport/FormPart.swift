import Foundation

/// One part of a form: what was sent, or what a parser saw.
public struct FormPart: Codable, Equatable, Sendable, CustomStringConvertible {
    /// The field name.
    public var name: String
    /// The file name, for a file part.
    public var fileName: String?
    /// The `Content-Type` of the part.
    public var contentType: String?
    /// The body bytes.
    public var body: Data
    /// Every header line as `[name, value]`, in order, when the parser reports them (Werkzeug does); not compared
    /// by `==`.
    public var headers: [[String]]?

    /// Creates a part.
    public init(name: String, fileName: String? = nil, contentType: String? = nil, body: Data) {
        self.name = name
        self.fileName = fileName
        self.contentType = contentType
        self.body = body
    }

    /// Name, file name, content type and body are equal; ``headers`` are not compared.
    public static func == (lhs: FormPart, rhs: FormPart) -> Bool {
        (lhs.name, lhs.fileName, lhs.contentType, lhs.body) == (rhs.name, rhs.fileName, rhs.contentType, rhs.body)
    }

    /// The part in one line, without its body.
    public var description: String {
        "\(name.debugDescription) file=\(fileName?.debugDescription ?? "nil") type=\(contentType ?? "nil") "
            + "\(body.count) bytes"
    }
}

extension FormPart {
    /// The part as `peer` reports it, when `self` is what was sent. Node follows browsers exactly: it reads a field
    /// (no filename) as text and keeps only a file's `Content-Type`. Werkzeug decodes `%22` but leaves `%0D` and
    /// `%0A` as they are.
    public func seen(by peer: Peer) -> FormPart {
        switch peer {
        case .node:
            // A part without a filename is a field, whose value the Fetch standard decodes as UTF-8.
            guard let fileName else {
                return FormPart(name: name, body: Data(String(decoding: body, as: UTF8.self).utf8))
            }
            return FormPart(name: name, fileName: fileName, contentType: contentType ?? "", body: body)
        case .werkzeug:
            func werkzeug(_ text: String) -> String {
                text.replacingOccurrences(of: "\r", with: "%0D").replacingOccurrences(of: "\n", with: "%0A")
            }
            return FormPart(
                name: werkzeug(name), fileName: fileName.map(werkzeug), contentType: contentType, body: body)
        }
    }
}
