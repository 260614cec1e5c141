import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One queued upload as the queue's database holds it: what rebuilds the form byte for byte and the request without
/// credentials, written once as it is added, and how far the upload got and what the caller asked of it (``State``),
/// in columns of its own that a send's start and end change without reading or writing the form. Each write is one
/// transaction, so that a kill at any moment leaves the last whole record.
struct QueueRecord: Codable, Sendable {
    /// What the add fixed, in the record's JSON; ``State`` lives in columns of its own.
    private enum CodingKeys: String, CodingKey {
        case format, id, key, sequence, added, request, form, contentLength
    }

    /// The record's format, for a later version to read an older one.
    var format = 1
    var id: String
    /// The caller's key for the upload: an add with a key already in the queue adds nothing. `nil` for none.
    var key: String?
    /// The upload's place in the queue: uploads go in this order.
    var sequence: Int
    var added: Date
    var request: Request
    var form: Form
    var contentLength: UInt64
    /// How far the upload got, and what the caller asked of it.
    var state = State()

    /// The `Idempotency-Key` of the upload's creations and whole sends: the same for every resend of one form, in
    /// every process, and another once a retry changed the form.
    var idempotencyKey: String { state.generation.map { "\(id)-\($0)" } ?? id }

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
            for name in CredentialHeaders.names
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
            /// How many of the record's bytes are this part's, where they are kept apart from its JSON (see
            /// ``QueueRecord/encoded()``); `nil` in a record in memory.
            var byteCount: Int?
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

    /// What changes as the upload goes and the caller steers it: all a send's start and end, a pause, a move or a
    /// retry of the same form write.
    struct State: Equatable, Sendable {
        /// Whether the caller paused the upload: it stays as it is, in every process, until resumed. `nil` for not.
        var paused: Bool?
        /// The process that is sending the upload, written as its send starts and taken away as it ends: another
        /// process's listing says so. A kill leaves it, naming a process that is gone. `nil` for none.
        var runner: Int32?
        /// Whether another process asked for the upload's removal while this one ran the queue: the run stops it and
        /// removes it, as its own ``MultipartUploadQueue/remove(_:on:headers:)`` would. `nil` for not.
        var removing: Bool?
        /// Where the caller moved the upload: the highest goes first, then the rest in ``QueueRecord/sequence``'s order. `nil` for
        /// never moved.
        var priority: Int?
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
    }

    /// How the upload ended.
    enum Outcome: Sendable, Equatable {
        case completed(Answer)
        case failed(MultipartUploadQueue.Failure)
    }

    /// The server's answer to a completed upload: status, headers and the start of its body; no status when the
    /// answer was lost with the connection and the server said it holds the whole form.
    struct Answer: Sendable, Equatable {
        var statusCode: Int?
        var headers: [String: String]
        var body: Data
    }
}

extension QueueRecord {
    /// Why a record cannot be read.
    struct Damage: Error {
        var reason: String
        /// Whether the record is not there at all: another process removed it.
        var gone = false
    }

    /// What the queue's schedule needs of an upload, which the store keeps in columns of its own beside the record,
    /// so that a queue of a hundred thousand opens without reading a form.
    struct Summary: Equatable, Sendable {
        var id: String
        var sequence: Int
        var key: String?
        var priority: Int?
        var contentLength: UInt64
        /// The URL its requests go to, as written.
        var url: String
        var standing: UploadStanding
    }

    var summary: Summary {
        Summary(
            id: id, sequence: sequence, key: key, priority: state.priority, contentLength: contentLength,
            url: request.url.absoluteString, standing: UploadStanding(state))
    }

    /// What the add fixed (``State`` is apart): in JSON, but for the bytes of its field and data parts, which go one
    /// after another in a blob of their own, as they are. A form's bytes in JSON would be base64 strings, a third
    /// larger, that the encoder escapes a character at a time.
    func encoded() throws(MultipartError) -> (json: Data, bytes: Data) {
        var record = self
        var bytes = Data()
        for place in record.form.parts.indices {
            guard let part = record.form.parts[place].bytes else { continue }
            bytes.append(part)
            (record.form.parts[place].bytes, record.form.parts[place].byteCount) = (nil, part.count)
        }
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        guard let json = try? encoder.encode(record) else {
            throw MultipartError(.stateUnwritable(URL(fileURLWithPath: id), errno: EINVAL))
        }
        return (json, bytes)
    }

    /// The record that `json` and `bytes` hold (``encoded()``), checked against its ID.
    static func decoded(_ json: Data, bytes: Data, id: String) throws(Damage) -> QueueRecord {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        guard var record = try? decoder.decode(QueueRecord.self, from: json) else {
            throw Damage(reason: "it is not a whole queue record")
        }
        var start = bytes.startIndex
        for place in record.form.parts.indices {
            guard let count = record.form.parts[place].byteCount else { continue }
            guard count >= 0, count <= bytes.endIndex - start, record.form.parts[place].bytes == nil else {
                throw Damage(reason: "its parts' bytes are not all there")
            }
            (record.form.parts[place].bytes, record.form.parts[place].byteCount) = (bytes[start..<start + count], nil)
            start += count
        }
        guard start == bytes.endIndex else { throw Damage(reason: "it holds bytes that are no part's") }
        guard record.format == 1, record.id == id else {
            throw Damage(reason: "it is not a record this version reads, or not under its own ID")
        }
        return record
    }
}
