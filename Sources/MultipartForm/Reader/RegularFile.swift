import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An open descriptor on a regular file, and the file's identity when it was opened.
struct RegularFile {
    let url: URL
    let descriptor: Int32
    let identity: FileIdentity

    /// The file's length when it was opened.
    package var length: UInt64 { identity.length }

    /// Opens `url` for reading; fails unless it is a regular file.
    ///
    /// `O_NONBLOCK` because a path replaced by a FIFO would otherwise block the open until a writer appears.
    init(opening url: URL) throws(MultipartError.Reason) {
        guard url.isFileURL else { throw .notAFileURL(url) }
        let descriptor: Int32
        let info: stat
        do throws(POSIX.Failure) {
            descriptor = try POSIX.open(url, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        } catch {
            switch error.code {
            case ENOENT, ENOTDIR: throw .fileNotFound(url)
            case EISDIR: throw .isDirectory(url)
            default: throw .fileUnreadable(url, errno: error.code)
            }
        }
        do throws(POSIX.Failure) {
            info = try POSIX.status(of: descriptor)
        } catch {
            POSIX.close(descriptor)
            throw .fileUnreadable(url, errno: error.code)
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            break
        case S_IFDIR:
            POSIX.close(descriptor)
            throw .isDirectory(url)
        default:
            POSIX.close(descriptor)
            throw .fileSizeUnavailable(url)
        }
        #if os(Linux)
            _ = posix_fadvise(descriptor, 0, 0, POSIX_FADV_SEQUENTIAL)
        #endif
        self.url = url
        self.descriptor = descriptor
        self.identity = FileIdentity(info)
    }

    /// The open file's identity now: its length and modification time change if it is written to.
    func currentIdentity() throws(MultipartError.Reason) -> FileIdentity {
        do throws(POSIX.Failure) {
            return FileIdentity(try POSIX.status(of: descriptor))
        } catch {
            throw .fileReadFailed(url, errno: error.code)
        }
    }

    /// The file's length now, which differs from ``length`` if it was truncated or extended since it was opened.
    func currentLength() throws(MultipartError.Reason) -> UInt64 {
        try currentIdentity().length
    }

    /// Whether the path still names this file, rather than one renamed over it or a link put in its place.
    func isStillAtItsPath() -> Bool {
        guard let info = try? POSIX.status(at: url) else { return false }
        let current = FileIdentity(info)
        return current.device == identity.device && current.inode == identity.inode
    }

    /// Moves the read position to `offset` bytes from the start: what follows is read from there.
    func seek(to offset: UInt64) throws(MultipartError.Reason) {
        do throws(POSIX.Failure) {
            try POSIX.seek(descriptor, to: offset)
        } catch {
            throw .fileReadFailed(url, errno: error.code)
        }
    }

    /// Reads up to `buffer.count` bytes into `buffer`; 0 only at the end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(MultipartError.Reason) -> Int {
        do throws(POSIX.Failure) {
            return try POSIX.read(descriptor, into: buffer)
        } catch {
            throw .fileReadFailed(url, errno: error.code)
        }
    }

    package func close() {
        POSIX.close(descriptor)
    }
}
