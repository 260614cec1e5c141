import Foundation

/// How fast a body stream hands out its bytes: at most ``packetSize`` bytes per `read`, reads started ``delay``
/// seconds apart, so that the body goes out at `packetSize / delay` bytes per second, the time spent reading and
/// sending counted in the pause (as AFNetworking's throttling, for slow links). A transport setting: given where a
/// stream or an upload is made, never part of the form.
///
/// The pause blocks the thread that reads the stream; on Linux that is URLSession's one serial queue for the whole
/// process, so other transfers wait too. Encoding, chunk sequences and the `.file` strategy's upload are never
/// paced.
public struct MultipartPacing: Sendable, Equatable {
    /// The most bytes one `read` returns, at least 1.
    public let packetSize: Int
    /// Seconds from the start of one read to the start of the next, from 0 to 60.
    public let delay: TimeInterval

    /// Pacing of `packetSize` bytes per read, `delay` seconds apart.
    ///
    /// - Parameters:
    ///   - packetSize: The most bytes one `read` returns; values below 1 count as 1.
    ///   - delay: Seconds between the starts of two reads, at most 60; negative values and NaN count as 0.
    public init(packetSize: Int, delay: TimeInterval) {
        self.packetSize = max(1, packetSize)
        self.delay = delay > 0 ? min(delay, 60) : 0
    }

    /// Pacing at `bytesPerSecond`, in reads of a tenth of a second's bytes (at most 64 KiB) started evenly apart,
    /// as curl's `--limit-rate`; values below 1 count as 1.
    public init(bytesPerSecond: Int) {
        let rate = max(1, bytesPerSecond)
        let packet = max(1, min(BufferSize.read, rate / 10))
        self.init(packetSize: packet, delay: Double(packet) / Double(rate))
    }
}

/// The clock of one paced upload, shared by every body stream it makes: each request of a resumable upload, a resend
/// after a 401 or a redirect, a retry. So the rate asked is the rate of the whole upload; a clock of each stream's
/// own let each new request start with a read at once, which across 100 kB appends at 1 MB/s made the upload take
/// 0.69 of the asked time.
package final class MultipartPacer: @unchecked Sendable {
    // @unchecked: `nextReadDue` is guarded by `lock`.
    package let pacing: MultipartPacing
    private let lock = Lock()
    /// When the next read may start, in uptime nanoseconds.
    private var nextReadDue: UInt64?

    package init(_ pacing: MultipartPacing) {
        self.pacing = pacing
    }

    /// Sleeps until the pacing lets the next read start, and returns when it started.
    func waitForTurn() -> UInt64 {
        let now = DispatchTime.now().uptimeNanoseconds
        guard let due = lock.withLock({ nextReadDue }), due > now else { return now }
        Thread.sleep(forTimeInterval: Double(due - now) / 1e9)
        return DispatchTime.now().uptimeNanoseconds
    }

    /// Makes the next read due `delay` after this one was (scaled for a short read), so that the time spent reading
    /// and sending counts toward the pause and the rate holds however fast the reads are. Reads that fell behind
    /// (stalls of the reading thread on a busy machine, the time between two requests) may catch up by at most one
    /// second, as curl's own limit averages over a few seconds, so a slow consumer never gets a longer burst than
    /// that.
    func schedule(after count: Int, startedAt readStart: UInt64) {
        let pause = UInt64(pacing.delay * 1e9 * Double(count) / Double(pacing.packetSize))
        let catchUp: UInt64 = 1_000_000_000
        let earliest = readStart - min(readStart, catchUp)
        lock.withLock { nextReadDue = Swift.max(nextReadDue ?? readStart, earliest) + pause }
    }
}
