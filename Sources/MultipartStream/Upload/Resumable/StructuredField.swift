import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The structured-field items (RFC 9651) the draft's headers carry: booleans and integers, with parameters
/// ignored, as the RFC lets a recipient that does not know them; and the strings `Idempotency-Key` carries.
package enum StructuredField {
    /// `value` as a string item: quoted, with `"` and `\` escaped. `value` holds printable ASCII only (an upload's ID).
    package static func string(_ value: String) -> String {
        "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// `?1` or `?0`.
    static func boolean(_ value: Bool) -> String {
        value ? "?1" : "?0"
    }

    /// The boolean of a field's value, or `nil` if it is not one.
    static func boolean(_ field: String) -> Bool? {
        switch bareItem(of: field) {
        case "?1": true
        case "?0": false
        default: nil
        }
    }

    /// The integer of a field's value (an optional `-` and 1 to 15 digits), or `nil` if it is not one.
    static func integer(_ field: String) -> Int64? {
        guard let item = bareItem(of: field) else { return nil }
        let digits = item.hasPrefix("-") ? item.dropFirst() : Substring(item)
        guard (1...15).contains(digits.count), digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            return nil
        }
        return Int64(item)
    }

    /// The item of a field's value without surrounding spaces or parameters; `nil` for an empty value or a list.
    private static func bareItem(of field: String) -> String? {
        let trimmed = field.trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
        let item = trimmed.prefix { $0 != ";" }
        guard !item.isEmpty, !item.contains(","), !item.contains(" ") else { return nil }
        return String(item)
    }
}
