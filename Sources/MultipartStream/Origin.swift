import Foundation

/// Where a URL's requests go, for deciding what may follow a redirect: scheme and host lowercased, and the port
/// written out, the scheme's default when the URL names none, so that `http://h/` and `http://H:80/` are one origin.
package struct Origin: Hashable, Sendable {
    var scheme: String
    var host: String
    var port: Int

    /// The URL's origin; `nil` for a URL without a scheme or host, which is the origin of nothing.
    package init?(_ url: URL?) {
        guard let url, let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        guard let port = url.port ?? Self.defaultPort(of: scheme) else { return nil }
        self.scheme = scheme
        self.host = host
        self.port = port
    }

    /// The origin as RFC 6454 serializes it, with its port: what a queue keys its knowledge of a server by.
    package var serialized: String { "\(scheme)://\(host):\(port)" }

    private static func defaultPort(of scheme: String) -> Int? {
        switch scheme {
        case "http", "ws": 80
        case "https", "wss": 443
        default: nil
        }
    }
}

extension URL {
    /// The most bytes a URL a server chose may have: far past any real upload URL, far short of what would cost
    /// memory or a header's room.
    static let longestServerChosen = 8_192

    /// Why a URL a server chose (a `Location`) cannot be requested, or `nil` when it can: another scheme than
    /// http or https, no host, a user or password in it (the server's choice must not carry credentials, nor
    /// pass for a URL the caller wrote), or a length past ``longestServerChosen``.
    var flawAsServerChosen: String? {
        guard absoluteString.utf8.count <= Self.longestServerChosen else {
            return "it is longer than \(Self.longestServerChosen) bytes"
        }
        guard let scheme = scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            return "its scheme is not http or https"
        }
        guard let host, !host.isEmpty else { return "it has no host" }
        guard user == nil, password == nil else { return "it holds a user or password" }
        return nil
    }
}

extension URL {
    /// This URL with the user and password of `other`.
    func withUserInfo(of other: URL) -> URL {
        guard var components = URLComponents(url: self, resolvingAgainstBaseURL: true),
            let source = URLComponents(url: other, resolvingAgainstBaseURL: true)
        else { return self }
        components.percentEncodedUser = source.percentEncodedUser
        components.percentEncodedPassword = source.percentEncodedPassword
        return components.url ?? self
    }
}
