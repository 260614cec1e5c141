import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A real HTTP server on 127.0.0.1, started for one test and stopped with it: Node's `http` module (a strict
/// parser) with undici's multipart parser, or Werkzeug's own server and parser.
final class UploadServer {
    enum Kind: String, CaseIterable, CustomStringConvertible {
        case node
        case werkzeug

        var description: String { rawValue }
    }

    /// What the server saw of one request.
    struct Seen: Decodable {
        var method: String
        var transferEncoding: String?
        var contentLength: String?
        var contentType: String?
        var expect: String?
        var authorization: String?
        var bytes: Int
        var parts: [FormPart]?
        var error: String?
    }

    /// One request in the Node server's log.
    struct LoggedRequest: Decodable, Equatable {
        var path: String
        var method: String
        var bytes: Int
    }

    let kind: Kind
    private let base: URL
    private let process = Process()
    private let stdin = Pipe()

    init(_ kind: Kind = .node) throws {
        self.kind = kind
        let peers = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Peers")
        let stdout = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        switch kind {
        case .node: process.arguments = ["node", peers.appendingPathComponent("upload-server.mjs").path]
        case .werkzeug:
            process.arguments = ["python3", peers.appendingPathComponent("parse_werkzeug.py").path, "serve"]
        }
        process.standardInput = stdin
        process.standardOutput = stdout
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = stdout.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw Peer.Failure(description: "the \(kind) server exited before listening") }
            line.append(chunk)
        }
        let port = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        base = URL(string: "http://127.0.0.1:\(port)")!
    }

    deinit {
        // Closing stdin makes the server exit; wait, so that no server outlives its test.
        try? stdin.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    /// The URL of `path` on this server.
    func url(_ path: String = "/upload") -> URL {
        URL(string: path, relativeTo: base)!.absoluteURL
    }

    /// Decodes what the server answered.
    func seen(in data: Data) throws -> Seen {
        do {
            return try JSONDecoder().decode(Seen.self, from: data)
        } catch {
            let text = String(decoding: data.prefix(300), as: UTF8.self)
            throw Peer.Failure(description: "\(kind) answered \(data.count) bytes that are not what it sees: \(text)")
        }
    }

    /// The requests the Node server has seen.
    func log() async throws -> [LoggedRequest] {
        let (data, _) = try await URLSession(configuration: .ephemeral).data(from: url("/log"))
        return try JSONDecoder().decode([LoggedRequest].self, from: data)
    }
}
