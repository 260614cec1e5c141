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

    /// The environment variable that says this process runs one test and nothing else: `Tests/long-runs.py` sets it
    /// when it runs a test tagged `measuredAlone` in a `swift test` of its own, after the long runs, so that a bound
    /// on wall time or on the whole process is measured where no other suite loads the machine or the process.
    public static let aloneVariable = "MULTIPARTSTREAM_ALONE"

    /// Whether this process runs one test alone (``aloneVariable``): a bound on wall time is then the promise itself.
    public static var alone: Bool {
        let value = ProcessInfo.processInfo.environment[aloneVariable] ?? ""
        return !value.isEmpty && value != "0"
    }

    /// Why a long run was left out, said where it is skipped.
    public static let reason =
        "a long run (real outages, kills or gigabytes): python3 Tests/long-runs.py runs it, with \(variable)=1"
}

/// How long a cancel may take to return to its caller, as a test checks it.
public enum CancelBound {
    /// Whether a sanitizer instruments this process (CI names it in MULTIPART_SANITIZER): every step runs many times
    /// slower there, and the pass is for races and traps.
    public static let sanitized = ProcessInfo.processInfo.environment["MULTIPART_SANITIZER"] != nil

    /// In `swift test`, beside every other suite on two cores: 5 s, a number a loaded machine cannot reach unless the
    /// code is wrong. Loaded two-core runs took 0.83 s at worst (a cancel storm beside the 5,000-file test and the
    /// command's process-spawning tests, #78) and 1.34 s under ThreadSanitizer; a cancel that waits for something it
    /// must not takes 10 s or more: the cancel gate's longest wait (`CancelGate.longestWait`), a request's timeout,
    /// the rest of a body or an answer that a test's server never sends. 5 s, half the shortest of those, still fails
    /// them. Under a sanitizer beside every other suite, five times it: a sanitizer's pass is for races and traps,
    /// and there a remove's cancel took 14.6 s to come back (CI, AddressSanitizer, its background builds running:
    /// the suites' tasks waited for the two threads that run them all); the plain pass and the measured-alone pass
    /// hold the promise.
    public static let loaded = 5.0

    /// The bound this process checks for a cancel whose promise is `promised` seconds: the promise itself where the
    /// test runs alone (``LongRuns/alone``), ``loaded`` otherwise; five times either under a sanitizer.
    public static func seconds(promised: Double = 0.5) -> Double {
        (LongRuns.alone ? promised : max(loaded, promised)) * (sanitized ? 5 : 1)
    }
}
