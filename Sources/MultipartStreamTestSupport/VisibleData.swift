import Foundation

extension Data {
    /// The bytes as text with CR and LF visible, for readable golden-body comparisons.
    public var visible: String {
        String(decoding: self, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "⏎\n")
    }
}

extension Sequence where Element: DataProtocol {
    /// The pieces as one `Data`, appended piece by piece: `Data(pieces.joined())` copies byte by byte, which takes
    /// seconds of a test built unoptimized for a few megabytes.
    public func concatenated() -> Data {
        reduce(into: Data()) { $0.append(contentsOf: $1) }
    }
}
