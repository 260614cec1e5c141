import Foundation

/// Reads one append of a form of unknown length out of the ``AppendBuffer`` that holds it, in place.
final class BufferedBytesReader {
    private let buffer: AppendBuffer
    private let range: Range<UInt64>
    private var failure: MultipartError?
    private(set) var bytesRead: UInt64 = 0

    init(_ buffer: AppendBuffer, range: Range<UInt64>) {
        self.buffer = buffer
        self.range = range
    }

    var isAtEnd: Bool { bytesRead == UInt64(range.count) && failure == nil }

    func read(into destination: UnsafeMutableRawBufferPointer) throws(MultipartError) -> Int {
        if let failure { throw failure }
        let offset = range.lowerBound + bytesRead
        guard offset < range.upperBound, !destination.isEmpty else { return 0 }
        guard let count = buffer.copy(from: offset, upTo: range.upperBound, into: destination) else {
            // The buffer moved on: never send other bytes in their place.
            let failure = MultipartError(.offsetNotBuffered(offset: offset, bufferStart: buffer.held.start))
            fail(failure)
            throw failure
        }
        bytesRead += UInt64(count)
        return count
    }

    func fail(_ failure: MultipartError) {
        self.failure = failure
    }
}

extension BufferedBytesReader: BodyReader {}
