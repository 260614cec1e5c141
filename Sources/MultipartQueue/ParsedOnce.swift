import Foundation
import MultipartStream

/// What texts that repeat parse to, each text parsed once: most queues send to one URL or a few, so that a pass over
/// many uploads parses a handful of URLs, and every upload of one holds the one value.
struct ParsedOnce<Value> {
    private var found: [String: Value] = [:]
    private let parse: (String) -> Value

    init(_ parse: @escaping (String) -> Value) {
        self.parse = parse
    }

    /// What `text` parses to.
    mutating func callAsFunction(_ text: String) -> Value {
        if let value = found[text] { return value }
        let value = parse(text)
        found[text] = value
        return value
    }
}

extension ParsedOnce where Value == Origin? {
    /// The origins of upload URLs.
    static var origins: Self { Self { Origin(URL(string: $0)) } }
}

extension ParsedOnce where Value == URL? {
    /// Upload URLs.
    static var urls: Self { Self { URL(string: $0) } }
}
