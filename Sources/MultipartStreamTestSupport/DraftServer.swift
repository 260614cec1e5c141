import Foundation

/// A scripted server of the resumable-upload draft on 127.0.0.1 (`Peers/draft-server.py`), started for one test and
/// stopped with it: it answers in the ways the draft allows and `NIOResumableUpload` never does, one scenario per
/// upload, chosen by the URL the upload starts from.
public final class DraftServer: @unchecked Sendable {
    // @unchecked: every property is set in `init` and only read afterwards; the process is touched again in `deinit`.

    /// One request the server saw.
    public struct Request: Decodable, Equatable, Sendable {
        /// The request method.
        public var method: String
        /// The path, from the server's root.
        public var path: String
        /// The port it came in on: ``port``, or ``alternatePort`` (another origin).
        public var port: Int
        /// The `Authorization` header.
        public var authorization: String?
        /// The `Cookie` header.
        public var cookie: String?
        /// `Upload-Offset`.
        public var offset: String?
        /// `Upload-Complete`.
        public var complete: String?
        /// `Upload-Draft-Interop-Version`.
        public var version: String?
        /// Body bytes the server read.
        public var bytes: Int
        /// `Upload-Length`.
        public var length: String?
        /// `Idempotency-Key`.
        public var idempotency: String?
        /// `104 (Upload Resumption Supported)` interim answers it got before its final one.
        public var interims: Int
        /// The scenario of its start URL or of its upload.
        public var scenario: String?
        /// Its answer's status: 0 where the server dropped the connection instead, `nil` where no answer went out.
        public var status: Int?
    }

    /// A form the application processed.
    public struct Form: Decodable, Equatable, Sendable {
        /// Its length.
        public var bytes: Int
        /// Its SHA-256, in hex.
        public var sha256: String

        /// A form of `bytes` bytes whose SHA-256 is `sha256`.
        public init(bytes: Int, sha256: String) {
            self.bytes = bytes
            self.sha256 = sha256
        }
    }

    /// The port the uploads start from.
    public let port: Int
    /// A second port of the same server: another origin, where the `other-origin` scenario puts its uploads.
    public let alternatePort: Int
    private let peer: PeerProcess

    /// Starts the server, speaking the draft's interop `version` only (the newest the client speaks when `nil`),
    /// and waits until it listens.
    public convenience init(version: Int? = nil) async throws {
        try await self.init(versions: version.map { [$0] } ?? [])
    }

    /// Starts the server, speaking each of the draft's interop `versions` (`[6, 10]`, as the draft's editor's example
    /// middleware does; the newest the client speaks when empty), and waits until it listens. `namingOnRefusal`
    /// refuses a request in any other version with a 400 that names the newest of them, as SwiftNIO's
    /// `NIOResumableUpload` refuses a client newer than itself.
    public init(versions: [Int], namingOnRefusal: Bool = false) async throws {
        let script = peerScript("draft-server.py").path
        let named = versions.isEmpty ? ["10"] : [versions.map(String.init).joined(separator: ",")]
        let refusal = namingOnRefusal ? ["--name-on-refusal"] : []
        peer = try await PeerProcess(["python3", script] + named + refusal, name: "draft")
        let ports = peer.firstLine.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard ports.count == 2 else { throw Peer.Failure(description: "the draft server printed no ports") }
        (port, alternatePort) = (ports[0], ports[1])
        startedAnew(at: url())
        startedAnew(at: URL(string: "http://127.0.0.1:\(alternatePort)/")!)
    }

    deinit {
        peer.stop()
    }

    /// The URL an upload of `scenario` starts from (see `Peers/draft-server.py`).
    public func url(scenario: String = "default") -> URL {
        URL(string: "http://127.0.0.1:\(port)/s/\(scenario)")!
    }

    /// Every request so far, in order.
    public func log() throws -> [Request] {
        try JSONDecoder().decode([Request].self, from: fetch("/log"))
    }

    /// The forms the application processed so far.
    public func forms() throws -> [Form] {
        try JSONDecoder().decode([Form].self, from: fetch("/forms"))
    }

    /// An answer the application of the `chaos` scenario gave.
    public struct ApplicationAnswer: Decodable, Equatable, Sendable {
        /// The scenario it was given in (`chaos-SEED-TAG`).
        public var tag: String
        /// The SHA-256 of the form it processed, in hex; empty for a refusal of a form it never processed.
        public var sha256: String
        /// Its status; 0 where the form was processed and the answer dropped with the connection.
        public var status: Int
    }

    /// The answers the application of the `chaos` scenario gave so far.
    public func answers() throws -> [ApplicationAnswer] {
        try JSONDecoder().decode([ApplicationAnswer].self, from: fetch("/answers"))
    }

    /// The most uploads that had an append being read at once, so far.
    public func mostInFlight() throws -> Int {
        struct InFlight: Decodable { var most: Int }
        return try JSONDecoder().decode(InFlight.self, from: fetch("/in-flight")).most
    }

    /// What one answer of the `huge-500` scenario put on the wire.
    public struct HugeAnswer: Decodable, Sendable {
        /// Body bytes written before the end, or before the client hung up.
        public var bytes: Int
        /// Whether the client hung up before the body's end.
        public var hungUp: Bool
    }

    /// The `huge-500` scenario's answers so far.
    public func hugeAnswers() throws -> [HugeAnswer] {
        try JSONDecoder().decode([HugeAnswer].self, from: fetch("/huge"))
    }

    /// Refuses connections to ``port`` (`false`), keeping every upload, or takes them again (`true`).
    public func setListening(_ listening: Bool) throws {
        _ = try fetch(listening ? "/up" : "/down")
    }

    /// Has the `hostile` scenario draw every answer at random from `seed` (see `Peers/draft-server.py`), or, with
    /// `nil`, answer as the default does.
    public func setHostile(seed: UInt64?) throws {
        _ = try fetch(seed.map { "/hostile/\($0)" } ?? "/calm")
    }

    /// Forgets and ignores every `Idempotency-Key` from now on, as a server without that support does
    /// (`NIOResumableUpload`): a creation or a whole form sent again is taken again.
    public func ignoreIdempotencyKeys() throws {
        _ = try fetch("/keys/ignore")
    }

    /// `path`'s answer, fetched from ``alternatePort``, which stays open while ``port`` is down.
    private func fetch(_ path: String) throws -> Data {
        try loopbackGet(URL(string: "http://127.0.0.1:\(alternatePort)\(path)")!)
    }
}
