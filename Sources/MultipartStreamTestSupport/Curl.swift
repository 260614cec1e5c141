import Foundation

/// `url`'s answer, fetched with curl rather than URLSession: URLSession's one queue for the process may be held by a
/// test's blocked stream.
public func curl(_ url: URL) throws -> Data {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["curl", "-s", "--max-time", "30", url.absoluteString]
    let stdout = Pipe()
    process.standardOutput = stdout
    try process.run()
    let data = stdout.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw Peer.Failure(description: "curl \(url) exited \(process.terminationStatus)")
    }
    return data
}
