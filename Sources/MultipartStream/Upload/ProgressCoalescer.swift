import Dispatch
import Foundation

/// Hands an upload's progress to the caller at a bounded rate: once at least 1/128 of the body (and 64 KiB) has gone
/// out since the last report or 100 ms have passed, and always at 100%, instead of once per 64 KiB read.
///
/// Reports only rise: a resend after a 401 starts again from 0 and is not reported until it passes what was
/// reported before, so 100% comes exactly once. None comes after ``finish()`` has returned.
final class ProgressCoalescer: @unchecked Sendable {
    // @unchecked: the counters are guarded by `lock`.
    private let lock = Lock()
    /// Held while the handler runs, so that ``finish()`` waits for a report under way; recursive, so that a handler
    /// that cancels its own upload (and so finishes it) does not wait for itself.
    private let calling = NSRecursiveLock()
    private let totalBytes: UInt64
    private let step: UInt64
    private let handler: @Sendable (MultipartUploadProgress) -> Void
    private var reported: UInt64 = 0
    private var reportedAt: UInt64 = 0
    private var isFinished = false

    /// The least time between two reports that are not a step apart.
    static let interval: UInt64 = 100_000_000

    init(totalBytes: UInt64, handler: @escaping @Sendable (MultipartUploadProgress) -> Void) {
        self.totalBytes = totalBytes
        step = max(totalBytes / 128, 64 << 10)
        self.handler = handler
    }

    /// Reports `bytesSent` if it is due.
    @Sendable func report(_ bytesSent: UInt64) {
        let now = DispatchTime.now().uptimeNanoseconds
        calling.lock()
        defer { calling.unlock() }
        let isDue = lock.withLock {
            guard !isFinished, bytesSent > reported else { return false }
            guard bytesSent >= totalBytes || bytesSent - reported >= step || now - reportedAt >= Self.interval else {
                return false
            }
            reported = bytesSent
            reportedAt = now
            return true
        }
        if isDue { handler(MultipartUploadProgress(bytesSent: bytesSent, totalBytes: totalBytes)) }
    }

    /// Stops reporting, once a report under way has returned: the upload has ended.
    func finish() {
        calling.lock()
        defer { calling.unlock() }
        lock.withLock { isFinished = true }
    }
}
