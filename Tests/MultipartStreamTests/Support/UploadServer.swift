import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Node's HTTP server (a strict parser) on 127.0.0.1, started for one test and stopped with it.
final class UploadServer {
    /// What the server saw of one request.
    struct Seen: Decodable {
        var method: String
        var transferEncoding: String?
        var contentLength: String?
        var contentType: String?
        var bytes: Int
        var parts: [FormPart]?
        var error: String?
    }

    let url: URL
    private let process = Process()
    private let stdin = Pipe()

    init() throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Peers/upload-server.mjs")
        let stdout = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["node", script.path]
        process.standardInput = stdin
        process.standardOutput = stdout
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = stdout.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw Peer.Failure(description: "the upload server exited before listening") }
            line.append(chunk)
        }
        let port = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        url = URL(string: "http://127.0.0.1:\(port)/upload")!
    }

    deinit {
        // Closing stdin makes the server exit; wait so no server outlives its test.
        try? stdin.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    /// Sends `request` with a new ephemeral session and decodes what the server saw.
    func send(_ request: URLRequest) async throws -> (status: Int, seen: Seen) {
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        return (status, try JSONDecoder().decode(Seen.self, from: data))
    }
}
