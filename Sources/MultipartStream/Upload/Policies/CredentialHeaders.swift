/// The headers that carry a caller's credentials, named once for the package: they never follow a redirect to
/// another origin, a queue never writes them to disk, and the command's `-v` hides their values.
package enum CredentialHeaders {
    package static let names = ["Authorization", "Cookie", "Proxy-Authorization"]

    /// Whether the header `name`, in any case, carries a credential.
    package static func contains(_ name: String) -> Bool {
        names.contains { $0.caseInsensitiveCompare(name) == .orderedSame }
    }
}
