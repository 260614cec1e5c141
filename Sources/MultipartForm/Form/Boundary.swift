/// The delimiter between parts (RFC 2046 §5.1.1).
package enum Boundary {
    /// A boundary with 128 random bits from the system's cryptographic source (`getrandom`, `SecRandom`),
    /// so no body can contain it by accident or by an attacker's guess.
    static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        let high = generator.next() as UInt64
        let low = generator.next() as UInt64
        return "MultipartStream-" + hex(high) + hex(low)
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// Whether `boundary` is 1–70 `bchars` that do not end in a space.
    package static func isValid(_ boundary: String) -> Bool {
        let bytes = Array(boundary.utf8)
        guard (1...70).contains(bytes.count), bytes.last != UInt8(ascii: " ") else { return false }
        return bytes.allSatisfy(isBoundaryCharacter)
    }

    /// `multipart/SUBTYPE; boundary=B`, quoting B only when it is not a token: some servers cannot parse a
    /// quoted boundary, and RFC 2045 requires the quotes for the rest.
    static func contentType(for boundary: String, subtype: String) -> String {
        let value = boundary.utf8.allSatisfy(isTokenCharacter) ? boundary : "\"\(boundary)\""
        return "multipart/\(subtype); boundary=\(value)"
    }

    private static func isBoundaryCharacter(_ byte: UInt8) -> Bool {
        isAlphanumeric(byte) || "'()+_,-./:=? ".utf8.contains(byte)
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
    }

    /// RFC 9110 `tchar`; also what the `multipart` command allows in `-H` names and `-X` methods.
    package static func isTokenCharacter(_ byte: UInt8) -> Bool {
        isAlphanumeric(byte) || "!#$%&'*+-.^_`|~".utf8.contains(byte)
    }
}
