import Foundation

/// A fresh directory under the system's temporary directory, removed with everything in it on deinit.
public final class TemporaryDirectory: Sendable {
    /// The directory.
    public let url: URL

    /// Creates the directory.
    public init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("MultipartStreamTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        remove()
    }

    /// Removes the directory with everything in it now: for a program that ends with `exit`, which runs no deinit.
    public func remove() {
        try? FileManager.default.removeItem(at: url)
    }

    /// Writes `contents` to a new file named `name` and returns its URL.
    public func file(_ name: String, contents: Data) throws -> URL {
        let fileURL = url.appendingPathComponent(name)
        try contents.write(to: fileURL)
        return fileURL
    }

    /// The URL of `name` in the directory, which need not exist.
    public func path(_ name: String) -> URL {
        url.appendingPathComponent(name)
    }
}
