import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension MultipartFormData {
    /// The whole body in memory, for small forms and tests; large forms belong in ``makeBodyStream()`` or
    /// ``writeEncodedData(to:)``.
    ///
    /// - Returns: Exactly ``contentLength`` bytes; for a form holding a stream of unknown length, every byte up to
    ///   that stream's end.
    /// - Throws: ``MultipartError``: the ``appendError``, a part that failed to read, or
    ///   ``MultipartError/Reason/tooLargeForMemory(_:)``.
    public func encode() throws(MultipartError) -> Data {
        if let appendError { throw appendError }
        guard let contentLength else { return try encodeGrowing() }
        guard let count = Int(exactly: contentLength) else { throw MultipartError(.tooLargeForMemory(contentLength)) }
        let reader = try MultipartReader(self)
        let buffer = UnsafeMutableRawBufferPointer(start: allocateBody(count), count: count)
        do throws(MultipartError) {
            try reader.readToEnd(into: buffer)
        } catch {
            free(buffer.baseAddress)
            throw error
        }
        return Data(bytesNoCopy: buffer.baseAddress!, count: count, deallocator: .free)
    }

    /// The body of a form holding a stream of unknown length, read in chunks into memory that grows with it.
    private func encodeGrowing() throws(MultipartError) -> Data {
        let reader = try MultipartReader(self)
        var body = Data()
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: BufferSize.copy, alignment: 1)
        defer { chunk.deallocate() }
        while case let count = try reader.read(into: chunk), count > 0 {
            body.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[..<count]))
        }
        return body
    }

    /// Memory for a body of `count` bytes, to be released with `free`.
    ///
    /// Filling fresh memory costs a page fault every 4 KiB, which made encoding 100 MiB six times slower than the
    /// copy itself; a large body asks for transparent huge pages (2 MiB) where Linux offers them on request.
    private func allocateBody(_ count: Int) -> UnsafeMutableRawPointer {
        var pointer: UnsafeMutableRawPointer?
        #if os(Linux)
            let hugePage = 2 << 20
            if count >= hugePage, posix_memalign(&pointer, hugePage, count) == 0, let pointer {
                _ = madvise(pointer, count, MADV_HUGEPAGE)
                return pointer
            }
        #endif
        pointer = malloc(max(count, 1))
        guard let pointer else { fatalError("cannot allocate \(count) bytes for the encoded body") }
        return pointer
    }

    /// Writes the body to a new file at `fileURL`, for `URLSession.uploadTask(fromFile:)` and background sessions.
    ///
    /// Refuses to replace an existing file. On any failure the partial file is removed.
    ///
    /// - Parameter fileURL: A `file:` URL where nothing exists yet.
    /// - Throws: ``MultipartError``: the ``appendError``, a part that failed to read,
    ///   ``MultipartError/Reason/outputFileExists(_:)`` or ``MultipartError/Reason/outputWriteFailed(_:errno:)``.
    public func writeEncodedData(to fileURL: URL) throws(MultipartError) {
        _ = try writeEncodedData(to: fileURL, until: { false })
    }

    /// ``writeEncodedData(to:)`` that stops early, removing the partial file, once `stop` says so: asked before each
    /// write, which is at most ``BufferSize/copy`` bytes, or 64 MiB copied by the kernel. Returns whether it wrote the
    /// whole body.
    package func writeEncodedData(to fileURL: URL, until stop: () -> Bool) throws(MultipartError) -> Bool {
        if let appendError { throw appendError }
        guard fileURL.isFileURL else { throw MultipartError(.notAFileURL(fileURL)) }
        let descriptor: Int32
        do throws(POSIX.Failure) {
            descriptor = try POSIX.open(fileURL, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode: 0o644)
        } catch {
            throw MultipartError(
                error.code == EEXIST ? .outputFileExists(fileURL) : .outputWriteFailed(fileURL, errno: error.code))
        }
        let whole: Bool
        do throws(MultipartError) {
            whole = try writeBody(to: descriptor, at: fileURL, until: stop)
        } catch {
            POSIX.close(descriptor)
            try? POSIX.unlink(fileURL.path)
            throw error
        }
        guard whole else {
            POSIX.close(descriptor)
            try? POSIX.unlink(fileURL.path)
            return false
        }
        do throws(POSIX.Failure) {
            try POSIX.closeAfterWriting(descriptor)
        } catch {
            try? POSIX.unlink(fileURL.path)
            throw MultipartError(.outputWriteFailed(fileURL, errno: error.code))
        }
        return true
    }

    /// Writes the body to `descriptor`, from the first byte to the last; failures to write name `fileURL`. Also how
    /// the `multipart` command writes to standard output, devices and its temporary files. Returns `false`, having
    /// written part of it, when `stop` (asked before each write) said to stop.
    @discardableResult
    package func writeBody(
        to descriptor: Int32, at fileURL: URL, until stop: () -> Bool = { false }
    ) throws(MultipartError) -> Bool {
        let reader = try MultipartReader(self)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: BufferSize.copy, alignment: 1)
        defer { buffer.deallocate() }
        #if os(Linux)
            // File parts go from file to file inside the kernel, as cp copies; the rest through the buffer.
            var kernelCopies = true
        #else
            let kernelCopies = false
        #endif
        while true {
            if stop() { return false }
            #if os(Linux)
                if kernelCopies, let copied = try reader.copyFileBody(to: descriptor, writing: fileURL) {
                    if copied > 0 { continue }
                } else if kernelCopies, !reader.isAtEnd, reader.isInFileBody {
                    // This output takes no kernel copies (a pipe, a device): buffers from now on.
                    kernelCopies = false
                }
            #endif
            let count = try reader.read(into: buffer, stoppingAtFileBody: kernelCopies)
            if count == 0 {
                if reader.isAtEnd { return true }
                continue
            }
            do throws(POSIX.Failure) {
                try POSIX.writeAll(descriptor, UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            } catch {
                throw MultipartError(.outputWriteFailed(fileURL, errno: error.code))
            }
        }
    }
}

extension MultipartReader {
    /// Fills `buffer`, which must be exactly ``contentLength`` bytes long, with the whole body.
    fileprivate func readToEnd(into buffer: UnsafeMutableRawBufferPointer) throws(MultipartError) {
        var filled = 0
        while filled < buffer.count {
            let count = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
            precondition(count > 0, "the body ended before its contentLength")
            filled += count
        }
        precondition(isAtEnd, "the body is longer than its contentLength")
    }
}
