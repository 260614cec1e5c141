import Foundation
import MultipartStream

/// What the command writes for people to read (stderr, `-v`, `-w`, the listings) carries no credential, whoever made
/// the text: the command, the library's errors, URLSession's. Terminals, CI logs and bug reports keep it, and curl
/// prints no password either.
enum Redaction {
    /// `text` with the user information (user and password) of every URL in it left out.
    static func text(_ text: String) -> String {
        // Most text holds no URL with user information: no copy.
        guard text.utf8.contains(UInt8(ascii: "@")), text.contains("://") else { return text }
        let bytes = Array(text.utf8)
        var kept: [UInt8] = []
        kept.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            guard bytes[index] == UInt8(ascii: ":"), index + 2 < bytes.count, bytes[index + 1] == UInt8(ascii: "/"),
                bytes[index + 2] == UInt8(ascii: "/")
            else {
                kept.append(bytes[index])
                index += 1
                continue
            }
            kept.append(contentsOf: bytes[index...(index + 2)])
            index += 3
            // The authority runs to its path, query or fragment, or to the end of the URL in the text.
            var end = index
            while end < bytes.count, !authorityEnds.contains(bytes[end]) { end += 1 }
            if let at = bytes[index..<end].lastIndex(of: UInt8(ascii: "@")) { index = at + 1 }
        }
        return String(decoding: kept, as: UTF8.self)
    }

    private static let authorityEnds = Set("/?#\"'<>` \t\r\n".utf8)

    /// The value of header `name` as `-v` shows it: a credential's hidden (`Basic <hidden>`).
    static func header(_ name: String, value: String) -> String {
        guard CredentialHeaders.contains(name), !value.isEmpty else { return value }
        let scheme = name.lowercased() == "cookie" ? nil : value.split(separator: " ", maxSplits: 1).first
        return (scheme.map { "\($0) " } ?? "") + "<hidden>"
    }
}
