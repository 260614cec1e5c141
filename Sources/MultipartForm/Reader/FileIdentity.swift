import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What tells one version of a file from another without reading it: which file (device, inode), its length, when
/// its contents last changed (mtime) and when the inode last changed (ctime, which even a `touch -r` that puts the
/// old mtime back moves). A change within one tick of the file system's clock (a few milliseconds on Linux) of the
/// last one goes unseen.
package struct FileIdentity: Equatable, Sendable, Codable {
    package var device: UInt64
    package var inode: UInt64
    package var length: UInt64
    package var modifiedSeconds: Int
    package var modifiedNanoseconds: Int
    var changedSeconds: Int
    var changedNanoseconds: Int

    /// The identity of the regular file at `url` now, as an append would record it.
    package static func current(of url: URL) throws(MultipartError.Reason) -> FileIdentity {
        let file = try RegularFile(opening: url)
        defer { file.close() }
        return file.identity
    }

    init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        length = UInt64(info.st_size)
        #if canImport(Darwin)
            modifiedSeconds = Int(info.st_mtimespec.tv_sec)
            modifiedNanoseconds = Int(info.st_mtimespec.tv_nsec)
            changedSeconds = Int(info.st_ctimespec.tv_sec)
            changedNanoseconds = Int(info.st_ctimespec.tv_nsec)
        #else
            modifiedSeconds = Int(info.st_mtim.tv_sec)
            modifiedNanoseconds = Int(info.st_mtim.tv_nsec)
            changedSeconds = Int(info.st_ctim.tv_sec)
            changedNanoseconds = Int(info.st_ctim.tv_nsec)
        #endif
    }
}
