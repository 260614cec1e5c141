import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The directory of saved uploads' state files, `KEY.json`, each beside the `KEY.lock` its running upload holds.
///
/// The directory is made `0700` and the files `0600`. A state file is replaced whole (written beside, synced,
/// renamed), so a crash leaves the old one or the new one, never half of one. A file that is not a regular file of
/// this user's, not writable by others, small, and a record whose every field checks out is ignored, with the
/// reason given to `ignored`.
package struct SavedUploadDirectory: Sendable {
    package let url: URL
    /// The resumable-upload draft's interop versions a record may name: the ones the client speaks.
    let interopVersions: Set<Int>
    /// The user whose files are trusted: this process's.
    let owner: uid_t

    /// The largest state file read: a record is a few hundred bytes.
    private static let largestFile = 64 << 10

    package init(_ url: URL, interopVersions: Set<Int>, owner: uid_t = geteuid()) {
        self.url = url
        self.interopVersions = interopVersions
        self.owner = owner
    }

    func file(for key: String) -> URL {
        url.appendingPathComponent("\(key).json")
    }

    /// Makes the directory (and its missing parents) `0700` if it does not exist; refuses one that others may write.
    package func prepare() throws(MultipartError) {
        let path = url.path
        let info: stat
        do throws(POSIX.Failure) {
            if let existing = try? POSIX.status(at: path, followingLinks: false) {
                info = existing
            } else {
                try? FileManager.default.createDirectory(
                    at: url.deletingLastPathComponent(), withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])
                do throws(POSIX.Failure) {
                    try POSIX.makeDirectory(path, mode: 0o700)
                } catch  where error.code == EEXIST {
                    // Made meanwhile by another process: checked below as any other.
                }
                info = try POSIX.status(at: path, followingLinks: false)
            }
        } catch {
            throw MultipartError(.stateUnwritable(url, errno: error.code))
        }
        guard info.st_mode & S_IFMT == S_IFDIR, info.st_uid == owner, info.st_mode & 0o022 == 0 else {
            throw MultipartError(.stateUnwritable(url, errno: EPERM))
        }
    }

    /// The record saved under `key`, if there is one that can be trusted; why not to `ignored`.
    func load(_ key: String, ignored: (URL, String) -> Void) -> SavedUpload? {
        let file = file(for: key)
        let data: Data
        do throws(Distrust) {
            data = try readTrusted(file.path, atMost: Self.largestFile)
        } catch {
            if !error.missing { ignored(file, error.reason) }
            return nil
        }
        let record: SavedUpload
        do {
            record = try SavedUpload.decoder.decode(SavedUpload.self, from: data)
        } catch {
            ignored(file, "it is not a saved upload (corrupt or truncated)")
            return nil
        }
        if let flaw = record.flaw(interopVersions: interopVersions) {
            ignored(file, flaw)
            return nil
        }
        return record
    }

    /// Why a file of the directory is not read.
    package struct Distrust: Error {
        package var reason: String
        /// Whether there is no such file, which is no fault.
        package var missing = false
    }

    /// The bytes of the file at `path`, in this directory, if it can be trusted: a regular file of this user's that others may
    /// not write, opened without following a link, of at most `largest` bytes; its first `prefix` bytes where fewer
    /// are asked for.
    package func readTrusted(_ path: String, atMost largest: Int, prefix: Int? = nil) throws(Distrust) -> Data {
        let (descriptor, size) = try openTrusted(path, atMost: largest)
        defer { POSIX.close(descriptor) }
        // One byte past the size it had, so that a file that grew meanwhile is read to the bound and no further.
        let data = try Self.read(descriptor, count: min(size + 1, prefix ?? .max))
        guard data.count <= largest else { throw Distrust(reason: "it grew past \(largest) bytes as it was read") }
        return data
    }

    /// The bytes `range` of the file at `path`, checked as ``readTrusted(_:atMost:prefix:)`` checks it (of any size).
    package func readTrusted(_ path: String, range: Range<Int>) throws(Distrust) -> Data {
        let (descriptor, size) = try openTrusted(path, atMost: .max)
        defer { POSIX.close(descriptor) }
        guard range.upperBound <= size, (try? POSIX.seek(descriptor, to: UInt64(range.lowerBound))) != nil else {
            throw Distrust(reason: "it is shorter than it was (\(size) bytes, not \(range.upperBound))")
        }
        let data = try Self.read(descriptor, count: range.count)
        guard data.count == range.count else { throw Distrust(reason: "it shrank as it was read") }
        return data
    }

    /// The file at `path`, open to read, and its size, where it can be trusted (see
    /// ``readTrusted(_:atMost:prefix:)``).
    package func openTrusted(_ path: String, atMost largest: Int) throws(Distrust) -> (descriptor: Int32, size: Int) {
        let descriptor: Int32
        do throws(POSIX.Failure) {
            descriptor = try POSIX.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        } catch {
            throw Distrust(reason: "it cannot be opened: \(error)", missing: error.code == ENOENT)
        }
        do throws(Distrust) {
            guard let info = try? POSIX.status(of: descriptor), info.st_mode & S_IFMT == S_IFREG else {
                throw Distrust(reason: "it is not a regular file")
            }
            guard info.st_uid == owner else {
                throw Distrust(reason: "it belongs to user \(info.st_uid), not to this one")
            }
            guard info.st_mode & 0o022 == 0 else { throw Distrust(reason: "others may write it") }
            guard info.st_size <= largest else {
                throw Distrust(reason: "it is \(info.st_size) bytes, more than a record of its kind holds (\(largest))")
            }
            return (descriptor, Int(info.st_size))
        } catch {
            POSIX.close(descriptor)
            throw error
        }
    }

    /// At most `count` bytes from `descriptor`, fewer at its end.
    private static func read(_ descriptor: Int32, count wanted: Int) throws(Distrust) -> Data {
        var data = Data(count: wanted)
        var count = 0
        while count < data.count {
            let read = data.withUnsafeMutableBytes { buffer in
                try? POSIX.read(descriptor, into: UnsafeMutableRawBufferPointer(rebasing: buffer[count...]))
            }
            guard let read else { throw Distrust(reason: "it cannot be read") }
            if read == 0 { break }
            count += read
        }
        data.count = count
        return data
    }

    /// Replaces the record under `key` whole: written to a temporary file, synced, renamed over the old one.
    func save(_ record: SavedUpload, as key: String) throws(MultipartError) {
        try replace(file(for: key), with: (try? SavedUpload.encoder.encode(record.sealed())) ?? Data())
    }

    /// Replaces `file`, in this directory, with `data` whole: written to a temporary file, renamed over the old one,
    /// so that a kill at any moment leaves the old file or the new one; `syncing` both to disk first, so that a
    /// crash of the system does too.
    package func replace(_ file: URL, with data: Data, syncing: Bool = true) throws(MultipartError) {
        let name = file.lastPathComponent
        let temporary = url.appendingPathComponent(".\(name).\(getpid()).\(UInt32.random(in: .min ... .max)).tmp")
        let descriptor: Int32
        do throws(POSIX.Failure) {
            descriptor = try POSIX.open(
                temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode: 0o600)
        } catch {
            throw MultipartError(.stateUnwritable(file, errno: error.code))
        }
        do throws(POSIX.Failure) {
            try POSIX.writeAll(descriptor, data)
            if syncing { try POSIX.sync(descriptor) }
            try POSIX.closeAfterWriting(descriptor)
        } catch {
            POSIX.close(descriptor)
            try? POSIX.unlink(temporary.path)
            throw MultipartError(.stateUnwritable(file, errno: error.code))
        }
        do throws(POSIX.Failure) {
            try POSIX.rename(temporary.path, to: file.path)
        } catch {
            try? POSIX.unlink(temporary.path)
            throw MultipartError(.stateUnwritable(file, errno: error.code))
        }
        if syncing { syncDirectory() }
    }

    /// Removes the record under `key`, if there is one.
    func remove(_ key: String) {
        if (try? POSIX.unlink(file(for: key).path)) != nil { syncDirectory() }
    }

    /// Makes the renames and removals in the directory durable.
    private func syncDirectory() {
        guard let descriptor = try? POSIX.open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) else { return }
        try? POSIX.sync(descriptor)
        POSIX.close(descriptor)
    }

    /// Takes the lock of `key`'s upload without waiting: two processes never send the same upload at once.
    /// - Throws: ``MultipartError/Reason/uploadInProgress(_:)`` when another holds it.
    package func lock(_ key: String) throws(MultipartError) -> SavedUploadLock {
        let path = url.appendingPathComponent("\(key).lock").path
        // The holder removes the lock file when it is done: a lock taken on a file already removed is taken again.
        while true {
            let descriptor: Int32
            do throws(POSIX.Failure) {
                descriptor = try POSIX.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode: 0o600)
            } catch {
                throw MultipartError(.stateUnwritable(URL(fileURLWithPath: path), errno: error.code))
            }
            do throws(POSIX.Failure) {
                try POSIX.lock(descriptor, LOCK_EX | LOCK_NB)
            } catch {
                POSIX.close(descriptor)
                if error.code == EWOULDBLOCK { throw MultipartError(.uploadInProgress(file(for: key))) }
                throw MultipartError(.stateUnwritable(URL(fileURLWithPath: path), errno: error.code))
            }
            if let held = try? POSIX.status(of: descriptor), let named = try? POSIX.status(at: path),
                held.st_ino == named.st_ino, held.st_dev == named.st_dev
            {
                return SavedUploadLock(descriptor: descriptor, path: path)
            }
            POSIX.close(descriptor)
        }
    }
}
