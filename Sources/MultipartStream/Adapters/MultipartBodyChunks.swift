/// A form's body as an `AsyncSequence` of byte chunks, for HTTP clients that take one: AsyncHTTPClient,
/// swift-openapi-runtime's `HTTPBody`, Hummingbird and Vapor. Made by ``MultipartFormData/bodyChunks(maximumSize:)``.
///
/// Each iteration starts over from the first byte, as ``MultipartFormData/makeBodyStream()`` does, so the sequence
/// can be sent again on a retry unless the form holds a one-shot `InputStream` part. Chunks are copies, so a
/// consumer may keep them. An iteration ends with exactly ``MultipartFormData/contentLength`` bytes, or throws the
/// ``MultipartError`` naming the part that failed; it never ends early without one. Files and caller streams are read
/// on the iterating task: a caller stream that blocks in `read` blocks that task's thread.
public struct MultipartBodyChunks: AsyncSequence, Sendable {
    /// A chunk of at most the sequence's maximum size; never empty.
    public typealias Element = ArraySlice<UInt8>
    /// What an iteration throws.
    public typealias Failure = MultipartError

    private let form: MultipartFormData
    private let maximumSize: Int

    /// The largest chunk made, whatever is asked: a chunk is allocated whole, and a body of gigabytes must not be.
    static let largestChunk = 16 << 20

    init(form: MultipartFormData, maximumSize: Int) {
        self.form = form
        self.maximumSize = Swift.min(Swift.max(1, maximumSize), Self.largestChunk)
    }

    /// Starts a new iteration at the body's first byte.
    public func makeAsyncIterator() -> Iterator {
        Iterator(form: form, maximumSize: maximumSize)
    }

    /// One pass over the body.
    public struct Iterator: AsyncIteratorProtocol {
        private let reader: MultipartReader
        private let maximumSize: Int
        /// The form's append error, thrown by the first `next()`, or `nil` once thrown.
        private var appendError: MultipartError?
        /// Set after the last chunk or the first error: later calls return `nil`.
        private var isFinished = false

        fileprivate init(form: MultipartFormData, maximumSize: Int) {
            reader = MultipartReader(form)
            self.maximumSize = maximumSize
            appendError = form.appendError
        }

        /// The next chunk, `nil` after the last one.
        ///
        /// - Throws: ``MultipartError`` naming the part at fault: an ``MultipartFormData/appendError`` on the first
        ///   call, or a file or stream that failed or changed.
        public mutating func next() async throws(MultipartError) -> ArraySlice<UInt8>? {
            guard !isFinished else { return nil }
            if let appendError {
                isFinished = true
                throw appendError
            }
            let count = Int(Swift.min(UInt64(maximumSize), reader.contentLength - reader.bytesRead))
            guard count > 0 else {
                isFinished = true
                return nil
            }
            let reader = reader
            var failure: MultipartError?
            let chunk = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                // The reader fills the whole buffer unless the body ends or fails: it loops over short reads.
                do throws(MultipartError) {
                    initialized = try reader.read(into: UnsafeMutableRawBufferPointer(buffer))
                } catch {
                    failure = error
                }
            }
            if let failure {
                isFinished = true
                throw failure
            }
            return chunk[...]
        }
    }
}

extension MultipartFormData {
    /// The body as an `AsyncSequence` of chunks of at most `maximumSize` bytes (1 to 16 MiB), for clients that take
    /// one. Pair it with ``contentLength`` so that the client sends a `Content-Length`:
    ///
    /// ```swift
    /// let chunks = form.bodyChunks().map { ByteBuffer(bytes: $0) }
    /// request.body = .stream(chunks, length: .known(Int64(form.contentLength)))  // AsyncHTTPClient
    /// ```
    ///
    /// - Parameter maximumSize: The most bytes in one chunk, from 1 to 16 MiB; other values count as the nearest.
    /// - Returns: A sequence that reads the form anew on each iteration.
    public func bodyChunks(maximumSize: Int = 65_536) -> MultipartBodyChunks {
        MultipartBodyChunks(form: self, maximumSize: maximumSize)
    }
}
