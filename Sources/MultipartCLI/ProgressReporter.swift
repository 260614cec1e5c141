import Foundation
import MultipartStream

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Upload progress on stderr: a bar redrawn at each report when stderr is a terminal, else one summary line at the
/// end. The library already bounds the reports (128 steps of the body, or one per 100 ms) and settles them at the
/// bytes the upload handed out when it ended, so the bar neither coalesces nor counts again.
final class ProgressReporter: @unchecked Sendable {
    // @unchecked: mutable state is guarded by `lock`; reports arrive on URLSession's thread.
    private let lock = Lock()
    private let isTerminal: Bool
    private let isSilent: Bool
    /// Monotonic nanoseconds (DispatchTime, not ContinuousClock, which needs macOS 13 and iOS 16).
    private let start = DispatchTime.now().uptimeNanoseconds
    private var latest = MultipartUploadProgress(bytesSent: 0, totalBytes: 0)
    private var drewBar = false
    /// The bar's line was ended for other output on the terminal: no frame is drawn after it.
    private var lineEnded = false
    /// Where a saved upload resumed: the bytes before it went out in another run.
    private var resumedAt: UInt64 = 0

    init(silent: Bool, terminal: Bool = isatty(STDERR_FILENO) == 1) {
        isSilent = silent
        isTerminal = terminal
    }

    /// Body bytes handed out, silent or not: once the upload has ended, the count it ended with.
    var bytesSent: UInt64 { lock.withLock { latest.bytesSent } }

    /// A saved upload resumes at `offset`: speeds and the summary count only what this run sends.
    func resumed(at offset: UInt64) {
        lock.withLock { resumedAt = offset }
    }

    func report(_ progress: MultipartUploadProgress) {
        let line: String? = lock.withLock {
            latest = progress
            guard isTerminal, !isSilent, !lineEnded else { return nil }
            let now = DispatchTime.now().uptimeNanoseconds
            drewBar = true
            // Erase to the end of the line: a shorter line than the last one would keep its tail (`ETA 0:01`).
            // The width is asked at each redraw, so the bar follows a resized terminal.
            return "\r"
                + Self.bar(progress, elapsed: Double(now - start) / 1e9, since: resumedAt, columns: Self.columns())
                + Self.eraseToEndOfLine
        }
        if let line { Command.write(line, to: .standardError) }
    }

    /// Ends the bar's line, once, before something else is written to the terminal (the answer, on standard
    /// output): a frame drawn after it would be drawn over that output.
    func endLine() {
        let ends = lock.withLock {
            defer { (drewBar, lineEnded) = (false, true) }
            return drewBar && !lineEnded
        }
        if ends { Command.write("\n", to: .standardError) }
    }

    /// Prints `lines` on stderr where the bar is, which the next report draws again below them.
    func printAbove(_ lines: [String]) {
        let text = lock.withLock {
            (drewBar ? "\r" + Self.eraseToEndOfLine : "") + lines.joined(separator: "\n") + "\n"
        }
        Command.write(text, to: .standardError)
    }

    /// Ends the bar, and prints the summary: what was sent, how fast, and how it ended.
    func finish(outcome: String) {
        guard !isSilent else { return }
        let (progress, drewBar, resumedAt): (MultipartUploadProgress, Bool, UInt64) = lock.withLock {
            defer { (self.drewBar, lineEnded) = (false, true) }
            return (latest, self.drewBar, self.resumedAt)
        }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let sent = progress.bytesSent - min(resumedAt, progress.bytesSent)
        let resumed = resumedAt > 0 ? " from byte \(resumedAt)" : ""
        let summary =
            "multipart: sent \(Self.bytes(sent))\(resumed) in \(Self.seconds(elapsed)) s "
            + "(\(Self.bytes(Self.rate(sent, elapsed)))/s), \(outcome)\n"
        Command.write((drewBar ? "\n" : "") + summary, to: .standardError)
    }

    /// ANSI "erase in line", from the cursor to the end.
    static let eraseToEndOfLine = "\u{1B}[K"

    /// `[#########           ]  45%  1.2 GiB / 2.0 GiB  85.3 MB/s  ETA 0:09`, `elapsed` in seconds, the speed of
    /// what was sent `since` a byte (where a saved upload resumed). In a terminal of `columns` columns it keeps to
    /// one line short of the last column, which would wrap: the bar narrows, then the ETA, the rate, the bar and the
    /// byte counts are dropped in turn. While the length is unknown (standard input streamed under `-C -`):
    /// `1.2 GiB sent  85.3 MiB/s`.
    static func bar(
        _ progress: MultipartUploadProgress, elapsed: Double, since: UInt64 = 0, columns: Int? = nil
    ) -> String {
        let speed = rate(progress.bytesSent - min(since, progress.bytesSent), elapsed)
        let perSecond = "\(bytes(speed))/s"
        let room = columns.map { $0 - 1 } ?? .max
        guard let total = progress.totalBytes, let fraction = progress.fractionCompleted.map({ min(1, max(0, $0)) })
        else {
            let sent = "\(bytes(progress.bytesSent)) sent"
            return [sent + "  " + perSecond, sent].first { $0.count <= room } ?? String(sent.prefix(max(room, 0)))
        }
        let remaining = Double(total - min(progress.bytesSent, total))
        let eta = speed > 0 ? Int((remaining / speed).rounded(.up)) : 0
        let percent = String(format: "%3d%%", Int(fraction * 100))
        let counts = "\(bytes(progress.bytesSent)) / \(bytes(total))"
        let timeLeft = "ETA \(eta / 60):" + String(format: "%02d", eta % 60)
        func meter(_ width: Int) -> String {
            let filled = Int(fraction * Double(width))
            return "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "] "
        }
        let fields = [counts, perSecond, timeLeft]
        // The whole line, then a narrower meter, then fewer fields, the meter last of all.
        for kept in stride(from: fields.count, through: 1, by: -1) {
            let tail = ([percent] + fields.prefix(kept)).joined(separator: "  ")
            for width in [24, 20, 16, 12, 10] where meter(width).count + tail.count <= room {
                return meter(width) + tail
            }
        }
        let plain = [percent + "  " + counts, percent.trimmingCharacters(in: .whitespaces)]
        return plain.first { $0.count <= room } ?? String(plain[1].prefix(max(room, 0)))
    }

    /// The terminal's width in columns, when stderr is one that says.
    private static func columns() -> Int? {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
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

    private static func rate(_ bytes: UInt64, _ seconds: Double) -> Double {
        seconds > 0 ? Double(bytes) / seconds : 0
    }

    private static func seconds(_ elapsed: Double) -> String {
        String(format: "%.2f", elapsed)
    }
}
