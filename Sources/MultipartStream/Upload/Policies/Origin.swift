import Foundation

/// Where a URL's requests go, for deciding what may follow a redirect: scheme and host lowercased, and the port
/// written out, the scheme's default when the URL names none, so that `http://h/` and `http://H:80/` are one origin.
struct Origin: Hashable, Sendable {
    var scheme: String
    var host: String
    var port: Int

    /// The URL's origin; `nil` for a URL without a scheme or host, which is the origin of nothing.
    init?(_ url: URL?) {
        guard let url, let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        guard let port = url.port ?? Self.defaultPort(of: scheme) else { return nil }
        self.scheme = scheme
        self.host = host
        self.port = port
    }

    private static func defaultPort(of scheme: String) -> Int? {
        switch scheme {
        case "http", "ws": 80
        case "https", "wss": 443
        default: nil
        }
    }
}
