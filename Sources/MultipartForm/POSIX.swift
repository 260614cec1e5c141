import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Every system call on files of the package and of the command, written once: a call interrupted by a signal
/// (`EINTR`) is made again here and nowhere else, a failure is a ``Failure`` with its `errno`, a write is carried on
/// until every byte is out, and `errno` is put in words in one place.
///
/// Paths are C strings, so that a path that is not UTF-8 (the command takes paths as the bytes they are) is used as
/// it is: pass a `String`, a `[CChar]` with its NUL, or a URL's file system representation.
package enum POSIX {
    /// A system call failed with this `errno`.
    package struct Failure: Error, Equatable, CustomStringConvertible {
        package var code: Int32

        package init(code: Int32) {
            self.code = code
        }

        /// The `errno` in words, with its number.
        package var description: String { POSIX.errnoText(code) }
    }

    /// What `call` returns once it is not interrupted by a signal; its `errno` when it fails.
    private static func retryingInterrupts<Result: BinaryInteger>(
        _ call: () -> Result
    ) throws(Failure) -> Result {
        while true {
            let result = call()
            if result >= 0 { return result }
            if errno != EINTR { throw Failure(code: errno) }
        }
    }

    // MARK: Descriptors

    /// Opens `path` with `flags` (and `mode` for a file it creates); the new descriptor.
    package static func open(
        _ path: UnsafePointer<CChar>, _ flags: Int32, mode: mode_t = 0
    ) throws(Failure) -> Int32 {
        try retryingInterrupts { systemOpen(path, flags, mode) }
    }

    /// Opens the file at `url` by its file system representation, which need not be UTF-8.
    package static func open(_ url: URL, _ flags: Int32, mode: mode_t = 0) throws(Failure) -> Int32 {
        try withPath(of: url) { path throws(Failure) in try open(path, flags, mode: mode) }
    }

    /// `call` with `url`'s file system representation; a URL that has none names no file (`ENOENT`).
    private static func withPath<Value>(
        of url: URL, _ call: (UnsafePointer<CChar>) throws(Failure) -> Value
    ) throws(Failure) -> Value {
        // The representation's closure rethrows untyped errors: carry the typed one out as a value.
        let result = url.withUnsafeFileSystemRepresentation { path -> Result<Value, Failure> in
            guard let path else { return .failure(Failure(code: ENOENT)) }
            return Result { () throws(Failure) in try call(path) }
        }
        return try result.get()
    }

    /// Makes and opens a new file named by `template`, whose trailing `XXXXXX` it replaces (`mkstemp`).
    package static func makeTemporaryFile(_ template: inout [CChar]) throws(Failure) -> Int32 {
        try template.withUnsafeMutableBufferPointer { buffer throws(Failure) in
            try retryingInterrupts { mkstemp(buffer.baseAddress!) }
        }
    }

    /// Closes `descriptor`; its failure has nothing left to undo. Never retried: after `EINTR` Linux has closed it.
    package static func close(_ descriptor: Int32) {
        _ = systemClose(descriptor)
    }

    /// Closes a descriptor written to, reporting a failure of the last writes (NFS reports some only here).
    package static func closeAfterWriting(_ descriptor: Int32) throws(Failure) {
        if systemClose(descriptor) != 0, errno != EINTR { throw Failure(code: errno) }
    }

    /// Reads up to `buffer.count` bytes from `descriptor` into `buffer`; 0 only at the end.
    package static func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Failure) -> Int {
        try retryingInterrupts { systemRead(descriptor, buffer.baseAddress, buffer.count) }
    }

    /// Writes every byte of `bytes` to `descriptor`, in as many writes as it takes.
    package static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) throws(Failure) {
        var written = 0
        while written < bytes.count {
            written += try retryingInterrupts {
                systemWrite(descriptor, bytes.baseAddress! + written, bytes.count - written)
            }
        }
    }

    /// Writes every byte of `data` to `descriptor`.
    package static func writeAll(_ descriptor: Int32, _ data: Data) throws(Failure) {
        let result = data.withUnsafeBytes { bytes in Result { () throws(Failure) in try writeAll(descriptor, bytes) } }
        try result.get()
    }

    /// Moves `descriptor`'s position to `offset` bytes from the start.
    package static func seek(_ descriptor: Int32, to offset: UInt64) throws(Failure) {
        guard let target = off_t(exactly: offset) else { throw Failure(code: EOVERFLOW) }
        _ = try retryingInterrupts { lseek(descriptor, target, SEEK_SET) }
    }

    /// Writes what the system holds of `descriptor`'s file to its disk.
    package static func sync(_ descriptor: Int32) throws(Failure) {
        _ = try retryingInterrupts { fsync(descriptor) }
    }

    /// Takes or releases an advisory lock on `descriptor`'s file (`LOCK_EX | LOCK_NB`, `LOCK_UN`).
    package static func lock(_ descriptor: Int32, _ operation: Int32) throws(Failure) {
        _ = try retryingInterrupts { flock(descriptor, operation) }
    }

    // MARK: File status

    /// The status of `descriptor`'s file (`fstat`).
    package static func status(of descriptor: Int32) throws(Failure) -> stat {
        var info = stat()
        _ = try retryingInterrupts { fstat(descriptor, &info) }
        return info
    }

    /// The status of the file at `path`, through a symbolic link there (`stat`), or of the link itself (`lstat`).
    package static func status(at path: UnsafePointer<CChar>, followingLinks: Bool = true) throws(Failure) -> stat {
        var info = stat()
        _ = try retryingInterrupts { followingLinks ? systemStat(path, &info) : lstat(path, &info) }
        return info
    }

    /// The status of the file at `url`, by its file system representation.
    package static func status(at url: URL) throws(Failure) -> stat {
        try withPath(of: url) { path throws(Failure) in try status(at: path) }
    }

    // MARK: Names

    /// Renames `source` to `destination`, replacing what is there at once.
    package static func rename(_ source: UnsafePointer<CChar>, to destination: UnsafePointer<CChar>) throws(Failure) {
        _ = try retryingInterrupts { systemRename(source, destination) }
    }

    /// Removes the name `path` (the file goes when its last name and descriptor do).
    package static func unlink(_ path: UnsafePointer<CChar>) throws(Failure) {
        _ = try retryingInterrupts { systemUnlink(path) }
    }

    /// ``unlink(_:)`` from a signal handler: the bare call, nothing generic, nothing thrown, nothing allocated.
    package static func unlinkInSignalHandler(_ path: UnsafePointer<CChar>) {
        _ = systemUnlink(path)
    }

    /// Calls `each` with the name of every entry of the directory `path` but `.` and `..`, in the order the file
    /// system keeps them, one at a time: a directory of a hundred thousand is never held as a list.
    package static func forEachName(inDirectory path: UnsafePointer<CChar>, _ each: (String) -> Void) throws(Failure) {
        guard let directory = opendir(path) else { throw Failure(code: errno) }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: entry.pointee.d_name)) {
                    String(cString: $0)
                }
            }
            if name != ".", name != ".." { each(name) }
        }
    }

    /// Makes the directory `path` with `mode`.
    package static func makeDirectory(_ path: UnsafePointer<CChar>, mode: mode_t) throws(Failure) {
        _ = try retryingInterrupts { mkdir(path, mode) }
    }

    /// `errno` in words, with its number: "No space left on device (errno 28)".
    package static func errnoText(_ code: Int32) -> String {
        "\(String(cString: strerror(code))) (errno \(code))"
    }
}

// The C library's calls whose names the methods above shadow, reached from outside the enum.
private func systemOpen(_ path: UnsafePointer<CChar>, _ flags: Int32, _ mode: mode_t) -> Int32 {
    open(path, flags, mode)
}
private func systemClose(_ descriptor: Int32) -> Int32 { close(descriptor) }
private func systemRead(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}
private func systemWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, bytes, count)
}
private func systemStat(_ path: UnsafePointer<CChar>, _ info: inout stat) -> Int32 { stat(path, &info) }
private func systemRename(_ source: UnsafePointer<CChar>, _ destination: UnsafePointer<CChar>) -> Int32 {
    rename(source, destination)
}
private func systemUnlink(_ path: UnsafePointer<CChar>) -> Int32 { unlink(path) }
