import Foundation

/// The file or stream behind the part the reader is in, opened when the reader reaches the part and closed when it
/// leaves it, so a form holds at most one descriptor at a time. In-memory bodies need no opening.
enum OpenPartBody {
    case file(RegularFile, expectedLength: UInt64)
    case stream(InputStream, expectedLength: UInt64)

    /// Opens the body's source, checking what can be checked before the first byte; `nil` for in-memory bodies.
    static func open(_ body: BodyPart.Body) throws(MultipartError.Reason) -> OpenPartBody? {
        switch body {
        case .bytes:
            return nil
        case .file(let url, let length):
            let file: RegularFile
            do {
                file = try RegularFile(opening: url)
            } catch .fileNotFound {
                throw .fileVanished(url)
            }
            guard file.length == length else {
                file.close()
                throw .fileSizeChanged(url, expected: length, actual: file.length)
            }
            return .file(file, expectedLength: length)
        case .stream(let oneShot, let length):
            guard let stream = oneShot.claim() else { throw .streamAlreadyConsumed }
            return try openStream(stream, length: length)
        case .streamFactory(let makeStream, let length):
            let stream: InputStream
            do {
                stream = try makeStream()
            } catch {
                throw .streamFactoryFailed(error)
            }
            return try openStream(stream, length: length)
        }
    }

    private static func openStream(_ stream: InputStream, length: UInt64) throws(MultipartError.Reason) -> OpenPartBody
    {
        stream.open()
        // Foundation traps when `streamError` is read on a stream without one: only after `.error`.
        guard stream.streamStatus != .error else {
            let error = stream.streamError
            stream.close()
            throw .streamFailed(error)
        }
        return .stream(stream, expectedLength: length)
    }

    /// Reads up to `buffer.count` bytes, `read` having been read already; the caller never asks past the length.
    func read(into buffer: UnsafeMutableRawBufferPointer, alreadyRead: UInt64) throws(MultipartError.Reason) -> Int {
        switch self {
        case .file(let file, let expected):
            let count = try file.read(into: buffer)
            guard count > 0 else {
                throw .fileSizeChanged(file.url, expected: expected, actual: (try? file.currentLength()) ?? alreadyRead)
            }
            return count
        case .stream(let stream, let expected):
            let count = stream.read(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), maxLength: buffer.count)
            if count > 0 { return count }
            if count == 0 { throw .streamEndedEarly(expected: expected, received: alreadyRead) }
            throw .streamFailed(stream.streamError)
        }
    }

    /// Checks, once every expected byte has been read, that the source has no more: a file that grew while it was
    /// read, or a stream longer than declared, fails rather than be cut short silently.
    func finish() throws(MultipartError.Reason) {
        switch self {
        case .file(let file, let expected):
            let length = try file.currentLength()
            guard length == expected else { throw .fileSizeChanged(file.url, expected: expected, actual: length) }
        case .stream(let stream, let expected):
            // `hasBytesAvailable` false is the end for the blocking streams URLSession reads; only probe otherwise.
            guard stream.hasBytesAvailable else { return }
            var probe: UInt8 = 0
            let count = stream.read(&probe, maxLength: 1)
            if count > 0 { throw .streamLongerThanDeclared(length: expected) }
            if count < 0 { throw .streamFailed(stream.streamError) }
        }
    }

    func close() {
        switch self {
        case .file(let file, _): file.close()
        case .stream(let stream, _): stream.close()
        }
    }
}
