/// Where a ``MultipartReader`` stands in the body. Each part is a delimiter, its header block and its body; the
/// close delimiter ends the form.
///
/// The first delimiter and an empty form's close delimiter start at offset 2: they drop the CRLF that, elsewhere,
/// ends the previous part's body.
enum ReaderPosition: Equatable {
    case delimiter(part: Int, offset: Int)
    case headers(part: Int, offset: Int)
    case body(part: Int, offset: UInt64)
    case closeDelimiter(offset: Int)
    case end

    /// The position `offset` bytes into a body of `parts`, delimited by `delimiterLength`-byte delimiters and a
    /// `closeLength`-byte close delimiter (both with their leading CRLF), found from the parts' lengths: the work
    /// is per part, never per byte. `nil` past the body's end, or past the first byte of a body of unknown length.
    static func seek(
        to offset: UInt64,
        in parts: [BodyPart],
        delimiterLength: Int,
        closeLength: Int
    ) -> ReaderPosition? {
        var remaining = offset
        for (part, bodyPart) in parts.enumerated() {
            let delimiterStart = part == 0 ? 2 : 0
            let delimiter = UInt64(delimiterLength - delimiterStart)
            if remaining < delimiter { return .delimiter(part: part, offset: delimiterStart + Int(remaining)) }
            remaining -= delimiter
            let headers = UInt64(bodyPart.headers.bytes.count)
            if remaining < headers { return .headers(part: part, offset: Int(remaining)) }
            remaining -= headers
            // Past the start of a body of unknown length, no position is known before it is read.
            guard let length = bodyPart.body.length else { return remaining == 0 ? .body(part: part, offset: 0) : nil }
            if remaining < length { return .body(part: part, offset: remaining) }
            remaining -= length
        }
        let closeStart = parts.isEmpty ? 2 : 0
        let close = UInt64(closeLength - closeStart)
        if remaining < close { return .closeDelimiter(offset: closeStart + Int(remaining)) }
        return remaining == close ? .end : nil
    }

    /// The part the position is in; `nil` in the close delimiter and at the end.
    var part: Int? {
        switch self {
        case .delimiter(let part, _), .headers(let part, _), .body(let part, _): part
        case .closeDelimiter, .end: nil
        }
    }

    /// Whether no byte of its part's body comes before the position: in the delimiter, the headers, or at the body's
    /// first byte.
    var isBeforeBody: Bool {
        switch self {
        case .delimiter, .headers: true
        case .body(_, let offset): offset == 0
        case .closeDelimiter, .end: false
        }
    }

    /// The position after the segment at `self` is complete.
    func next(partCount: Int) -> ReaderPosition {
        switch self {
        case .delimiter(let part, _): .headers(part: part, offset: 0)
        case .headers(let part, _): .body(part: part, offset: 0)
        case .body(let part, _) where part + 1 < partCount: .delimiter(part: part + 1, offset: 0)
        case .body: .closeDelimiter(offset: 0)
        case .closeDelimiter, .end: .end
        }
    }
}
