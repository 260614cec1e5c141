import Foundation

/// The tests that must take real time: outages of tens of seconds, kill storms, gigabytes streamed in flat memory.
/// `swift test` leaves them out, so that the suite runs in minutes; their behaviour's logic (retry waits, outage
/// gates, the queue's schedule) is tested on an injected clock in the suite. `Tests/long-runs.py` runs them, as CI
/// does in a step of its own, by setting ``variable``.
public enum LongRuns {
    /// The environment variable that turns the long runs on (any value but empty or `0`).
    public static let variable = "MULTIPARTSTREAM_LONG_RUNS"

    /// Whether this process runs the long runs.
    public static var enabled: Bool {
        let value = ProcessInfo.processInfo.environment[variable] ?? ""
        return !value.isEmpty && value != "0"
    }

    /// Why a long run was left out, said where it is skipped.
    public static let reason =
        "a long run (real outages, kills or gigabytes): python3 Tests/long-runs.py runs it, with \(variable)=1"
}
