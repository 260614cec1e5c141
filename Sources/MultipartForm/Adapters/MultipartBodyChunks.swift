/// A form's body as an `AsyncSequence` of byte chunks, for HTTP clients that take one: AsyncHTTPClient,
/// swift-openapi-runtime's `HTTPBody`, Hummingbird and Vapor. Made by ``MultipartFormData/bodyChunks(maximumSize:)``.
///
/// Each iteration starts over from the sequence's first byte (the body's, or the one given to
/// ``MultipartFormData/bodyChunks(maximumSize:startingAt:)``), as ``MultipartFormData/makeBodyStream()`` does, so the
/// sequence can be sent again on a retry unless the form holds a one-shot `InputStream` part. Chunks are copies, so a
/// consumer may keep them. An iteration ends with exactly its bytes (``MultipartFormData/contentLength``, less any
/// offset), or throws the ``MultipartError`` naming the part that failed; it never ends early without one. Files and
/// caller streams are read on the iterating task: a caller stream that blocks in `read` blocks that task's thread.
public struct MultipartBodyChunks: AsyncSequence, Sendable {
    /// A chunk of at most the sequence's maximum size; never empty.
    public typealias Element = ArraySlice<UInt8>
    /// What an iteration throws.
    public typealias Failure = MultipartError

    private let form: MultipartFormData
    private let maximumSize: Int
    private let offset: UInt64

    init(form: MultipartFormData, maximumSize: Int, offset: UInt64) {
        self.form = form
        self.maximumSize = maximumSize
        self.offset = offset
    }

    /// Starts a new iteration at the sequence's first byte.
    public func makeAsyncIterator() -> Iterator {
        Iterator(form: form, maximumSize: maximumSize, offset: offset)
    }

    /// One pass over the body.
    public struct Iterator: AsyncIteratorProtocol {
        private var cursor: BodyChunkCursor

        fileprivate init(form: MultipartFormData, maximumSize: Int, offset: UInt64) {
            cursor = BodyChunkCursor(form: form, offset: offset, maximumSize: maximumSize)
        }

        /// The next chunk, `nil` after the last one.
        ///
        /// - Throws: ``MultipartError`` naming the part at fault: an ``MultipartFormData/appendError`` on the first
        ///   call, or a file or stream that failed or changed.
        public mutating func next() async throws(MultipartError) -> ArraySlice<UInt8>? {
            guard let count = try cursor.nextChunkSize() else { return nil }
            var failure: MultipartError?
            let chunk = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                do throws(MultipartError) {
                    initialized = try cursor.read(into: UnsafeMutableRawBufferPointer(buffer))
                } catch {
                    failure = error
                }
            }
            if let failure { throw failure }
            guard !chunk.isEmpty else {
                cursor.finish()
                return nil
            }
            return chunk[...]
        }
    }
}

extension MultipartFormData {
    /// The body as an `AsyncSequence` of chunks of at most `maximumSize` bytes (1 to 16 MiB), for clients that take
    /// one. Pair it with ``contentLength`` so that the client sends a `Content-Length` (`nil` for a form holding a
    /// stream of unknown length, whose framing is then the client's, chunked):
    ///
    /// ```swift
    /// let length: HTTPBody.Length = form.contentLength.map { .known(Int64($0)) } ?? .unknown
    /// let body = HTTPBody(form.bodyChunks(), length: length, iterationBehavior: .multiple)
    /// ```
    ///
    /// For a client with buffers of its own (AsyncHTTPClient's `ByteBuffer`),
    /// ``bodyChunks(maximumSize:startingAt:makeChunk:)`` fills them in place instead of copying arrays into them.
    ///
    /// - Parameter maximumSize: The most bytes in one chunk, from 1 to 16 MiB; other values count as the nearest.
    /// - Returns: A sequence that reads the form anew on each iteration.
    public func bodyChunks(maximumSize: Int = BufferSize.read) -> MultipartBodyChunks {
        MultipartBodyChunks(form: self, maximumSize: maximumSize, offset: 0)
    }

    /// The body from byte `offset` on, as chunks of at most `maximumSize` bytes: the same bytes as `encode()`'s from
    /// `offset`, found as ``makeBodyStream(startingAt:)`` finds them. Pair it with `contentLength - offset`.
    ///
    /// - Parameters:
    ///   - maximumSize: The most bytes in one chunk, from 1 to 16 MiB; other values count as the nearest.
    ///   - offset: The first byte, from 0 to ``contentLength``.
    /// - Returns: A sequence whose every iteration starts at `offset`. Its first `next()` throws
    ///   ``MultipartError/Reason/offsetPastEnd(offset:contentLength:)`` or
    ///   ``MultipartError/Reason/cannotResumeOneShotStream(offset:)`` when the body cannot start there.
    public func bodyChunks(maximumSize: Int = BufferSize.read, startingAt offset: UInt64) -> MultipartBodyChunks {
        MultipartBodyChunks(form: self, maximumSize: maximumSize, offset: offset)
    }
}
