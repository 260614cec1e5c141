import Foundation

/// A server on 127.0.0.1 whose answers are as large as a test asks (`Peers/big-answer.mjs`), for the bounded-memory
/// tests: it reads each request whole, then answers with a body whose byte i is i % 251.
public final class LargeAnswerServer: @unchecked Sendable {
    // @unchecked: every property is set in `init` and only read afterwards; the process is touched again in `deinit`.
    /// What the server put on the wire for its last answer.
    public struct Sent: Decodable, Sendable {
        /// Body bytes written (of an endless body, so far).
        public var bytes: Int
        /// The SHA-256 of a finished body, in lowercase hex.
        public var sha256: String?
        /// Whether the client hung up before the body's end.
        public var hungUp: Bool
    }

    private let peer: PeerProcess
    private let base: URL

    /// The pace the server writes at, in bytes a second: a gigabit link's, which libcurl outreads, so that an
    /// upload's stop takes effect when it is made (LinuxNotes.md: Linux URLSession stays on a connection that stays
    /// readable). Under a sanitizer a tenth of it, a 100 Mbit link: there libcurl's thread reads 5 to 20 times slower
    /// on a loaded machine, and at the gigabit pace an endless answer's stop waited for minutes (seen under
    /// ThreadSanitizer at a load of 8 on two cores, the thread in `recv` all along).
    public static let bytesPerSecond = CancelBound.sanitized ? 12_500_000 : 125_000_000

    /// Starts the server and waits until it listens.
    public init() async throws {
        peer = try await PeerProcess(
            ["node", peerScript("big-answer.mjs").path, String(Self.bytesPerSecond)], name: "large-answer")
        base = URL(string: "http://127.0.0.1:\(peer.firstLine)")!
        startedAnew(at: base)
    }

    deinit {
        peer.stop()
    }

    /// The URL whose answer has `status` and a body of `bytes` (`nil`: chunked, never ending).
    public func url(status: Int = 200, bytes: Int?, chunked: Bool = false) -> URL {
        let length = bytes.map(String.init) ?? "endless"
        return URL(string: "/answer?status=\(status)&bytes=\(length)&chunked=\(chunked ? 1 : 0)", relativeTo: base)!
            .absoluteURL
    }

    /// What the last answer put on the wire.
    public func sent() throws -> Sent {
        try JSONDecoder().decode(Sent.self, from: try loopbackGet(URL(string: "/sent", relativeTo: base)!.absoluteURL))
    }

    /// The first `count` bytes of every answer's body.
    public static func body(_ count: Int) -> Data {
        Data((0..<count).map { UInt8($0 % 251) })
    }
}
