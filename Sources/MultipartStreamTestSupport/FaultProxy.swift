import Foundation

/// A TCP proxy on 127.0.0.1 in front of a test's server (`Peers/fault-proxy.py`) that cuts, stalls or takes down
/// connections after chosen byte counts, as a dropped network would; started for one test and stopped with it.
public final class FaultProxy: @unchecked Sendable {
    // @unchecked: every property is set in `init` and only read afterwards; the process is stopped once, under `lock`.

    /// What the proxy saw, once stopped.
    public struct Summary: Decodable, Sendable {
        /// Client bytes passed to the target.
        public var forwarded: Int
        /// Connections accepted, refused ones of an outage included.
        public var connections: Int
        /// Connections cut.
        public var cuts: Int
        /// Connections stalled.
        public var stalls: Int
        /// Connections tried during the outage, each reset at once.
        public var outageTries: Int
        /// When the outage ended (Unix time), where there was one.
        public var outageEnd: Double?
        /// When the first connection after the outage came (Unix time), where one came.
        public var firstAfterOutage: Double?
        /// Client bytes passed, by the tenth of a second that passed them (Unix time times 10).
        public var tenths: [[Int]]

        /// The most client bytes passed in any `seconds` (in tenths), and the span from the first byte to the last in
        /// seconds: the rate at the link.
        public func mostForwarded(inAny seconds: Double) -> (bytes: Int, span: Double) {
            let counts = Dictionary(tenths.map { ($0[0], $0[1]) }, uniquingKeysWith: +)
            guard let first = counts.keys.min(), let last = counts.keys.max() else { return (0, 0) }
            let width = Int((seconds * 10).rounded())
            var (window, most) = (0, 0)
            for tenth in first...last {
                window += counts[tenth] ?? 0
                if tenth - width >= first { window -= counts[tenth - width] ?? 0 }
                most = max(most, window)
            }
            return (most, Double(last - first + 1) / 10)
        }

        enum CodingKeys: String, CodingKey {
            case forwarded, connections, cuts, stalls, tenths
            case outageTries = "outage_tries"
            case outageEnd = "outage_end"
            case firstAfterOutage = "first_after_outage"
        }
    }

    /// The port clients connect to.
    public let port: Int
    private let peer: PeerProcess
    private let lock = NSLock()
    private var summary: Summary?

    /// Starts a proxy to `targetPort` with `cuts` as the script takes them (`64M`, `stall:100M`,
    /// `outage:64M:45`), and waits until it listens.
    public init(to targetPort: Int, cuts: [String]) async throws {
        peer = try await PeerProcess(
            ["python3", peerScript("fault-proxy.py").path, String(targetPort)] + cuts, name: "fault proxy")
        guard let port = Int(peer.firstLine) else { throw Peer.Failure(description: "the proxy printed no port") }
        self.port = port
        startedAnew(at: URL(string: "http://127.0.0.1:\(port)/")!)
    }

    deinit {
        _ = try? stop()
    }

    /// `url` with its port replaced by the proxy's.
    public func url(_ url: URL) -> URL {
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        components.port = port
        return components.url!
    }

    /// What the proxy has seen so far, while it runs.
    public func seen() throws -> Summary {
        try lock.withLock {
            if let summary { return summary }
            let ask = Data("\n".utf8)
            // write(contentsOf:), which throws rather than raising, from macOS 10.15.4: the package's floor is 10.15.
            if #available(macOS 10.15.4, iOS 13.4, tvOS 13.4, watchOS 6.2, *) {
                try peer.stdin.fileHandleForWriting.write(contentsOf: ask)
            } else {
                peer.stdin.fileHandleForWriting.write(ask)
            }
            var line = Data()
            while !line.contains(UInt8(ascii: "\n")) {
                let chunk = peer.stdout.fileHandleForReading.availableData
                guard !chunk.isEmpty else { throw Peer.Failure(description: "the proxy exited") }
                line.append(chunk)
            }
            return try JSONDecoder().decode(Summary.self, from: line)
        }
    }

    /// Stops the proxy and returns what it saw; again, the same.
    public func stop() throws -> Summary {
        try lock.withLock {
            if let summary { return summary }
            // The last line: one was printed for each ask before.
            let printed = peer.stop().split(separator: UInt8(ascii: "\n")).last ?? []
            let stopped = try JSONDecoder().decode(Summary.self, from: Data(printed))
            summary = stopped
            return stopped
        }
    }
}
