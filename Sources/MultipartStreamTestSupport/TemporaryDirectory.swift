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

    /// Writes `contents` to a new file named `name` (or over the one there) and returns its URL.
    ///
    /// Written plainly, without the sync `Data.write(to:)` does here: a test that made 5,000 files so held a
    /// thread of the concurrency pool for seconds, and every other test's tasks with it.
    public func file(_ name: String, contents: Data) throws -> URL {
        let fileURL = url.appendingPathComponent(name)
        let descriptor = open(fileURL.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: fileURL.path]) }
        defer { close(descriptor) }
        try contents.withUnsafeBytes { bytes in
            var written = 0
            while written < bytes.count {
                let count = write(descriptor, bytes.baseAddress! + written, bytes.count - written)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else {
                    throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: fileURL.path])
                }
                written += count
            }
        }
        return fileURL
    }

    /// The URL of `name` in the directory, which need not exist.
    public func path(_ name: String) -> URL {
        url.appendingPathComponent(name)
    }
}
