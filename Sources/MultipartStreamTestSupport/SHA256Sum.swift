import Foundation

/// `sha256sum` of the file at `url`, in lowercase hex: a digest computed by nothing under test.
public func sha256sum(_ url: URL) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["sha256sum", url.path]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0, let digest = output.split(separator: UInt8(ascii: " ")).first else {
        throw Peer.Failure(description: "sha256sum \(url.path) exited \(process.terminationStatus)")
    }
    return String(decoding: digest, as: UTF8.self)
}
