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
/// 0.69 of the asked time. A queue shares one among all its uploads, so that their sum keeps to its rate; its pacing
/// can change while they read, and `nil` reads at once.
package final class MultipartPacer: @unchecked Sendable {
    // @unchecked: `current` and `nextReadDue` are guarded by `lock`.
    private let lock = Lock()
    private var current: MultipartPacing?
    /// When the next read may start, in uptime nanoseconds.
    private var nextReadDue: UInt64?
    /// How far reads that fell behind may catch up, in nanoseconds.
    private let catchUp: UInt64

    /// A clock at `pacing`, whose reads may catch up on at most `catchUp` seconds they fell behind.
    package init(_ pacing: MultipartPacing?, catchUp: Double = 1) {
        current = pacing
        self.catchUp = UInt64(max(0, catchUp) * 1e9)
    }

    /// The pacing reads keep to now; `nil` when they go at once.
    package var pacing: MultipartPacing? { lock.withLock { current } }

    /// Paces the reads from now on at `pacing` (`nil`: at once). A read already waiting keeps the turn it was given.
    package func change(to pacing: MultipartPacing?) {
        lock.withLock { current = pacing }
    }

    /// A read's turn: how many bytes it may read, and the pacing its time was reserved at (`nil`: none was).
    struct Turn {
        let limit: Int
        let pacing: MultipartPacing?
    }

    /// Sleeps until the pacing lets the next read of up to `limit` bytes start. The turn is taken before the
    /// sleep, so that readers on several threads at once never share one.
    func waitForTurn(reading limit: Int) -> Turn {
        let now = DispatchTime.now().uptimeNanoseconds
        let (turn, due) = lock.withLock { () -> (Turn, UInt64) in
            guard let pacing = current else { return (Turn(limit: limit, pacing: nil), now) }
            let limit = min(limit, pacing.packetSize)
            let due = Swift.max(nextReadDue ?? now, now - min(now, catchUp))
            nextReadDue = due + Self.pause(for: limit, at: pacing)
            return (Turn(limit: limit, pacing: pacing), due)
        }
        if due > now { Thread.sleep(forTimeInterval: Double(due - now) / 1e9) }
        return turn
    }

    /// Gives back the time `turn` reserved for the bytes its read did not read (`count` of them it did), so that a
    /// short read (the end of a part, a caller stream's short answer) costs only what it read, at the pacing the
    /// time was reserved at.
    func finished(_ turn: Turn, reading count: Int) {
        guard let pacing = turn.pacing, count < turn.limit else { return }
        lock.withLock {
            guard let due = nextReadDue else { return }
            nextReadDue = due - min(due, Self.pause(for: turn.limit - max(0, count), at: pacing))
        }
    }

    /// The time `count` bytes take at `pacing`, in nanoseconds.
    private static func pause(for count: Int, at pacing: MultipartPacing) -> UInt64 {
        UInt64(pacing.delay * 1e9 * Double(count) / Double(pacing.packetSize))
    }
}
