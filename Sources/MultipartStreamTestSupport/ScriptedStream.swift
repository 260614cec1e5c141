import Foundation

/// A caller stream that misbehaves on cue: it yields `bytes`, then ends, fails or keeps going as told.
public final class ScriptedStream: InputStream {
    /// What the stream does after its bytes.
    public enum Ending {
        /// Returns 0 after `bytes`.
        case end
        /// Returns -1 with `error` after `bytes`.
        case fail(any Error)
        /// Fails to open, with `error`.
        case failToOpen(any Error)
    }

    /// An error a scripted stream fails with.
    public struct Fault: Error, LocalizedError {
        /// "disk on fire".
        public var errorDescription: String? { "disk on fire" }

        /// The fault.
        public init() {}
    }

    private let bytes: [UInt8]
    private let ending: Ending
    private var offset = 0
    private var status: Stream.Status = .notOpen
    private var error: (any Error)?
    /// How many times the stream was closed.
    public private(set) var closeCount = 0

    /// A stream that yields `bytes`, then does as `ending` says.
    public init(_ bytes: [UInt8], then ending: Ending = .end) {
        self.bytes = bytes
        self.ending = ending
        super.init(data: Data())
    }

    public override func open() {
        if case .failToOpen(let failure) = ending {
            error = failure
            status = .error
        } else {
            status = .open
        }
    }

    public override func close() {
        closeCount += 1
        status = .closed
    }

    public override var streamStatus: Stream.Status { status }
    public override var streamError: (any Error)? { error }
    public override var hasBytesAvailable: Bool { status == .open }

    public override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        let count = min(len, bytes.count - offset)
        if count > 0 {
            bytes.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + offset, count: count) }
            offset += count
            return count
        }
        switch ending {
        case .fail(let failure):
            error = failure
            status = .error
            return -1
        case .end, .failToOpen:
            status = .atEnd
            return 0
        }
    }
}
