import Foundation

extension Data {
    /// The bytes as text with CR and LF visible, for readable golden-body comparisons.
    public var visible: String {
        String(decoding: self, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "⏎\n")
    }
}
