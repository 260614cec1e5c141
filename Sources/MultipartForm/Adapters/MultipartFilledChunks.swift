/// A form's body as an `AsyncSequence` of chunks of the caller's type, each filled in place by the form's reader:
/// one copy from the page cache into, say, a SwiftNIO `ByteBuffer`. Made by
/// ``MultipartFormData/bodyChunks(maximumSize:startingAt:makeChunk:)``.
///
/// Iterations behave as ``MultipartBodyChunks``'s do: each starts over at the sequence's first byte, ends with
/// exactly its bytes, or throws the ``MultipartError`` naming the part that failed, and reads files and caller
/// streams on the iterating task.
public struct MultipartFilledChunks<Chunk>: AsyncSequence, Sendable {
    /// What an iteration throws: a ``MultipartError``, or whatever the chunk's maker threw.
    public typealias Failure = any Error
    /// Writes the chunk's next bytes into the buffer it is given, at most the size that ``MakeChunk`` was given in
    /// all (less if the body ends first), and returns how many it wrote.
    public typealias Fill = (UnsafeMutableRawBufferPointer) throws(MultipartError) -> Int
    /// Makes one chunk of at most `size` bytes: allocates it, calls `fill` once with room for `size` bytes (or more
    /// than once with less room), and returns it. A chunk that `fill` wrote nothing into ends the iteration with
    /// ``MultipartError/Reason/chunkNotFilled(size:)``.
    public typealias MakeChunk = @Sendable (_ size: Int, _ fill: Fill) throws -> Chunk

    private let form: MultipartFormData
    private let maximumSize: Int
    private let offset: UInt64
    private let makeChunk: MakeChunk

    init(form: MultipartFormData, maximumSize: Int, offset: UInt64, makeChunk: @escaping MakeChunk) {
        self.form = form
        self.maximumSize = maximumSize
        self.offset = offset
        self.makeChunk = makeChunk
    }

    /// Starts a new iteration at the sequence's first byte.
    public func makeAsyncIterator() -> Iterator {
        Iterator(cursor: BodyChunkCursor(form: form, offset: offset, maximumSize: maximumSize), makeChunk: makeChunk)
    }

    /// One pass over the body.
    public struct Iterator: AsyncIteratorProtocol {
        fileprivate var cursor: BodyChunkCursor
        fileprivate let makeChunk: MakeChunk

        /// The next chunk, `nil` after the last one.
        ///
        /// - Throws: ``MultipartError`` naming the part at fault (an ``MultipartFormData/appendError`` on the first
        ///   call, or a file or stream that failed or changed), whatever the chunk's maker threw, or
        ///   ``MultipartError/Reason/chunkNotFilled(size:)`` when it wrote nothing.
        public mutating func next() async throws -> Chunk? {
            guard let size = try cursor.nextChunkSize() else { return nil }
            var written = 0
            // A read's error, kept in case the maker swallows it: the iteration must not go on after a failed read.
            var failure: MultipartError?
            let chunk: Chunk
            do {
                chunk = try makeChunk(size) { (buffer) throws(MultipartError) -> Int in
                    let room = UnsafeMutableRawBufferPointer(rebasing: buffer.prefix(size - written))
                    do throws(MultipartError) {
                        let count = try cursor.read(into: room)
                        written += count
                        return count
                    } catch {
                        failure = error
                        throw error
                    }
                }
            } catch {
                cursor.finish()
                throw failure ?? error
            }
            if let failure { throw failure }
            guard written > 0 else {
                cursor.finish()
                throw MultipartError(.chunkNotFilled(size: size))
            }
            return chunk
        }
    }
}

extension MultipartFormData {
    /// The body from byte `offset` on as chunks that `makeChunk` allocates and the form fills in place, so that an
    /// HTTP client's own buffers receive the bytes with no copy between. With AsyncHTTPClient:
    ///
    /// ```swift
    /// let chunks = form.bodyChunks { size, fill in
    ///     var buffer = ByteBuffer()
    ///     try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size, fill)
    ///     return buffer
    /// }
    /// request.body = .stream(chunks, length: form.contentLength.map { .known(Int64($0)) } ?? .unknown)
    /// ```
    ///
    /// - Parameters:
    ///   - maximumSize: The most bytes in one chunk, from 1 to 16 MiB; other values count as the nearest.
    ///   - offset: The first byte, from 0 to ``contentLength``; pair it with `contentLength - offset`.
    ///   - makeChunk: Makes a chunk of at most `size` bytes, filling it with `fill`; called on the iterating task.
    /// - Returns: A sequence that reads the form anew on each iteration.
    public func bodyChunks<Chunk>(
        maximumSize: Int = BufferSize.copy, startingAt offset: UInt64 = 0,
        makeChunk: @escaping MultipartFilledChunks<Chunk>.MakeChunk
    ) -> MultipartFilledChunks<Chunk> {
        MultipartFilledChunks(form: self, maximumSize: maximumSize, offset: offset, makeChunk: makeChunk)
    }
}
