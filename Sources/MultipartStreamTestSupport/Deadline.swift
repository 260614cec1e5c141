import Foundation

/// A wait that gave up: what it waited for, for how long, and what it saw last.
public struct WaitGaveUp: Error, CustomStringConvertible {
    /// What was awaited, and why the wait ended.
    public let description: String
}

/// Waits for `what` with a deadline, polling `condition` every `interval` seconds: a test that waits on a process, a
/// file or a server never hangs the run. Throws ``WaitGaveUp`` after `seconds`, or at once when `ended` says what
/// was awaited can no longer happen (a child process that exited), with `seen`'s account of the last look.
public func waitFor(
    _ what: String, upTo seconds: Double = 30, every interval: Double = 0.01, ended: () -> String? = { nil },
    seen: () -> String = { "" }, until condition: () throws -> Bool
) throws {
    let stopwatch = Stopwatch()
    while try !condition() {
        if let ended = ended() { throw WaitGaveUp(description: "waited for \(what), but \(ended); saw \(seen())") }
        guard stopwatch.seconds < seconds else {
            throw WaitGaveUp(description: "waited \(seconds) s for \(what); saw \(seen())")
        }
        Thread.sleep(forTimeInterval: interval)
    }
}

/// ``waitFor(_:upTo:every:ended:seen:until:)`` from async code, sleeping without holding a thread.
public func waitFor(
    _ what: String, upTo seconds: Double = 30, every interval: Double = 0.01, ended: () -> String? = { nil },
    seen: () -> String = { "" }, until condition: () throws -> Bool
) async throws {
    let stopwatch = Stopwatch()
    while try !condition() {
        if let ended = ended() { throw WaitGaveUp(description: "waited for \(what), but \(ended); saw \(seen())") }
        guard stopwatch.seconds < seconds else {
            throw WaitGaveUp(description: "waited \(seconds) s for \(what); saw \(seen())")
        }
        try await Task.sleep(nanoseconds: UInt64(interval * 1e9))
    }
}

extension Process {
    /// Why the process can no longer do what a test waits for: it exited, with this status; `nil` while it runs.
    public var exitedWithStatus: String? {
        isRunning ? nil : "the process exited with status \(terminationStatus)"
    }
}
