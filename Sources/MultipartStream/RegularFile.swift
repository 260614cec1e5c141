import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An open descriptor on a regular file, and the file's length when it was opened.
struct RegularFile {
    let url: URL
    let descriptor: Int32
    let length: UInt64

    /// Opens `url` for reading; fails unless it is a regular file.
    ///
    /// `O_NONBLOCK` because a path replaced by a FIFO would otherwise block the open until a writer appears.
    init(opening url: URL) throws(MultipartError.Reason) {
        guard url.isFileURL else { throw .notAFileURL(url) }
        let descriptor = open(url.path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            switch code {
            case ENOENT, ENOTDIR: throw .fileNotFound(url)
            case EISDIR: throw .isDirectory(url)
            default: throw .fileUnreadable(url, errno: code)
            }
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let code = errno
            _ = systemClose(descriptor)
            throw .fileUnreadable(url, errno: code)
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            break
        case S_IFDIR:
            _ = systemClose(descriptor)
            throw .isDirectory(url)
        default:
            _ = systemClose(descriptor)
            throw .fileSizeUnavailable(url)
        }
        #if os(Linux)
            _ = posix_fadvise(descriptor, 0, 0, POSIX_FADV_SEQUENTIAL)
        #endif
        self.url = url
        self.descriptor = descriptor
        self.length = UInt64(info.st_size)
    }

    /// The file's length now, which differs from ``length`` if it was truncated or extended since it was opened.
    func currentLength() throws(MultipartError.Reason) -> UInt64 {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw .fileReadFailed(url, errno: errno) }
        return UInt64(info.st_size)
    }

    /// Reads up to `buffer.count` bytes into `buffer`; 0 only at the end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(MultipartError.Reason) -> Int {
        while true {
            let count = systemRead(descriptor, buffer.baseAddress, buffer.count)
            if count >= 0 { return count }
            if errno != EINTR { throw .fileReadFailed(url, errno: errno) }
        }
    }

    func close() {
        _ = systemClose(descriptor)
    }
}

#if canImport(Darwin)
    private let systemRead = Darwin.read
    private let systemClose = Darwin.close
#elseif canImport(Musl)
    private let systemRead = Musl.read
    private let systemClose = Musl.close
#else
    private let systemRead = Glibc.read
    private let systemClose = Glibc.close
#endif
