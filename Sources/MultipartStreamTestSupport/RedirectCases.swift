import Foundation

/// The redirects the credential tests send through every path: where each `Location` leads, and URLs with a user and
/// password in them.
public enum RedirectCases {
    /// `ada:pw`, as libcurl sends it.
    public static let basic = "Basic YWRhOnB3"
    /// Every redirect status.
    public static let codes = [301, 302, 303, 307, 308]

    /// The `Location`s to test, by where they lead: to `other` (another port), or back to `first`.
    public static func locations(first: UploadServer, other: UploadServer) -> [(location: String, leaves: Bool)] {
        let (a, b) = (first.url().port!, other.url().port!)
        return [
            ("http://127.0.0.1:\(b)/landed", true), ("//127.0.0.1:\(b)/landed", true),
            ("http://127.0.0.1:\(a)/landed", false), ("//127.0.0.1:\(a)/landed", false), ("/landed", false),
            ("../landed", false),
        ]
    }

    /// `server`'s URL of `path`, with ada:pw in it.
    public static func withCredentials(_ server: UploadServer, _ path: String) -> URL {
        URL(string: server.url(path).absoluteString.replacingOccurrences(of: "http://", with: "http://ada:pw@"))!
    }

    /// The path of the Node server's route that answers `code` with `location`.
    public static func redirectPath(_ code: Int, to location: String) -> String {
        "/redirect/\(code)?to=" + location.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }
}
