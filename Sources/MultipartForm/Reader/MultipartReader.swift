import Foundation

/// The engine: a pull state machine that fills a caller's buffer with the next bytes of a form's body.
///
/// Every way out of the library (``MultipartBodyStream``, `encode()`, `writeEncodedData(to:)`) is a loop over
/// ``read(into:)``. The reader knows nothing of `InputStream`'s rules; it only copies delimiters (encoded when the
/// reader is made) and headers (encoded at append time) and reads bodies straight into the buffer. It allocates
/// nothing per read.
final class MultipartReader {
    let parts: [BodyPart]
    /// `\r\n--boundary\r\n`.
    private let delimiter: [UInt8]
    /// `\r\n--boundary--\r\n`.
    private let closeDelimiter: [UInt8]
    private(set) var position: ReaderPosition
    /// The file or stream of the part being read, if it has one.
    var openBody: OpenPartBody?
    /// Set by the first failure; every later read throws it again.
    private(set) var failure: MultipartError?
    /// Bytes produced so far, from ``startOffset``.
    var bytesRead: UInt64 = 0
    /// Exact length of the whole body; `nil` while a part's is unknown.
    let contentLength: UInt64?
    /// The byte of the body the reader started at.
    let startOffset: UInt64

    /// A reader whose first byte is byte `offset` of the body: 0 for the whole body, `contentLength` for none.
    ///
    /// Files are opened at that byte with `lseek` and stream-factory parts are read and dropped up to it when the
    /// reader reaches them; nothing before the part that holds `offset` is opened.
    ///
    /// - Throws: ``MultipartError/Reason/offsetPastEnd(offset:contentLength:)``, or
    ///   ``MultipartError/Reason/cannotResumeOneShotStream(offset:)`` naming a one-shot stream part that `offset` is
    ///   inside or after, since its bytes before `offset` were read once already.
    init(_ form: MultipartFormData, startingAt offset: UInt64 = 0) throws(MultipartError) {
        parts = form.bodyParts
        delimiter = Array("\r\n--\(form.boundary)\r\n".utf8)
        closeDelimiter = Array("\r\n--\(form.boundary)--\r\n".utf8)
        contentLength = form.contentLength
        startOffset = offset
        guard
            let position = ReaderPosition.seek(
                to: offset, in: parts, delimiterLength: delimiter.count, closeLength: closeDelimiter.count)
        else {
            // Past the start of a stream of unknown length: its bytes before the offset went out once already.
            if let index = form.partOfUnknownLength {
                throw MultipartError(
                    .cannotResumeOneShotStream(offset: offset), partIndex: index, partName: parts[index].name)
            }
            throw MultipartError(.offsetPastEnd(offset: offset, contentLength: contentLength ?? 0))
        }
        self.position = position
        // At 0 no part has been read: nothing to look for.
        guard offset > 0 else { return }
        let reached = position.part ?? parts.count
        for (index, part) in parts.enumerated() where !part.body.isReplayable {
            let isUntouched = index > reached || (index == reached && position.isBeforeBody)
            guard isUntouched else {
                throw MultipartError(.cannotResumeOneShotStream(offset: offset), partIndex: index, partName: part.name)
            }
        }
    }

    deinit {
        openBody?.close()
    }

    var isAtEnd: Bool { position == .end }

    /// Fills as much of `buffer` as the body has left, across part boundaries, and returns the count: 0 only at the
    /// end. A source that fails, or differs from what was appended, throws the error naming its part; the reader
    /// then stays failed.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(MultipartError) -> Int {
        try read(into: buffer, stoppingAtFileBody: false)
    }

    /// ``read(into:)``, stopping short at the start of a file part's body when `stoppingAtFileBody` is set, so that
    /// a writer can hand that body to the kernel (``copyFileBody(to:writing:)``); 0 then means "at a file body"
    /// unless ``isAtEnd``.
    func read(
        into buffer: UnsafeMutableRawBufferPointer,
        stoppingAtFileBody: Bool
    ) throws(MultipartError) -> Int {
        if let failure { throw failure }
        var filled = 0
        do {
            while filled < buffer.count, position != .end, !(stoppingAtFileBody && isInFileBody) {
                let space = UnsafeMutableRawBufferPointer(rebasing: buffer[filled...])
                filled += try step(into: space)
            }
        } catch {
            let failure = MultipartError(
                error, partIndex: currentPart, partName: currentPart.flatMap { parts[$0].name })
            fail(failure)
            throw failure
        }
        bytesRead += UInt64(filled)
        return filled
    }

    /// Whether the reader is in a file part's body.
    var isInFileBody: Bool {
        guard case .body(let part, _) = position, case .file = parts[part].body else { return false }
        return true
    }

    /// Stops reading: closes the open file or stream. Later reads throw `failure`.
    func fail(_ failure: MultipartError) {
        self.failure = failure
        openBody?.close()
        openBody = nil
    }

    /// Copies from the current segment into `space` (never empty) and advances; returns the count copied.
    private func step(into space: UnsafeMutableRawBufferPointer) throws(MultipartError.Reason) -> Int {
        switch position {
        case .delimiter(let part, let offset):
            return copy(delimiter, from: offset, into: space) { .delimiter(part: part, offset: $0) }
        case .headers(let part, let offset):
            return copy(parts[part].headers.bytes, from: offset, into: space) { .headers(part: part, offset: $0) }
        case .body(let part, let offset):
            return try readBody(of: part, from: offset, into: space)
        case .closeDelimiter(let offset):
            return copy(closeDelimiter, from: offset, into: space) { .closeDelimiter(offset: $0) }
        case .end:
            return 0
        }
    }

    /// Copies what fits of `segment` from `offset`, then moves to `resume(newOffset)` or, at the segment's end, to
    /// the next segment.
    private func copy(
        _ segment: [UInt8],
        from offset: Int,
        into space: UnsafeMutableRawBufferPointer,
        resume: (Int) -> ReaderPosition
    ) -> Int {
        let count = min(segment.count - offset, space.count)
        segment.withUnsafeBytes { space.baseAddress!.copyMemory(from: $0.baseAddress! + offset, byteCount: count) }
        position = offset + count == segment.count ? position.next(partCount: parts.count) : resume(offset + count)
        return count
    }

    private func readBody(
        of part: Int,
        from offset: UInt64,
        into space: UnsafeMutableRawBufferPointer
    ) throws(MultipartError.Reason) -> Int {
        let body = parts[part].body
        // In-memory bodies, most parts of most forms, take the short way: nothing to open, check or close.
        if case .bytes(let data) = body {
            let count = min(space.count, data.count - Int(offset))
            data.withUnsafeBytes {
                space.baseAddress!.copyMemory(from: $0.baseAddress! + Int(offset), byteCount: count)
            }
            let end = Int(offset) + count == data.count
            position = end ? position.next(partCount: parts.count) : .body(part: part, offset: offset + UInt64(count))
            return count
        }
        if openBody == nil {
            // At the part's first byte, or at a later one when the reader started there.
            openBody = try OpenPartBody.open(body, at: offset)
        }
        let count: Int
        let wanted = Int(min(UInt64(space.count), body.length.map { $0 - offset } ?? .max))
        if wanted == 0 {
            count = 0
        } else {
            count = try openBody!.read(
                into: UnsafeMutableRawBufferPointer(rebasing: space[..<wanted]), alreadyRead: offset)
        }
        try advance(part, from: offset, by: count)
        return count
    }

    /// Moves `count` bytes on from `offset` in the part's body; at its last byte, not a read later, checks that the
    /// source has no more and closes it, so a file is closed as soon as it is sent.
    func advance(_ part: Int, from offset: UInt64, by count: Int) throws(MultipartError.Reason) {
        // A body of unknown length ends where its source does: the read that gives nothing.
        if offset + UInt64(count) == parts[part].body.length ?? (count == 0 ? offset : .max) {
            try openBody?.finish()
            openBody?.close()
            openBody = nil
            position = position.next(partCount: parts.count)
        } else {
            position = .body(part: part, offset: offset + UInt64(count))
        }
    }

    /// The part the reader is in, `nil` in the close delimiter.
    private var currentPart: Int? { position.part }
}
