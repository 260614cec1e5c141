import Foundation

extension ResumableUpload {
    /// The interop version each origin's server named when it refused a newer one (`NIOResumableUpload` answers a
    /// `400` naming 6), kept for the process: the next small form to it goes in one request in that version at once,
    /// rather than in two.
    package enum NamedVersions {
        private static let named = LockedValue<[Origin: InteropVersion]>([:])

        /// The version `url`'s server named, if one did.
        static func version(for url: URL?) -> InteropVersion? {
            guard let origin = Origin(url) else { return nil }
            return named.withLock { $0[origin] }
        }

        /// Forgets every version named: for trials whose every upload starts from no knowledge, as another process
        /// does.
        package static func forgetAll() {
            named.withLock { $0.removeAll() }
        }

        /// `url`'s server named `version`.
        static func note(_ version: InteropVersion, for url: URL?) {
            guard let origin = Origin(url) else { return }
            named.withLock { $0[origin] = version }
        }
    }
}
