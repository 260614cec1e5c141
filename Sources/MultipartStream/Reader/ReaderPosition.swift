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

    /// The first position of a form of `partCount` parts.
    static func start(partCount: Int) -> ReaderPosition {
        partCount > 0 ? .delimiter(part: 0, offset: 2) : .closeDelimiter(offset: 2)
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
