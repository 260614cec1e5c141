import Foundation

/// Watches the bytes an append hands out, and ends it when they come slower than ``MultipartResumption/Stall`` says
/// for as long as it says: a connection that neither fails nor moves, as when a laptop sleeps or a network drops
/// packets silently. Only while bytes of the append are left to hand out: once all are, the server's answer may take
/// as long as the application needs, and sending the part again would not make it come sooner. The command watches a
/// whole attempt with it, as curl's `--speed-limit` does.
package struct StallWatch: Sendable {
    /// The transfer stalled: for an append, a connection failure, as a dropped one is.
    /// Its `localizedDescription` is its description, not "The operation could not be completed": it is what a
    /// user reads when an upload gives up, as the underlying error of `.resumeSaved` or `.resumeFailed`.
    package struct Stalled: LocalizedError, CustomStringConvertible {
        package let rule: MultipartResumption.Stall
        package var description: String {
            "the connection stalled: fewer than \(rule.bytesPerSecond) bytes a second went out for \(rule.seconds) s "
                + "(a network that drops packets, a server that stopped reading, or one that cannot be reached "
                + "at that address)"
        }
        package var errorDescription: String? { description }
    }

    let rule: MultipartResumption.Stall
    /// The bytes handed out so far.
    let handedOut: @Sendable () -> UInt64
    /// Where the bytes end, as `handedOut` counts them; `nil` to watch until cancelled.
    let end: UInt64?

    package init(rule: MultipartResumption.Stall, handedOut: @escaping @Sendable () -> UInt64, end: UInt64? = nil) {
        self.rule = rule
        self.handedOut = handedOut
        self.end = end
    }

    /// Returns when every byte is handed out or the task is cancelled; throws ``Stalled``.
    package func run() async throws {
        let interval = min(0.25, rule.seconds / 4)
        var last = handedOut()
        var lastTime = DispatchTime.now().uptimeNanoseconds
        var slowSince: UInt64?
        while !Task.isCancelled {
            try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))
            let now = DispatchTime.now().uptimeNanoseconds
            let handedOut = handedOut()
            if let end, handedOut >= end { return }
            let seconds = Double(now - lastTime) / 1e9
            if Double(handedOut &- last) < Double(rule.bytesPerSecond) * seconds {
                let since = slowSince ?? lastTime
                slowSince = since
                if Double(now - since) / 1e9 >= rule.seconds { throw Stalled(rule: rule) }
            } else {
                slowSince = nil
            }
            (last, lastTime) = (max(last, handedOut), now)
        }
    }
}
