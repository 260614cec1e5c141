import Foundation
import MultipartStream

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Upload progress on stderr: a bar redrawn at most 10 times a second when stderr is a terminal, else one summary
/// line at the end.
final class ProgressReporter: @unchecked Sendable {
    // @unchecked: mutable state is guarded by `lock`; reports arrive on URLSession's thread.
    private let lock = NSLock()
    private let isTerminal: Bool
    private let isSilent: Bool
    private let clock = ContinuousClock()
    private let start: ContinuousClock.Instant
    private var lastDraw: ContinuousClock.Instant?
    private var latest = MultipartUploadProgress(bytesSent: 0, totalBytes: 0)
    private var drewBar = false

    init(silent: Bool, terminal: Bool = isatty(STDERR_FILENO) == 1) {
        isSilent = silent
        isTerminal = terminal
        start = clock.now
    }

    func report(_ progress: MultipartUploadProgress) {
        guard !isSilent else { return }
        let line: String? = lock.withLock {
            latest = progress
            guard isTerminal else { return nil }
            let now = clock.now
            let isLast = progress.bytesSent == progress.totalBytes
            if let lastDraw, now - lastDraw < .milliseconds(100), !isLast { return nil }
            lastDraw = now
            drewBar = true
            return "\r" + Self.bar(progress, elapsed: now - start)
        }
        if let line { FileHandle.standardError.write(Data(line.utf8)) }
    }

    /// Ends the bar, and prints the summary: what was sent, how fast, and how it ended.
    func finish(outcome: String) {
        guard !isSilent else { return }
        let (progress, drewBar) = lock.withLock { (latest, self.drewBar) }
        let elapsed = clock.now - start
        let summary =
            "multipart: sent \(Self.bytes(progress.bytesSent)) in \(Self.seconds(elapsed)) s "
            + "(\(Self.bytes(Self.rate(progress.bytesSent, elapsed)))/s), \(outcome)\n"
        FileHandle.standardError.write(Data(((drewBar ? "\n" : "") + summary).utf8))
    }

    /// `[#########           ]  45%  1.2 GiB / 2.0 GiB  85.3 MB/s  ETA 0:09`
    static func bar(_ progress: MultipartUploadProgress, elapsed: Duration) -> String {
        let width = 24
        let fraction = min(1, max(0, progress.fractionCompleted))
        let filled = Int(fraction * Double(width))
        let rate = rate(progress.bytesSent, elapsed)
        let remaining = Double(progress.totalBytes - min(progress.bytesSent, progress.totalBytes))
        let eta = rate > 0 ? Int((remaining / rate).rounded(.up)) : 0
        return "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "] "
            + String(format: "%3d%%", Int(fraction * 100))
            + "  \(bytes(progress.bytesSent)) / \(bytes(progress.totalBytes))"
            + "  \(bytes(rate))/s  ETA \(eta / 60):" + String(format: "%02d", eta % 60)
    }

    static func bytes(_ count: some BinaryInteger) -> String {
        bytes(Double(count))
    }

    static func bytes(_ count: Double) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = count
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(Int(value)) B" : String(format: "%.1f %@", value, units[unit])
    }

    private static func rate(_ bytes: UInt64, _ elapsed: Duration) -> Double {
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return seconds > 0 ? Double(bytes) / seconds : 0
    }

    private static func seconds(_ elapsed: Duration) -> String {
        String(format: "%.2f", Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
}
