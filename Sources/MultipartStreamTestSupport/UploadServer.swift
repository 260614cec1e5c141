import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A real HTTP server on 127.0.0.1, started for one test and stopped with it: Node's `http` module (a strict
/// parser) with undici's multipart parser, or Werkzeug's own server and parser.
public final class UploadServer: @unchecked Sendable {
    // @unchecked: every property is set in `init` and only read afterwards; the process is touched again in `deinit`.
    /// Which server.
    public enum Kind: String, CaseIterable, Sendable, CustomStringConvertible {
        /// Node's `http` module, parsing with undici; routes in `Peers/upload-server.mjs`.
        case node
        /// Werkzeug's development server and multipart decoder.
        case werkzeug
        /// Node, splitting the body as it streams in and answering each part's length and SHA-256, for bodies too
        /// large to hold; `Peers/upload-sink.mjs`.
        case sink
        /// Django under gunicorn (installed from PyPI when missing), which reads only bodies with a
        /// `Content-Length`; answers ``DjangoForm``. `Peers/django_server.py`.
        case django
        /// Node counting body bytes and timing their arrival, doing nothing else; answers ``Counted``.
        /// `Peers/count-sink.mjs`, the upload benchmark's sink.
        case countSink
        /// A listener that never accepts, its backlog full, so that connecting to it hangs; `Peers/full-backlog.py`.
        case fullBacklog

        /// The server's name.
        public var description: String { rawValue }
    }

    /// What the server saw of one request.
    public struct Seen: Decodable, Sendable {
        /// The request method.
        public var method: String
        /// The `Transfer-Encoding` header.
        public var transferEncoding: String?
        /// The `Content-Length` header.
        public var contentLength: String?
        /// The `Content-Type` header.
        public var contentType: String?
        /// The `Expect` header (Node only).
        public var expect: String?
        /// The `Authorization` header (Node only).
        public var authorization: String?
        /// The `Cookie` header (Node only).
        public var cookie: String?
        /// The `Proxy-Authorization` header (Node only).
        public var proxyAuthorization: String?
        /// The `User-Agent` header (Node only).
        public var userAgent: String?
        /// The `X-Tag` header (Node only), which tests set to follow a request.
        public var tag: String?
        /// How many body bytes arrived.
        public var bytes: Int
        /// The parts, when the body parsed.
        public var parts: [FormPart]?
        /// Why the body did not parse.
        public var error: String?
    }

    /// What the counting sink saw of one request.
    public struct Counted: Decodable, Sendable {
        /// Body bytes that arrived.
        public var bytes: Int
        /// The size of the first chunk of the body that arrived.
        public var firstChunk: Int
        /// Seconds from the first chunk's arrival to the last byte's.
        public var seconds: Double
        /// The `Content-Length` header.
        public var contentLength: String?
    }

    /// What Django made of one request: `request.POST` and `request.FILES`.
    public struct DjangoForm: Decodable, Sendable {
        /// One uploaded file, as Django stored it.
        public struct File: Decodable, Equatable, Sendable {
            /// The file name.
            public var fileName: String
            /// The part's `Content-Type`.
            public var contentType: String
            /// The file's size.
            public var bytes: Int
            /// The SHA-256 of its bytes, in lowercase hex.
            public var sha256: String

            /// Creates a file description.
            public init(fileName: String, contentType: String, bytes: Int, sha256: String) {
                self.fileName = fileName
                self.contentType = contentType
                self.bytes = bytes
                self.sha256 = sha256
            }
        }

        /// The request method.
        public var method: String
        /// The `Content-Length` header.
        public var contentLength: String?
        /// The `Transfer-Encoding` header.
        public var transferEncoding: String?
        /// `request.POST`: each text field's values.
        public var fields: [String: [String]]
        /// `request.FILES`: each file field's files.
        public var files: [String: [File]]
    }

    /// One request in the Node server's log.
    public struct LoggedRequest: Decodable, Equatable, Sendable {
        /// The request path.
        public var path: String
        /// The query, with its `?`, or empty.
        public var query: String
        /// The request method.
        public var method: String
        /// How many body bytes arrived.
        public var bytes: Int
        /// The `Content-Length` header.
        public var contentLength: String?
        /// The `Transfer-Encoding` header.
        public var transferEncoding: String?
        /// The client's port: one per connection.
        public var port: Int
        /// The `Authorization` header.
        public var authorization: String?
        /// The `Cookie` header.
        public var cookie: String?
        /// The `Proxy-Authorization` header.
        public var proxyAuthorization: String?
    }

    /// Which server this is.
    public let kind: Kind
    private let base: URL
    private let peer: PeerProcess

    /// Starts the server and waits until it listens.
    public init(_ kind: Kind = .node) async throws {
        self.kind = kind
        let arguments =
            switch kind {
            case .node: ["node", peerScript("upload-server.mjs").path]
            case .werkzeug: ["python3", peerScript("parse_werkzeug.py").path, "serve"]
            case .sink: ["node", peerScript("upload-sink.mjs").path]
            case .django: ["python3", peerScript("django_server.py").path]
            case .countSink: ["node", peerScript("count-sink.mjs").path]
            case .fullBacklog: ["python3", peerScript("full-backlog.py").path]
            }
        peer = try await PeerProcess(arguments, name: kind.rawValue)
        base = URL(string: "http://127.0.0.1:\(peer.firstLine)")!
        startedAnew(at: base)
    }

    deinit {
        peer.stop()
    }

    /// The URL of `path` on this server.
    public func url(_ path: String = "/upload") -> URL {
        URL(string: path, relativeTo: base)!.absoluteURL
    }

    /// Decodes what the server answered.
    public func seen(in data: Data) throws -> Seen {
        do {
            return try JSONDecoder().decode(Seen.self, from: data)
        } catch {
            let text = String(decoding: data.prefix(300), as: UTF8.self)
            throw Peer.Failure(description: "\(kind) answered \(data.count) bytes that are not what it sees: \(text)")
        }
    }

    /// The requests the Node server has seen.
    public func log() async throws -> [LoggedRequest] {
        try JSONDecoder().decode([LoggedRequest].self, from: try fetch("/log"))
    }

    /// The path of every request whose head reached the Node server, logged before its body was read: a request
    /// whose body failed on the way counts too.
    public func heads() throws -> [String] {
        try JSONDecoder().decode([String].self, from: try fetch("/heads"))
    }

    /// How many connections the Node server has open, from clients other than the one asking.
    public func openConnections() throws -> Int {
        try JSONDecoder().decode(Int.self, from: try fetch("/connections"))
    }

    /// `path`'s answer.
    private func fetch(_ path: String) throws -> Data {
        try loopbackGet(url(path))
    }
}
