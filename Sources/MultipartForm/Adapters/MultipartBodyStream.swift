import Foundation

/// An `InputStream` that produces a form's body lazily: set it as `URLRequest.httpBodyStream` or return it from
/// `urlSession(_:task:needNewBodyStream:)`.
///
/// Status goes `.notOpen → .open → .atEnd → .closed`, or to `.error`. The `read` that returns the body's last byte
/// leaves the stream `.atEnd`, with `hasBytesAvailable` false, because CFNetwork stops at `Content-Length` and
/// Linux URLSession ends the body when `hasBytesAvailable` turns false. A file or stream that fails or differs from
/// what was appended makes `read` return -1 with a ``MultipartError`` in `streamError`: the request fails rather
/// than send a wrong body. Opening the stream again after it handed out bytes (Linux URLSession does this when it
/// retries after a 401) starts over from the first byte, or fails if the form holds a one-shot `InputStream`.
///
/// A copy (`copy()`, `NSCopying`) is a new, unopened stream of the same bytes, whatever state this one is in, so a
/// `needNewBodyStream` delegate may answer with a copy of the request's stream, as AFNetworking's delegates do.
public final class MultipartBodyStream: InputStream, NSCopying {
    /// The exact number of bytes the stream produces; `nil` for a form that holds a stream of unknown length,
    /// whose body ends where that stream does (send it with chunked framing, or let the upload calls spool it).
    public let contentLength: UInt64?

    private let source: Source
    private let pacer: MultipartPacer?
    /// Told the new ``bytesRead`` after each read that handed out bytes, on the reading thread.
    private let progressHandler: (@Sendable (UInt64) -> Void)?
    /// Guards `state`; never held while a read runs, so that `close()` (a cancel) never waits for a caller stream
    /// that blocks.
    private let lock = Lock()
    private var state: State = .notOpen
    /// Separate from `lock`: progress must never wait for a state change.
    private let progress = Lock()
    private var handedOut: UInt64 = 0

    /// Where the bytes come from.
    package enum Source {
        /// The form's body from byte `offset` up to byte `end` (`nil` for the rest of it): one append of a resumable
        /// upload may carry a part of the form only.
        case form(MultipartFormData, offset: UInt64, end: UInt64?)
        /// The bytes `range` of a form of unknown length, held in memory until the server acknowledges them: one
        /// append of a resumable upload.
        case buffered(AppendBuffer, Range<UInt64>)
        /// A body that `writeEncodedData(to:)` wrote, `length` bytes long: the `.file` upload strategy's.
        case encodedFile(URL, length: UInt64)
        /// No body: the stream fails with this error when opened, so that the request that reads it fails (its
        /// temporary body could not be written, or the form cannot be sent on this session).
        case failing(MultipartError)
    }

    private enum State {
        case notOpen
        case open(any BodyReader)
        /// A `read` runs the reader now, outside the lock; only that read touches it. `interrupted` is the state
        /// that a close, a reopen or a second reader put in its place meanwhile: the read then hands out nothing,
        /// closes the reader, and leaves the stream in that state.
        case reading(any BodyReader, interrupted: Interruption?)
        case atEnd
        /// `finished`: every byte was handed out before the close.
        case closed(finished: Bool)
        case failed(MultipartError)
    }

    /// What happened to a stream while a read ran.
    private enum Interruption {
        /// Closed early.
        case closed
        /// Opened again: the state it starts over in.
        indirect case reopened(State)
        /// A second thread read at once.
        case failed(MultipartError)

        var state: State {
            switch self {
            case .closed: .closed(finished: false)
            case .reopened(let state): state
            case .failed(let error): .failed(error)
            }
        }
    }

    /// A stream of `source`, paced by `pacer` (an upload's, which all its streams share) and telling
    /// `progressHandler`, both fixed here.
    package init(
        _ source: Source,
        pacer: MultipartPacer? = nil,
        progressHandler: (@Sendable (UInt64) -> Void)? = nil
    ) {
        self.source = source
        switch source {
        case .form(let form, let offset, let end):
            // An offset past the end makes no bytes: the stream fails when opened.
            contentLength = form.contentLength.map { length in
                let end = min(end ?? length, length)
                return end - min(offset, end)
            }
        case .buffered(_, let range):
            contentLength = UInt64(range.count)
        case .encodedFile(_, let length):
            contentLength = length
        case .failing:
            contentLength = 0
        }
        self.pacer = pacer
        self.progressHandler = progressHandler
        // swift-corelibs-foundation has no `init()` for subclasses; the empty CF stream behind this one is unused.
        super.init(data: Data())
    }

    /// A new, unopened stream of the same form from the same byte, with the same pacing, whatever state this one is
    /// in: what a `needNewBodyStream` delegate answers with. A form whose one-shot `InputStream` part was already
    /// read gives a copy that fails when it reaches that part, naming it (never a short body).
    ///
    /// - Parameter zone: Unused.
    /// - Returns: A ``MultipartBodyStream``.
    public func copy(with zone: NSZone? = nil) -> Any {
        copy(progressHandler: progressHandler)
    }

    /// A copy (as ``copy(with:)``) that tells `progressHandler` its ``bytesRead`` after each read.
    package func copy(progressHandler: (@Sendable (UInt64) -> Void)?) -> MultipartBodyStream {
        MultipartBodyStream(source, pacer: pacer, progressHandler: progressHandler)
    }

    /// The bytes handed out by `read` since the stream was (re)opened; safe to read from any thread.
    public var bytesRead: UInt64 {
        progress.withLock { handedOut }
    }

    /// Why the stream failed, naming the part, or `nil` while it has not: ``streamError`` typed, for the upload
    /// layer's verdict.
    package var failure: MultipartError? {
        lock.withLock {
            if case .failed(let error) = visibleState { return error }
            return nil
        }
    }

    // MARK: Opening and closing

    /// Opens the stream; opening it again after bytes were read starts over from the first byte if the form is
    /// replayable, and otherwise fails it.
    public override func open() {
        lock.withLock {
            switch state {
            case .notOpen:
                state = start()
            case .open where bytesRead == 0, .reading(_, nil) where bytesRead == 0:
                break
            case .open(let reader):
                reader.fail(MultipartError(.notReplayable))
                state = restart()
            case .reading(let reader, nil), .reading(let reader, .closed?):
                state = .reading(reader, interrupted: .reopened(restart()))
            case .atEnd, .closed:
                state = restart()
            case .reading, .failed:
                break
            }
        }
    }

    /// Closes the stream and the file or stream of the part it was in, at once: a read blocked in a caller's stream
    /// returns -1 when that stream comes back. A failed stream stays `.error`.
    public override func close() {
        lock.withLock {
            switch state {
            case .open(let reader):
                reader.fail(MultipartError(.streamNotOpen))
                state = .closed(finished: false)
            case .reading(let reader, nil):
                state = .reading(reader, interrupted: .closed)
            case .reading(let reader, .reopened(let restarted)?):
                if case .open(let fresh) = restarted { fresh.fail(MultipartError(.streamNotOpen)) }
                state = .reading(reader, interrupted: .closed)
            case .atEnd:
                state = .closed(finished: true)
            case .notOpen:
                state = .closed(finished: false)
            case .reading(_, .closed?), .reading(_, .failed?), .closed, .failed:
                break
            }
        }
    }

    /// The state as the stream's callers see it: a read under way is `.open`, or what interrupted it.
    private var visibleState: State {
        if case .reading(_, let interruption?) = state { return interruption.state }
        return state
    }

    private func start() -> State {
        progress.withLock { handedOut = 0 }
        switch source {
        case .form(let form, let offset, _):
            if let error = form.appendError { return .failed(error) }
            do throws(MultipartError) {
                return .open(try MultipartReader(form, startingAt: offset))
            } catch {
                return .failed(error)
            }
        case .encodedFile(let url, let length):
            return .open(EncodedFileReader(url: url, length: length))
        case .buffered(let buffer, let range):
            return .open(BufferedBytesReader(buffer, range: range))
        case .failing(let error):
            return .failed(error)
        }
    }

    /// A new reader, unless bytes were handed out and a one-shot part may already have been consumed.
    ///
    /// Linux URLSession reopens a request's body stream to send it again after a challenge was answered. A part
    /// of a resumable upload starts over too: a server applies nothing of a request it refused for want of a
    /// credential. Its other resends ask the upload for a new stream, which refuses them.
    private func restart() -> State {
        let formIsReplayable = if case .form(let form, _, _) = source { form.isReplayable } else { true }
        guard formIsReplayable || bytesRead == 0 else { return .failed(MultipartError(.notReplayable)) }
        return start()
    }

    // MARK: Reading

    /// Fills `buffer` with up to `len` bytes of the body, across part boundaries. Returns 0 only at the end and
    /// -1 on failure, with the reason in `streamError`. With `len` 0 it returns 0 and changes nothing.
    public override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        var limit = len
        // Take the reader out of the lock: a caller stream may block in it, and close() must not wait for that.
        // Without a reader to run, the answer is known at once.
        let (reader, answer): ((any BodyReader)?, Int) = lock.withLock {
            switch state {
            case .open(let reader) where len >= 0:
                // A stream of a part of the form ends at its length, before the reader does.
                let left = contentLength.map { $0 - min($0, reader.bytesRead) } ?? .max
                guard left > 0 || len == 0 else {
                    state = .atEnd
                    return (nil, 0)
                }
                limit = Int(min(UInt64(limit), left))
                state = .reading(reader, interrupted: nil)
                return (reader, 0)
            case .open, .reading, .notOpen, .closed(finished: false):
                if len == 0 { return (nil, 0) }
                // A negative length, a second thread reading at once, or no open stream.
                let error = MultipartError(len < 0 ? .invalidReadLength(len) : .streamNotOpen)
                switch state {
                case .open(let reader):
                    reader.fail(error)
                    state = .failed(error)
                case .reading(let reader, _):
                    state = .reading(reader, interrupted: .failed(error))
                default:
                    state = .failed(error)
                }
                return (nil, -1)
            case .atEnd, .closed(finished: true):
                return (nil, 0)
            case .failed:
                return (nil, -1)
            }
        }
        guard let reader else { return answer }
        // The turn is taken for at most the bytes left; a short read gives back the time of what it did not read.
        let turn = pacer?.waitForTurn(reading: limit)
        if let turn { limit = turn.limit }
        let result: Result<Int, MultipartError>
        do throws(MultipartError) {
            result = .success(try reader.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: limit)))
        } catch {
            result = .failure(error)
        }
        var total: UInt64 = 0
        let count = lock.withLock { () -> Int in
            guard case .reading(_, let interruption) = state else { return -1 }
            if let interruption {
                // Closed, reopened or read by another thread meanwhile: nothing this read read goes out.
                reader.fail(MultipartError(.streamNotOpen))
                state = interruption.state
                return -1
            }
            switch result {
            case .success(let count):
                total = progress.withLock {
                    handedOut += UInt64(count)
                    return handedOut
                }
                state = reader.isAtEnd || total == contentLength ? .atEnd : .open(reader)
                return count
            case .failure(let error):
                state = .failed(error)
                return -1
            }
        }
        if let pacer, let turn { pacer.finished(turn, reading: count) }
        if count > 0 {
            progressHandler?(total)
        }
        return count
    }

    /// True until the last byte has been handed out, and while failed, so that URLSession reads the -1 instead of
    /// taking `false` for a complete body.
    public override var hasBytesAvailable: Bool {
        lock.withLock {
            switch visibleState {
            case .atEnd, .closed(finished: true): false
            case .notOpen, .open, .reading, .closed(finished: false), .failed: true
            }
        }
    }

    /// The stream's status.
    public override var streamStatus: Stream.Status {
        lock.withLock {
            switch visibleState {
            case .notOpen: .notOpen
            case .open, .reading: .open
            case .atEnd: .atEnd
            case .closed: .closed
            case .failed: .error
            }
        }
    }

    /// The ``MultipartError`` that failed the stream, or `nil`.
    public override var streamError: Error? { failure }

    /// Always false: the body is produced on demand, not held in a buffer.
    public override func getBuffer(
        _ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>,
        length len: UnsafeMutablePointer<Int>
    ) -> Bool {
        false
    }

    // MARK: Run loops, properties and delegate: unused by URLSession's blocking reads

    private weak var storedDelegate: StreamDelegate?

    /// Kept for `Stream`'s contract; the stream sends no events, since every read is synchronous.
    public override var delegate: StreamDelegate? {
        get { storedDelegate }
        set { storedDelegate = newValue }
    }

    /// No-op: reads never wait on a run loop.
    public override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}

    /// No-op: reads never wait on a run loop.
    public override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}

    #if canImport(Darwin)
        /// The stream has no properties.
        public override func property(forKey key: Stream.PropertyKey) -> Any? { nil }

        /// The stream has no properties; returns false.
        public override func setProperty(_ property: Any?, forKey key: Stream.PropertyKey) -> Bool { false }

        // CFNetwork treats an NSInputStream as a CFReadStream and sends these private messages to it; NSInputStream
        // subclasses must answer them (as AFNetworking's AFMultipartBodyStream does). Reads are synchronous, so
        // there is nothing to schedule and no client to call back.
        @objc(_scheduleInCFRunLoop:forMode:)
        func scheduleInCFRunLoop(_ runLoop: CFRunLoop?, forMode mode: CFString?) {}

        @objc(_unscheduleFromCFRunLoop:forMode:)
        func unscheduleFromCFRunLoop(_ runLoop: CFRunLoop?, forMode mode: CFString?) {}

        @objc(_setCFClientFlags:callback:context:)
        func setCFClientFlags(
            _ flags: CFOptionFlags,
            callback: CFReadStreamClientCallBack?,
            context: UnsafeMutablePointer<CFStreamClientContext>?
        ) -> Bool { false }
    #else
        /// The stream has no properties.
        public override func property(forKey key: Stream.PropertyKey) -> AnyObject? { nil }

        /// The stream has no properties; returns false.
        public override func setProperty(_ property: AnyObject?, forKey key: Stream.PropertyKey) -> Bool { false }
    #endif
}

extension MultipartFormData {
    /// A new, unopened stream of this form's bytes; each call returns an independent stream.
    ///
    /// To send it, prefer `URLRequest(url:multipartFormData:)` or `URLRequest.setMultipartFormData(_:)` to setting
    /// `httpBodyStream` and the headers yourself: on Linux, URLSession sends a body stream chunked and adds a
    /// `Content-Length` set by hand beside `Transfer-Encoding: chunked`, which strict servers reject and lenient ones
    /// misread (one answered 200, then read the rest of the body as a second request). Those calls set the headers
    /// that make it go out raw with its exact length, on every platform.
    ///
    /// - Returns: The stream, for `URLRequest.httpBodyStream` or a `needNewBodyStream` delegate answer.
    public func makeBodyStream() -> MultipartBodyStream {
        MultipartBodyStream(.form(self, offset: 0, end: nil))
    }

    /// A new, unopened stream of this form's bytes from byte `offset` on: the same bytes as `encode()`'s from
    /// `offset`, for sending the rest of a body that a server has in part. Its ``MultipartBodyStream/contentLength``
    /// is what is left, `contentLength - offset`.
    ///
    /// Finding the offset costs work per part, never per skipped byte: in-memory parts are indexed, files are
    /// opened at the offset (and checked, as always, to be the file appended), and a stream factory's stream is
    /// read and its bytes before the offset dropped. Opening the stream again starts at `offset` again.
    ///
    /// - Parameter offset: The first byte to produce, from 0 to ``contentLength``.
    /// - Returns: The stream. It fails when opened, with
    ///   ``MultipartError/Reason/offsetPastEnd(offset:contentLength:)`` for an offset past the end, or
    ///   ``MultipartError/Reason/cannotResumeOneShotStream(offset:)`` for one inside or after a one-shot
    ///   `InputStream` part.
    public func makeBodyStream(startingAt offset: UInt64) -> MultipartBodyStream {
        MultipartBodyStream(.form(self, offset: offset, end: nil))
    }

    /// A new, unopened stream of this form's bytes from byte `offset` on (as ``makeBodyStream(startingAt:)``),
    /// handing them out no faster than `pacing` allows.
    ///
    /// - Parameters:
    ///   - offset: The first byte to produce, from 0 to ``contentLength``.
    ///   - pacing: How fast the stream hands out bytes.
    /// - Returns: The stream.
    public func makeBodyStream(startingAt offset: UInt64 = 0, pacing: MultipartPacing) -> MultipartBodyStream {
        MultipartBodyStream(.form(self, offset: offset, end: nil), pacer: MultipartPacer(pacing))
    }
}
