import Foundation

/// A peer server started as a child process: it prints what it listens on as its first line of stdout, and exits
/// when its stdin closes.
struct PeerProcess {
    let process = Process()
    let stdin = Pipe()
    let stdout = Pipe()
    /// The first line the peer printed, trimmed.
    let firstLine: String

    /// Starts `/usr/bin/env arguments` and waits for its first line, read on a thread of its own: a test that blocks
    /// one of the concurrency pool's threads (two here) holds up every other test's tasks, and a hundred tests
    /// starting their servers at once held them up for seconds. `name` says which peer failed.
    init(_ arguments: [String], name: String) async throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardInput = stdin
        process.standardOutput = stdout
        try process.run()
        let output = stdout.fileHandleForReading
        let line = try await onAThreadOfItsOwn {
            var line = Data()
            while !line.contains(UInt8(ascii: "\n")) {
                let chunk = output.availableData
                guard !chunk.isEmpty else {
                    throw Peer.Failure(description: "the \(name) server exited before listening")
                }
                line.append(chunk)
            }
            return line
        }
        firstLine = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Closes the peer's stdin, which makes it exit, and waits for it: no server outlives its test. Returns what it
    /// printed on stdout after its first line.
    @discardableResult
    func stop() -> Data {
        try? stdin.fileHandleForWriting.close()
        let rest = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return rest
    }
}
