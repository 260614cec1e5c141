import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The directories swift-corelibs-foundation makes for its shared URL cache and cookie storage the first time any
/// URLSession configuration is made (`~/.cache/org.swift.foundation.URLCache/NAME` and `~/.local/share/NAME`), though
/// the command stores nothing in either: the upload's sessions are ephemeral. Those that did not exist before the
/// command ran are removed when it ends, if they are still empty; nothing else is touched.
struct FoundationDirectories {
    /// The directories Foundation may make, each after its parents, that did not exist when the command started.
    private let made: [String]

    /// Notes which of the directories do not exist yet.
    init() {
        #if canImport(Darwin)
            made = []
        #else
            let manager = FileManager.default
            let caches = manager.urls(for: .cachesDirectory, in: .userDomainMask).first
            let support = manager.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            // As Foundation names them: the bundle identifier or process name, and the bundle's directory name.
            let cacheName = (Bundle.main.bundleIdentifier ?? ProcessInfo.processInfo.processName)
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "\\", with: "_")
                .replacingOccurrences(of: ":", with: "_")
            var bundleName = Bundle.main.bundlePath.components(separatedBy: "/").last ?? ""
            if let dot = bundleName.range(of: ".", options: .backwards) {
                bundleName = String(bundleName[..<dot.lowerBound])
            }
            var paths: [String] = []
            if let caches {
                let cache = caches.appendingPathComponent("org.swift.foundation.URLCache", isDirectory: true)
                paths += Self.chain(to: cache.appendingPathComponent(cacheName, isDirectory: true))
            }
            if let support, !bundleName.isEmpty {
                paths += Self.chain(to: support.appendingPathComponent(bundleName, isDirectory: true))
            }
            made = paths.filter { !manager.fileExists(atPath: $0) }
        #endif
    }

    /// `directory` and its parents up to, not including, the home directory.
    private static func chain(to directory: URL) -> [String] {
        // $HOME, as Foundation's own directories follow it, else the user's entry.
        let home = URL(
            fileURLWithPath: ProcessInfo.processInfo.environment["HOME"]
                ?? FileManager.default.homeDirectoryForCurrentUser.path
        ).standardizedFileURL.path
        var paths: [String] = []
        var current = directory.standardizedFileURL
        while current.path.hasPrefix(home + "/") {
            paths.append(current.path)
            current = current.deletingLastPathComponent()
        }
        return paths
    }

    /// Removes the directories made since ``init()`` that are empty, deepest first: `rmdir` removes no other.
    func removeEmpty() {
        for path in made.sorted(by: { $0.count > $1.count }) {
            _ = rmdir(path)
        }
    }
}
