import Foundation

/// A wait that gave up: what it waited for, for how long, and what it saw last.
public struct WaitGaveUp: Error, CustomStringConvertible {
    /// What was awaited, and why the wait ended.
    public let description: String

    /// A wait that gave up, as `description` says.
    public init(description: String) {
        self.description = description
    }
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

/// Runs `work` on a thread of its own, off the pool that runs the tests: a test that must act at a moment (a
/// Ctrl-C once a server holds a MiB, a kill at a random instant) polls there, since a wait on the pool, which two
/// cores' worth of tests keep busy, can come seconds late.
@discardableResult
public func onAThreadOfItsOwn<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}

extension Process {
    /// Why the process can no longer do what a test waits for: it exited, with this status; `nil` while it runs.
    public var exitedWithStatus: String? {
        isRunning ? nil : "the process exited with status \(terminationStatus)"
    }
}

/// Awaits `operation` with a deadline: its value, its error, or ``WaitGaveUp`` after `seconds` (the operation is then
/// cancelled and left behind), so that an await that never ends (a task's `result`, a stream never finished) fails
/// the test rather than hanging the run.
public func within<Value: Sendable>(
    seconds: Double, _ what: String, _ operation: @escaping @Sendable () async throws -> Value
) async throws -> Value {
    try await withCheckedThrowingContinuation { continuation in
        let first = FirstOutcome(continuation)
        let work = Task { first.resume(with: await Result { try await operation() }) }
        Task {
            try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            if first.resume(with: .failure(WaitGaveUp(description: "waited \(seconds) s for \(what)"))) {
                work.cancel()
            }
        }
    }
}

/// A continuation resumed once, by whichever ends first: the work or its deadline (``within(seconds:_:_:)``), a
/// process's exit or its deadline's failure (``Foundation/Process/runToExit(upTo:)``).
final class FirstOutcome<Value: Sendable>: @unchecked Sendable {
    // @unchecked: `continuation` is guarded by `lock`.
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Value, any Error>?

    init(_ continuation: CheckedContinuation<Value, any Error>) {
        self.continuation = continuation
    }

    /// Resumes the continuation unless another outcome did; whether this one was the first.
    @discardableResult
    func resume(with outcome: Result<Value, any Error>) -> Bool {
        let continuation = lock.withLock { () -> CheckedContinuation<Value, any Error>? in
            defer { self.continuation = nil }
            return self.continuation
        }
        continuation?.resume(with: outcome)
        return continuation != nil
    }
}

extension Result where Failure == any Error {
    /// The outcome of an async throwing `body`.
    public init(_ body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
