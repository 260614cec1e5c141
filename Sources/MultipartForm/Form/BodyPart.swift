import Foundation

/// One part of a form: its encoded header block and where its body comes from.
package struct BodyPart: Sendable {
    /// The field name, kept to name the part in errors and in ``MultipartFormData/parts``.
    package var name: String?
    /// The file name as given (the header holds it escaped).
    package var fileName: String?
    package var headers: PartHeaders
    package var body: Body

    package init(name: String?, fileName: String?, headers: PartHeaders, body: Body) {
        (self.name, self.fileName, self.headers, self.body) = (name, fileName, headers, body)
    }

    /// Where a part's body bytes come from, and how many there are.
    package enum Body: Sendable {
        case bytes(Data)
        /// A file, and its identity when it was appended.
        case file(URL, FileIdentity)
        /// A caller's stream, read once: `length` bytes, or, when `nil`, as many as it yields before its end; then
        /// `spools` says whether an upload that needs the length may copy it to a temporary file first.
        case stream(OneShotStream, length: UInt64?, spools: Bool = true)
        case streamFactory(@Sendable () throws -> InputStream, length: UInt64)

        /// The body's length; `nil` for a stream of unknown length until it has been read.
        package var length: UInt64? {
            switch self {
            case .bytes(let data): UInt64(data.count)
            case .file(_, let identity): identity.length
            case .stream(_, let length, _): length
            case .streamFactory(_, let length): length
            }
        }

        /// Whether a second read of the form can produce this body again.
        var isReplayable: Bool {
            if case .stream = self { return false }
            return true
        }
    }

    /// Header and body bytes; delimiters are the form's. `nil` while the body's length is unknown.
    package var length: UInt64? { body.length.map { UInt64(headers.bytes.count) + $0 } }

    /// Whether the part's headers, or its body when it is in memory, hold `boundary`'s text. Files and streams are
    /// not read before they are sent; against them stands the boundary's 128 random bits.
    func contains(_ boundary: String) -> Bool {
        let needle = Array(boundary.utf8)
        if Self.search(needle, in: headers.bytes) { return true }
        if case .bytes(let data) = body { return data.withUnsafeBytes { Self.search(needle, in: $0) } }
        return false
    }

    /// memchr for the first byte, then memcmp: a boundary's first byte is rare enough in real data.
    private static func search(_ needle: [UInt8], in haystack: some ContiguousBytes) -> Bool {
        haystack.withUnsafeBytes { bytes in
            needle.withUnsafeBytes { pattern in
                guard let base = bytes.baseAddress, let first = pattern.first, bytes.count >= pattern.count else {
                    return false
                }
                let last = base + (bytes.count - pattern.count)
                var cursor = base
                while cursor <= last, let found = memchr(cursor, Int32(first), last - cursor + 1) {
                    if memcmp(found, pattern.baseAddress!, pattern.count) == 0 { return true }
                    cursor = UnsafeRawPointer(found) + 1
                }
                return false
            }
        }
    }
}

/// A caller's `InputStream`, which can be read once: the first reader to reach the part claims it.
package final class OneShotStream: @unchecked Sendable {
    // @unchecked: the stream is touched only by the one reader that claimed it, and the claim is locked.
    private let lock = Lock()
    private var stream: InputStream?

    init(_ stream: InputStream) {
        self.stream = stream
    }

    /// The stream for the first caller, `nil` for every later one.
    func claim() -> InputStream? {
        lock.withLock {
            defer { stream = nil }
            return stream
        }
    }
}
