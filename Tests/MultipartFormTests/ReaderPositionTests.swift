import Testing

@testable import MultipartForm

/// Each transition of the reader's state machine on its own.
@Suite struct ReaderPositionTests {
    /// Byte 0 of a form of three text fields, or of an empty form.
    private func start(partCount: Int) throws -> ReaderPosition? {
        var form = try MultipartFormData(boundary: "B0undary")
        for index in 0..<partCount { form.append("v", name: "f\(index)") }
        return ReaderPosition.seek(to: 0, in: form.bodyParts, delimiterLength: 14, closeLength: 16)
    }

    @Test func aFormStartsAtItsFirstDelimiterWithoutTheLeadingCRLF() throws {
        #expect(try start(partCount: 3) == .delimiter(part: 0, offset: 2))
    }

    @Test func anEmptyFormStartsAtItsCloseDelimiterWithoutTheLeadingCRLF() throws {
        #expect(try start(partCount: 0) == .closeDelimiter(offset: 2))
    }

    @Test func delimiterThenHeadersThenBody() {
        #expect(ReaderPosition.delimiter(part: 1, offset: 9).next(partCount: 3) == .headers(part: 1, offset: 0))
        #expect(ReaderPosition.headers(part: 1, offset: 40).next(partCount: 3) == .body(part: 1, offset: 0))
    }

    @Test func aBodyIsFollowedByTheNextPartsDelimiter() {
        #expect(ReaderPosition.body(part: 1, offset: 5).next(partCount: 3) == .delimiter(part: 2, offset: 0))
    }

    @Test func theLastBodyIsFollowedByTheCloseDelimiter() {
        #expect(ReaderPosition.body(part: 2, offset: 5).next(partCount: 3) == .closeDelimiter(offset: 0))
    }

    @Test func theCloseDelimiterEndsTheBodyAndTheEndIsFinal() {
        #expect(ReaderPosition.closeDelimiter(offset: 7).next(partCount: 3) == .end)
        #expect(ReaderPosition.end.next(partCount: 3) == .end)
    }

    @Test func theReaderWalksEveryPositionInOrder() throws {
        var form = try MultipartFormData(boundary: "B0undary")
        form.append("x", name: "a")
        form.append("y", name: "b")
        let reader = try MultipartReader(form)
        var seen = [reader.position]
        var byte: UInt8 = 0
        while !reader.isAtEnd {
            _ = try withUnsafeMutableBytes(of: &byte) { try reader.read(into: $0) }
            if seen.last.map(Self.segment) != Self.segment(reader.position) { seen.append(reader.position) }
        }
        #expect(
            seen.map(Self.segment) == [
                "delimiter 0", "headers 0", "body 0", "delimiter 1", "headers 1", "body 1", "close", "end",
            ])
        #expect(reader.bytesRead == form.contentLength!)
    }

    private static func segment(_ position: ReaderPosition) -> String {
        switch position {
        case .delimiter(let part, _): "delimiter \(part)"
        case .headers(let part, _): "headers \(part)"
        case .body(let part, _): "body \(part)"
        case .closeDelimiter: "close"
        case .end: "end"
        }
    }
}
