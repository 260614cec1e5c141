import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension MultipartFormData {
    /// This form with each stream of unknown length copied once to a temporary file of its own (readable by this
    /// user only) and sent from it with its exact length, and the files made, which the caller removes when the
    /// upload ends. Runs on a dispatch queue: reading a pipe blocks. A cancel returns at once and removes the files
    /// made so far, as every failure does.
    ///
    /// - Throws: ``MultipartError/Reason/lengthUnknown`` naming the first part appended with
    ///   `whenLengthIsNeeded: .fail`, before any stream is read; the stream's error, or the file's
    ///   (``MultipartError/Reason/outputWriteFailed(_:errno:)``), naming the part; `CancellationError`.
    package func spooled() async throws -> (MultipartFormData, [URL]) {
        for (index, part) in bodyParts.enumerated() {
            if case .stream(_, nil, spools: false) = part.body {
                throw MultipartError(.lengthUnknown, partIndex: index, partName: part.name)
            }
        }
        let spool = Spool()
        // A cancel returns at once, removing the files made so far; a read blocked in the stream ends on its own.
        let result = await awaitBlocking(
            on: .global(qos: .utility), cancelled: { spool.cancel() }()
        ) {
            Result { try spooledNow(spool) }
        }
        return try result.get()
    }

    private func spooledNow(_ spool: Spool) throws -> (MultipartFormData, [URL]) {
        var form = self
        var files: [URL] = []
        do {
            for (index, part) in bodyParts.enumerated() where part.body.length == nil {
                let url = Self.temporarySpoolURL()
                files.append(url)
                spool.add(url)
                do throws(MultipartError.Reason) {
                    try Self.copy(part.body, to: url, spool)
                    let file = try RegularFile(opening: url)
                    file.close()
                    form.replaceBody(ofPart: index, with: .file(url, file.identity))
                } catch {
                    throw MultipartError(error, partIndex: index, partName: part.name)
                }
                if spool.isCancelled { throw CancellationError() }
            }
            return (form, files)
        } catch {
            for file in files { try? FileManager.default.removeItem(at: file) }
            throw error
        }
    }

    /// Copies the stream `body` reads to a new file at `url`, stopping at a cancel.
    private static func copy(_ body: BodyPart.Body, to url: URL, _ spool: Spool)
        throws(MultipartError.Reason)
    {
        let descriptor: Int32
        do throws(POSIX.Failure) {
            descriptor = try POSIX.open(url, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode: 0o600)
        } catch {
            throw .outputWriteFailed(url, errno: error.code)
        }
        var isClosed = false
        defer { if !isClosed { POSIX.close(descriptor) } }
        guard let source = try OpenPartBody.open(body) else { return }
        defer { source.close() }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: BufferSize.copy, alignment: 1)
        defer { buffer.deallocate() }
        var copied: UInt64 = 0
        while !spool.isCancelled {
            let count = try source.read(into: buffer, alreadyRead: copied)
            guard count > 0 else { break }
            do throws(POSIX.Failure) {
                try POSIX.writeAll(descriptor, UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            } catch {
                throw .outputWriteFailed(url, errno: error.code)
            }
            copied += UInt64(count)
        }
        isClosed = true
        do throws(POSIX.Failure) {
            try POSIX.closeAfterWriting(descriptor)
        } catch {
            throw .outputWriteFailed(url, errno: error.code)
        }
    }

    /// A new name in the temporary directory, with the process's identifier: whose a file left there is shows.
    private static func temporarySpoolURL() -> URL {
        let name = "MultipartStream-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString).spool"
        return FileManager.default.temporaryDirectory.appendingPathComponent(name)
    }
}

/// The files a spool makes, and whether its task was cancelled: read between two reads of the stream.
private final class Spool: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Lock()
    private var files: [URL] = []
    private var cancelled = false

    var isCancelled: Bool { lock.withLock { cancelled } }

    /// A file about to be made, which a cancel removes.
    func add(_ file: URL) {
        lock.withLock { files.append(file) }
    }

    /// Cancels the spool, removing its files now (a copy blocked in the stream may still write to one, unlinked).
    func cancel() -> Result<(MultipartFormData, [URL]), any Error> {
        let made = lock.withLock {
            cancelled = true
            return files
        }
        for file in made { try? FileManager.default.removeItem(at: file) }
        return .failure(CancellationError())
    }
}
