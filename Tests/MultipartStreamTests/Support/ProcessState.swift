import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Whether the tests run on Linux, for the few that need /proc, tmpfs mounts, runuser or util-linux's `script`.
#if os(Linux)
    let isLinux = true
#else
    let isLinux = false
#endif

/// Descriptors of this process open on files under a directory, from `/proc/self/fd`.
enum OpenDescriptors {
    static func count(under directory: URL) -> Int {
        let prefix = directory.resolvingSymlinksInPath().path + "/"
        #if os(Linux)
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            return entries.filter { entry in
                let link = "/proc/self/fd/\(entry)"
                return (try? FileManager.default.destinationOfSymbolicLink(atPath: link))?.hasPrefix(prefix) == true
            }.count
        #else
            // Darwin: ask each open descriptor for its path.
            return (0..<getdtablesize()).filter { descriptor in
                var path = [CChar](repeating: 0, count: Int(MAXPATHLEN))
                guard fcntl(descriptor, F_GETPATH, &path) == 0 else { return false }
                return String(cString: path).hasPrefix(prefix)
            }.count
        #endif
    }
}

/// The `.file` strategy's temporary bodies (`MultipartStream-*.multipart` in the temporary directory).
enum TemporaryBodies {
    /// Their names now.
    static func names() throws -> Set<String> {
        Set(
            try FileManager.default.contentsOfDirectory(atPath: FileManager.default.temporaryDirectory.path)
                .filter { $0.hasPrefix("MultipartStream-") && $0.hasSuffix(".multipart") })
    }

    /// Descriptors of this process open on one of them.
    static func openCount() -> Int {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.filter { entry in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)")
            else { return false }
            return target.contains("/MultipartStream-") && target.hasSuffix(".multipart")
        }.count
    }
}
