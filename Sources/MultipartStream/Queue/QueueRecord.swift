import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One queued upload as its file in the queue's directory holds it: what rebuilds the form byte for byte and the
/// request without credentials, and how far the upload got. Written whole to a temporary file, flushed, and renamed
/// over the last version, so that a kill at any moment leaves the last whole record.
struct QueueRecord: Codable, Sendable {
    /// The record's format, for a later version to read an older one.
    var format = 1
    var id: String
    /// The caller's key for the upload: an add with a key already in the queue adds nothing. `nil` for none.
    var key: String?
    /// Whether the caller paused the upload: it stays as it is, in every process, until resumed. `nil` for not.
    var paused: Bool?
    /// Where the caller moved the upload: the highest goes first, then the rest in ``sequence``'s order. `nil` for
    /// never moved.
    var priority: Int?
    /// The upload's place in the queue: uploads go in this order.
    var sequence: Int
    var added: Date
    var request: Request
    var form: Form
    var contentLength: UInt64
    var outcome: Outcome?
    /// Runs that started the upload: one that finds it started before may resume it, or send it again.
    var starts = 0
    /// Times the form went again from its first byte after a run that started it ended unfinished (the server
    /// forgot the upload, or does not speak the resumable draft, or took it whole before): the server may have it
    /// more than once. Written before the form goes again.
    var sentAgain = 0
    /// When a run last began to send the form whole, in one request (a server without the resumable draft): written
    /// before the request goes, so that a later run that sends the form again, in any way, counts it in
    /// ``sentAgain`` even when the run that sent it whole was killed before its answer. `nil` for never.
    var sentWhole: Date?
    /// Times a retry sent the form with a file as it is now, not as it was added: each is another form for the
    /// server, created under an `Idempotency-Key` of its own, or a server that honours keys would answer the new
    /// creation with the old upload (deleted, or holding the old file's bytes). `nil` for never.
    var generation: Int?

    /// The `Idempotency-Key` of the upload's creations and whole sends: the same for every resend of one form, in
    /// every process, and another once a retry changed the form.
    var idempotencyKey: String { generation.map { "\(id)-\($0)" } ?? id }

    /// The paths of the form's file parts, in order.
    var files: [URL] { form.parts.compactMap { $0.file.map { URL(fileURLWithPath: $0) } } }

    /// The request, as URLSession would send it, without any credential.
    struct Request: Codable, Sendable {
        var url: URL
        var method: String
        /// Header lines in order: name, value.
        var headers: [[String]]
        var timeout: Double

        init(_ request: URLRequest) throws(MultipartError) {
            guard let url = request.url else { throw MultipartError(.credentialNotQueued("no URL")) }
            if url.user != nil || url.password != nil {
                throw MultipartError(.credentialNotQueued("a user and password in its URL"))
            }
            let fields = request.allHTTPHeaderFields ?? [:]
            for name in ["Authorization", "Cookie", "Proxy-Authorization"]
            where fields.keys.contains(where: { $0.caseInsensitiveCompare(name) == .orderedSame }) {
                throw MultipartError(.credentialNotQueued(name))
            }
            self.url = url
            method = request.httpMethod ?? "POST"
            headers = fields.sorted { $0.key < $1.key }.map { [$0.key, $0.value] }
            timeout = request.timeoutInterval
        }

        var urlRequest: URLRequest {
            var request = URLRequest(url: url, timeoutInterval: timeout)
            request.httpMethod = method
            for pair in headers where pair.count == 2 { request.setValue(pair[1], forHTTPHeaderField: pair[0]) }
            return request
        }
    }

    /// The form: its subtype, boundary, and each part's header block and body.
    struct Form: Codable, Sendable {
        var subtype: String
        var boundary: String
        var parts: [Part]

        struct Part: Codable, Sendable {
            var name: String?
            var fileName: String?
            /// The part's header block, as it goes out.
            var headers: Data
            /// Its bytes, for a field or data part.
            var bytes: Data?
            /// Its file's path, for a file part, and the file's identity when it was appended: a file changed since
            /// fails the upload, naming the part.
            var file: String?
            var identity: FileIdentity?
        }

        init(_ form: MultipartFormData) throws(MultipartError) {
            subtype = form.subtype
            boundary = form.boundary
            parts = []
            for (index, part) in form.bodyParts.enumerated() {
                var stored = Part(name: part.name, fileName: part.fileName, headers: Data(part.headers.bytes))
                switch part.body {
                case .bytes(let data): stored.bytes = data
                case .file(let url, let identity): (stored.file, stored.identity) = (url.path, identity)
                case .stream, .streamFactory:
                    throw MultipartError(.streamNotQueued, partIndex: index, partName: part.name)
                }
                parts.append(stored)
            }
        }

        /// The form again, byte for byte; `nil` where the record does not make one.
        func rebuilt() throws(MultipartError) -> MultipartFormData? {
            var bodyParts: [BodyPart] = []
            for part in parts {
                guard let headers = PartHeaders(encoded: Array(part.headers)) else { return nil }
                let body: BodyPart.Body
                if let bytes = part.bytes, part.file == nil {
                    body = .bytes(bytes)
                } else if let path = part.file, let identity = part.identity, part.bytes == nil {
                    body = .file(URL(fileURLWithPath: path), identity)
                } else {
                    return nil
                }
                bodyParts.append(BodyPart(name: part.name, fileName: part.fileName, headers: headers, body: body))
            }
            return try MultipartFormData(rebuilding: subtype, boundary: boundary, parts: bodyParts)
        }
    }

    /// How the upload ended.
    enum Outcome: Codable, Sendable {
        case completed(Answer)
        case failed(reason: String)
    }

    /// The server's answer to a completed upload: status, headers and the start of its body; no status when the
    /// answer was lost with the connection and the server said it holds the whole form.
    struct Answer: Codable, Sendable {
        var statusCode: Int?
        var headers: [String: String]
        var body: Data
    }
}

extension QueueRecord {
    /// The record's file name: its place in the queue, then its ID, so that a listing in name order is the queue's.
    var fileName: String { Self.fileName(sequence: sequence, id: id) }

    static func fileName(sequence: Int, id: String) -> String { String(format: "%012d-", sequence) + id + ".json" }

    /// Why a record file cannot be read.
    struct Damage: Error {
        var reason: String
    }

    /// What the queue's schedule needs of an upload, which its record's first line holds, so that a queue of a
    /// hundred thousand opens without reading a form: the rest of the file is the record whole.
    struct Summary: Equatable, Sendable {
        var id: String
        var sequence: Int
        var key: String?
        var priority: Int?
        var contentLength: UInt64
        /// The URL its requests go to, as written.
        var url: String
        var standing: Standing

        /// Where the upload stands on disk.
        enum Standing: Equatable, Sendable {
            case pending, paused, completed
            case failed(reason: String)
        }

        var fileName: String { QueueRecord.fileName(sequence: sequence, id: id) }
    }

    var summary: Summary {
        let standing: Summary.Standing =
            switch outcome {
            case .completed?: .completed
            case .failed(let reason)?: .failed(reason: reason)
            case nil: paused == true ? .paused : .pending
            }
        return Summary(
            id: id, sequence: sequence, key: key, priority: priority, contentLength: contentLength,
            url: request.url.absoluteString, standing: standing)
    }

    /// The record as its file holds it: the summary line, then the record whole in JSON.
    func encoded() throws(MultipartError) -> Data {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        guard let body = try? encoder.encode(self) else {
            throw MultipartError(.stateUnwritable(URL(fileURLWithPath: fileName), errno: EINVAL))
        }
        return Data((summary.line + "\n").utf8) + body
    }

    /// The record a file holds whole, checked against its name; one of an earlier version, which has no summary
    /// line, too.
    static func decoded(_ data: Data, name: String) throws(Damage) -> QueueRecord {
        let body: Data
        var summary: Summary?
        if data.first == UInt8(ascii: "{") {
            body = data
        } else {
            guard let end = data.firstIndex(of: UInt8(ascii: "\n")) else {
                throw Damage(reason: "it is not a whole queue record")
            }
            summary = Summary(line: data[..<end])
            guard summary != nil else { throw Damage(reason: "its first line is not a record's summary") }
            body = data[(end + 1)...]
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        guard let record = try? decoder.decode(QueueRecord.self, from: body) else {
            throw Damage(reason: "it is not a whole queue record")
        }
        guard record.format == 1, record.fileName == name else {
            throw Damage(reason: "it is not a record this version reads, or not under its own name")
        }
        if let summary, summary != record.summary {
            throw Damage(reason: "its summary line says other than the record")
        }
        return record
    }
}

extension QueueRecord.Summary {
    /// The line's first field: what the file is, and the layout's version.
    private static let magic = "multipart-queue-record/2"

    /// The summary as a record's first line: tab-separated fields, each string with `%`, tab, CR and LF
    /// percent-encoded.
    var line: String {
        let state =
            switch standing {
            case .pending: "pending"
            case .paused: "paused"
            case .completed: "completed"
            case .failed(let reason): "failed:" + Self.escaped(reason)
            }
        return [
            Self.magic, String(sequence), Self.escaped(id), state, priority.map(String.init) ?? "",
            String(contentLength), Self.escaped(url), key.map { "=" + Self.escaped($0) } ?? "",
        ].joined(separator: "\t")
    }

    /// The summary a record's first line holds; `nil` for a line that is not one.
    init?(line: Data) {
        let fields = line.split(separator: UInt8(ascii: "\t"), omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
        guard fields.count == 8, fields[0] == Self.magic, let sequence = Int(fields[1]), sequence >= 0,
            let id = Self.unescaped(fields[2]), let length = UInt64(fields[5]), let url = Self.unescaped(fields[6])
        else { return nil }
        let standing: Standing
        switch fields[3] {
        case "pending": standing = .pending
        case "paused": standing = .paused
        case "completed": standing = .completed
        case let failed where failed.hasPrefix("failed:"):
            guard let reason = Self.unescaped(String(failed.dropFirst("failed:".count))) else { return nil }
            standing = .failed(reason: reason)
        default: return nil
        }
        var priority: Int?
        if !fields[4].isEmpty {
            guard let value = Int(fields[4]) else { return nil }
            priority = value
        }
        var key: String?
        if !fields[7].isEmpty {
            guard fields[7].hasPrefix("="), let value = Self.unescaped(String(fields[7].dropFirst())) else {
                return nil
            }
            key = value
        }
        self.init(
            id: id, sequence: sequence, key: key, priority: priority, contentLength: length, url: url,
            standing: standing)
    }

    static func escaped(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 0x25 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) else { return text }
        var bytes: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case 0x25, 0x09, 0x0A, 0x0D: bytes += Array(String(format: "%%%02X", byte).utf8)
            default: bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The text `escaped` made; `nil` for a `%` not followed by two hexadecimal digits.
    static func unescaped(_ text: String) -> String? {
        guard text.utf8.contains(0x25) else { return text }
        var bytes: [UInt8] = []
        var rest = text.utf8[...]
        while let byte = rest.popFirst() {
            guard byte == 0x25 else {
                bytes.append(byte)
                continue
            }
            guard rest.count >= 2, let value = UInt8(String(decoding: rest.prefix(2), as: UTF8.self), radix: 16)
            else { return nil }
            bytes.append(value)
            rest = rest.dropFirst(2)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
