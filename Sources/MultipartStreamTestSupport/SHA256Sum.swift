import Foundation

/// `sha256sum` of the file at `url`, in lowercase hex: a digest computed by nothing under test.
public func sha256sum(_ url: URL) throws -> String {
    try sha256sums([url])[0]
}

/// `sha256sum` of each file, in order, from one run of the command.
public func sha256sums(_ urls: [URL]) throws -> [String] {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["sha256sum"] + urls.map(\.path)
    let output = try process.outputAlone()
    // One line per file: the digest, two spaces, the path.
    let digests = output.split(separator: UInt8(ascii: "\n")).compactMap { line in
        line.split(separator: UInt8(ascii: " ")).first.map { String(decoding: $0, as: UTF8.self) }
    }
    guard process.terminationStatus == 0, digests.count == urls.count else {
        throw Peer.Failure(description: "sha256sum of \(urls.count) files exited \(process.terminationStatus)")
    }
    return digests
}
