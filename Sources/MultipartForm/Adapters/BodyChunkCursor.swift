/// One pass over a form's body, chunk by chunk: the iteration state that ``MultipartBodyChunks`` and
/// ``MultipartFilledChunks`` share, whatever their chunks are made of.
struct BodyChunkCursor {
    /// The largest chunk made, whatever is asked: a chunk is allocated whole, and a body of gigabytes must not be.
    static let largestChunk = 16 << 20

    private let reader: MultipartReader?
    /// The most bytes in one chunk, from 1 to ``largestChunk``.
    private let maximumSize: Int
    /// Why the iteration cannot start (the form's append error, an offset it cannot start at), thrown by the first
    /// ``nextChunkSize()``, or `nil` once thrown.
    private var startError: MultipartError?
    /// Set after the last chunk or the first error: later chunks are `nil`.
    private var isFinished = false

    /// A pass from byte `offset` on, in chunks of at most `maximumSize` bytes (other sizes than 1 to 16 MiB count as
    /// the nearest).
    init(form: MultipartFormData, offset: UInt64, maximumSize: Int) {
        self.maximumSize = min(max(1, maximumSize), Self.largestChunk)
        do throws(MultipartError) {
            reader = try MultipartReader(form, startingAt: offset)
            startError = form.appendError
        } catch {
            reader = nil
            startError = form.appendError ?? error
        }
    }

    /// The size of the next chunk; `nil` after the last one or an error.
    mutating func nextChunkSize() throws(MultipartError) -> Int? {
        guard !isFinished else { return nil }
        if let startError {
            isFinished = true
            throw startError
        }
        guard let reader else { return nil }
        // A form of unknown length ends where the reader does; a read short of the chunk reaches that end.
        let left =
            reader.contentLength.map { $0 - reader.startOffset - reader.bytesRead } ?? (reader.isAtEnd ? 0 : .max)
        let count = Int(min(UInt64(maximumSize), left))
        guard count > 0 else {
            isFinished = true
            return nil
        }
        return count
    }

    /// Fills `buffer` with the next bytes, looping over short reads, and returns the count (less than the buffer only
    /// at the end). The first error ends the iteration.
    mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws(MultipartError) -> Int {
        guard let reader, !isFinished else { return 0 }
        do throws(MultipartError) {
            return try reader.read(into: buffer)
        } catch {
            isFinished = true
            throw error
        }
    }

    /// Ends the iteration: later chunks are `nil`.
    mutating func finish() {
        isFinished = true
    }
}
