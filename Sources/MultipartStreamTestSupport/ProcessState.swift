import Foundation

#if canImport(Glibc)
    import Glibc
#endif

#if os(Linux)
    /// Whether the tests run on Linux, for the few that need /proc, tmpfs mounts, runuser or util-linux's `script`.
    public let isLinux = true
#else
    /// Whether the tests run on Linux, for the few that need /proc, tmpfs mounts, runuser or util-linux's `script`.
    public let isLinux = false
#endif

/// Descriptors of this process open on files under a directory, from `/proc/self/fd`.
public enum OpenDescriptors {
    /// How many there are now.
    public static func count(under directory: URL) -> Int {
        let prefix = directory.resolvingSymlinksInPath().path + "/"
        #if os(Linux)
            // readlink(2) itself, not Foundation's wrapper: a test looks 3,000 times, at each of the hundreds of
            // descriptors a full run holds.
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            return entries.filter { entry in
                let count = readlink("/proc/self/fd/\(entry)", &buffer, buffer.count - 1)
                guard count > 0 else { return false }
                let target = buffer.prefix(count).map { UInt8(bitPattern: $0) }
                return String(decoding: target, as: UTF8.self).hasPrefix(prefix)
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

/// The `.file` strategy's temporary bodies and the spools of streams of unknown length of this process
/// (`MultipartStream-PID-*.multipart` and `.spool` in the temporary directory): another test run on the machine makes
/// its own meanwhile.
public enum TemporaryBodies {
    private static let prefix = "MultipartStream-\(ProcessInfo.processInfo.processIdentifier)-"

    /// Their names now.
    public static func names() throws -> Set<String> {
        Set(
            try FileManager.default.contentsOfDirectory(atPath: FileManager.default.temporaryDirectory.path)
                .filter { $0.hasPrefix(prefix) && ($0.hasSuffix(".multipart") || $0.hasSuffix(".spool")) })
    }

    /// The spools of streams of unknown length among them: no test beside the serialized URLSession suites makes
    /// one, where tests beside them may make `.file` bodies.
    public static func spools() throws -> Set<String> {
        try names().filter { $0.hasSuffix(".spool") }
    }

    /// Whether every one made since `before` (``names()`` then) is gone, waiting up to `timeout` seconds for one
    /// look that finds none: tests that run beside the caller make and remove their own, so only one left behind
    /// is in every look.
    public static func noneLeft(since before: Set<String>, within timeout: Double = 10) async throws -> Bool {
        let stopwatch = Stopwatch()
        while true {
            if try names().subtracting(before).isEmpty { return true }
            if stopwatch.seconds >= timeout { return false }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
    }

    /// Descriptors of this process open on one of them of at least `bytes`: a test that counts its own uploads'
    /// gives their size, since the tests beside it (which share the process) make small ones.
    public static func openCount(ofAtLeast bytes: Int = 0) -> Int {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.filter { entry in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)"),
                target.contains("/\(prefix)") && target.hasSuffix(".multipart")
            else { return false }
            let size = (try? FileManager.default.attributesOfItem(atPath: target)[.size] as? Int) ?? 0
            return size >= bytes
        }.count
    }
}

/// This process's sockets, resident memory and descriptor limit, from `/proc/self` and `getrlimit`.
public enum ProcessDescriptors {
    /// Open sockets: connections, and the socket pairs that each URLSession's libcurl handle holds.
    public static func sockets() -> Int {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.filter {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)"))?.hasPrefix("socket:")
                == true
        }.count
    }

    /// This process's TCP connections to `port` on this machine, in any state but closed: the connections its
    /// uploads to one test server left, whatever sockets the tests that run beside it hold meanwhile (a peer's log
    /// fetched, the socket pair of each child process running).
    public static func connections(toPort port: Int) -> Int {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        let ours = Set(
            entries.compactMap { entry -> Substring? in
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)"),
                    target.hasPrefix("socket:[")
                else { return nil }
                return target.dropFirst("socket:[".count).dropLast()
            })
        let remote = String(format: ":%04X", port)
        var count = 0
        for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
            let text = wholeFile(table)
            // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count > 9, fields[2].hasSuffix(remote), ours.contains(fields[9]) else { continue }
                count += 1
            }
        }
        return count
    }

    /// All of a file under /proc, read to its end: Foundation reads such a file's first page only (its size says 0),
    /// and a busy run's socket tables are many pages long.
    private static func wholeFile(_ path: String) -> String {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return "" }
        defer { close(descriptor) }
        return String(decoding: readAll(from: descriptor).bytes, as: UTF8.self)
    }

    /// Open descriptors by kind: `socket`, `pipe`, `file`, and each anonymous inode (`anon_inode:[eventfd]`,
    /// `[eventpoll]`, `[timerfd]`: libdispatch's and libcurl's event loops).
    public static func kinds() -> [String: Int] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        var kinds: [String: Int] = [:]
        for entry in entries {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)")
            else { continue }
            let kind =
                if target.hasPrefix("anon_inode:") { target } else if target.hasPrefix("socket:") {
                    "socket"
                } else if target.hasPrefix("pipe:") { "pipe" } else { "file" }
            kinds[kind, default: 0] += 1
        }
        return kinds
    }

    /// Resident memory in bytes.
    public static func residentBytes() -> Int {
        let statm = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
        let pages = statm.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// The most resident memory this process has had since it started or ``resetPeakResident()``, in bytes (Linux's
    /// VmHWM).
    public static func peakResidentBytes() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
        let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        return kilobytes * 1024
    }

    /// Starts a new peak: writing 5 to clear_refs resets VmHWM to the present resident size.
    public static func resetPeakResident() {
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    }

    /// Runs `body` with the soft limit of open descriptors at most `limit`, as under `ulimit -n`, then restores it.
    public static func withSoftLimit<T>(_ limit: UInt, _ body: () async throws -> T) async throws -> T {
        #if os(Linux)
            let resource = Int32(RLIMIT_NOFILE.rawValue)
        #else
            let resource = RLIMIT_NOFILE
        #endif
        var saved = rlimit()
        guard getrlimit(resource, &saved) == 0 else { return try await body() }
        var lowered = saved
        lowered.rlim_cur = min(saved.rlim_cur, rlim_t(limit))
        setrlimit(resource, &lowered)
        defer { setrlimit(resource, &saved) }
        return try await body()
    }
}
