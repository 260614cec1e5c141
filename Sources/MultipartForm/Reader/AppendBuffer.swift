import Foundation

/// The bytes of a form holding a stream of unknown length, as a resumable upload sends them: read once, in order,
/// into a ring of about two appends, and held from the offset the server acknowledged last, so that an append cut
/// off can go again from wherever the server stands. The next append's bytes are read while this one goes out
/// (``prefetch(through:)``). Memory is the ring, allocated once, whatever the stream's size.
///
/// Appends read from the ring in place (``BufferedBytesReader``): no copy but the stream's own read into it and
/// URLSession's read out of it.
package final class AppendBuffer: @unchecked Sendable {
    // @unchecked: `storage`, `start`, `end`, `length` and `failure` are guarded by `lock`; the reader and the bytes
    // past `end` are touched only on `queue`, which runs one fill at a time.
    private let lock = Lock()
    private let queue = DispatchQueue(label: "MultipartStream.AppendBuffer")
    private let reader: MultipartReader
    private var storage: UnsafeMutableRawBufferPointer
    /// The first byte held: every earlier one was acknowledged and released.
    private var start: UInt64 = 0
    /// The byte after the last one read.
    private var end: UInt64 = 0
    /// The form's length, once the reader has reached its end.
    private var length: UInt64?
    /// Why a read ahead failed: the next fill throws it.
    private var failure: MultipartError?

    /// A buffer for `form`, holding `capacity` bytes (more when an append asks for more).
    package init(_ form: MultipartFormData, capacity: Int) throws(MultipartError) {
        reader = try MultipartReader(form)
        storage = .allocate(byteCount: max(capacity, 2), alignment: 16)
    }

    deinit {
        storage.deallocate()
    }

    /// The first byte held, and the form's length once known.
    package var held: (start: UInt64, length: UInt64?) { lock.withLock { (start, length) } }

    /// Reads on until the bytes up to `target` are held and one more (so that whether `target` is the form's end is
    /// known), or the form ends. Waits for a read ahead under way; a stream that blocks blocks the buffer's queue,
    /// never a thread of the cooperative pool, and a cancel does not wait for it.
    package func fill(through target: UInt64) async throws(MultipartError) {
        // A cancel returns at once (the driver then sees it), leaving a read blocked in the stream to end on its own.
        let result: Result<Void, MultipartError> = await awaitBlocking(
            on: queue, cancelled: .failure(MultipartError(.streamNotOpen))
        ) {
            Result { () throws(MultipartError) in try self.read(through: target) }
        }
        try result.get()
    }

    /// Starts reading on up to `target` while an append goes out; a failure waits for the next ``fill(through:)``.
    package func prefetch(through target: UInt64) {
        queue.async {
            do throws(MultipartError) {
                try self.read(through: target)
            } catch {
                self.lock.withLock { if self.failure == nil { self.failure = error } }
            }
        }
    }

    /// On `queue`: reads from the form into the ring, at most up to its room, until `target` and a byte more are
    /// held or the form ends.
    private func read(through target: UInt64) throws(MultipartError) {
        while true {
            let next: (space: UnsafeMutableRawBufferPointer?, failure: MultipartError?) = lock.withLock {
                if let failure { return (nil, failure) }
                guard length == nil, end <= target else { return (nil, nil) }
                if target + 1 - start > UInt64(storage.count) { grow(to: Int(target + 1 - start) * 2) }
                let capacity = UInt64(storage.count)
                let index = Int(end % capacity)
                let count = Int(min(target + 1 - end, capacity - (end - start), capacity - UInt64(index)))
                // Past `end`: no append reads there, and only this queue writes.
                return (UnsafeMutableRawBufferPointer(rebasing: storage[index..<index + count]), nil)
            }
            if let failure = next.failure { throw failure }
            guard let space = next.space else { return }
            let count: Int
            do throws(MultipartError) {
                count = try reader.read(into: space)
            } catch {
                lock.withLock { failure = error }
                throw error
            }
            lock.withLock {
                if count == 0 { length = end } else { end += UInt64(count) }
            }
        }
    }

    /// Under `lock`: a larger ring holding the same bytes, for an append larger than the ring (the server's
    /// `min-append-size` over the buffered append size).
    private func grow(to capacity: Int) {
        let count = Int(end - start)
        let linear = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
        defer { linear.deallocate() }
        copyLocked(from: start, count: count, into: linear)
        storage.deallocate()
        storage = .allocate(byteCount: capacity, alignment: 16)
        var written = 0
        while written < count {
            let index = Int((start + UInt64(written)) % UInt64(capacity))
            let piece = min(count - written, capacity - index)
            (storage.baseAddress! + index).copyMemory(from: linear.baseAddress! + written, byteCount: piece)
            written += piece
        }
    }

    /// Under `lock`: copies `count` bytes from `offset`, which are held, into `buffer`.
    private func copyLocked(from offset: UInt64, count: Int, into buffer: UnsafeMutableRawBufferPointer) {
        var copied = 0
        while copied < count {
            let index = Int((offset + UInt64(copied)) % UInt64(storage.count))
            let piece = min(count - copied, storage.count - index)
            (buffer.baseAddress! + copied).copyMemory(from: storage.baseAddress! + index, byteCount: piece)
            copied += piece
        }
    }

    /// Forgets the bytes before `offset`, which the server acknowledged.
    package func release(below offset: UInt64) {
        lock.withLock { start = max(start, min(offset, end)) }
    }

    /// Copies the form's bytes from `offset` into `buffer`, as many as fit before `limit`; `nil` when they are not
    /// held (released already, or not read yet).
    func copy(from offset: UInt64, upTo limit: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        lock.withLock {
            guard offset >= start, limit <= end, offset <= limit else { return nil }
            let count = Int(min(UInt64(buffer.count), limit - offset))
            copyLocked(from: offset, count: count, into: buffer)
            return count
        }
    }

    /// Stops reading and closes the stream, once a read under way has returned.
    package func close() {
        queue.async { self.reader.fail(MultipartError(.streamNotOpen)) }
    }
}
