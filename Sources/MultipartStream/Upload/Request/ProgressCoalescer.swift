import Dispatch
import Foundation

/// Hands an upload's progress to the caller at most 10 times a second (the first count at once, then one once 100 ms
/// have passed since the last report), and always at 100%, instead of once per 64 KiB read: the one place progress
/// is coalesced, so a caller that draws each report (the command's bar) redraws at that rate.
///
/// Reports rise while one body goes out. A body sent again (a resend after a 401 or a 307/308, a resumable retry from
/// the server's offset) starts where it starts, at once (``restart(at:)``): a resend shows, rather than sitting at
/// 100% while the form goes out a second time. When a request ends, ``settle(at:)`` reports the count it ended with
/// if that was not due yet, so the last report is the count the upload's verdict read. None comes after
/// ``finish()`` has returned.
final class ProgressCoalescer: @unchecked Sendable {
    // @unchecked: the counters are guarded by `lock`.
    private let lock = Lock()
    /// Held while the handler runs, so that ``finish()`` waits for a report under way; recursive, so that a handler
    /// that cancels its own upload (and so finishes it) does not wait for itself.
    private let calling = NSRecursiveLock()
    /// The body's length; `nil` while it is unknown, until a spool or the stream's end tells it.
    private var totalBytes: UInt64?
    private let handler: @Sendable (MultipartUploadProgress) -> Void
    private var reported: UInt64 = 0
    private var reportedAt: UInt64 = 0
    private var isFinished = false

    /// The least time between two reports below 100%, unless one settles a request's count.
    static let interval: UInt64 = 100_000_000

    init(totalBytes: UInt64?, handler: @escaping @Sendable (MultipartUploadProgress) -> Void) {
        self.totalBytes = totalBytes
        self.handler = handler
    }

    /// Reports `bytesSent` if it is due.
    @Sendable func report(_ bytesSent: UInt64) {
        report(bytesSent, .ifDue)
    }

    /// Reports `bytesSent`, due or not, if it is more than was reported: the count a request ended with.
    func settle(at bytesSent: UInt64) {
        report(bytesSent, .settling)
    }

    /// A body starts at `bytesSent` of the form: reported at once where that is not the count reported last, so that
    /// a resend, which starts below it, shows.
    func restart(at bytesSent: UInt64) {
        report(bytesSent, .restarting)
    }

    /// Which counts a report passes on.
    private enum Occasion {
        /// A count above the last, once the interval has passed or at 100%.
        case ifDue
        /// A count above the last, at once.
        case settling
        /// Any other count than the last, at once.
        case restarting
    }

    private func report(_ bytesSent: UInt64, _ occasion: Occasion) {
        let now = DispatchTime.now().uptimeNanoseconds
        calling.lock()
        defer { calling.unlock() }
        let passes = lock.withLock {
            guard !isFinished else { return false }
            switch occasion {
            case .restarting:
                guard bytesSent != reported else { return false }
            case .settling:
                guard bytesSent > reported else { return false }
            case .ifDue:
                let isWhole = totalBytes.map { bytesSent >= $0 } ?? false
                guard bytesSent > reported, isWhole || now - reportedAt >= Self.interval else { return false }
            }
            reported = bytesSent
            reportedAt = now
            return true
        }
        if passes { handler(MultipartUploadProgress(bytesSent: bytesSent, totalBytes: lock.withLock { totalBytes })) }
    }

    /// The body's length, found once a stream of unknown length was spooled or ended.
    func lengthFound(_ length: UInt64) {
        lock.withLock { totalBytes = length }
    }

    /// Stops reporting, once a report under way has returned: the upload has ended.
    func finish() {
        calling.lock()
        defer { calling.unlock() }
        lock.withLock { isFinished = true }
    }
}
