extension String {
    /// `bytes` as text when they are valid UTF-8, else `nil`. The standard library's `init?(validating:as:)` says the
    /// same from macOS 15 and iOS 18 only; this holds at the package's floor: decoding replaces every invalid
    /// sequence with U+FFFD, so the text gives back the same bytes exactly when there was none.
    package init?<Bytes: Collection>(validUTF8 bytes: Bytes) where Bytes.Element == UInt8 {
        let decoded = String(decoding: bytes, as: UTF8.self)
        guard decoded.utf8.elementsEqual(bytes) else { return nil }
        self = decoded
    }
}
