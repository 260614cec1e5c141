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
