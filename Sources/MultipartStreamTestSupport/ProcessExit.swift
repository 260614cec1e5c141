import Foundation

extension Process {
    /// Runs the process and awaits its exit without holding a thread; returns the seconds it ran.
    ///
    /// A test blocked in `waitUntilExit()` holds one of Swift's cooperative threads, of which a 2-core machine has
    /// two: every other test of the run waits behind it (the command's tests, run so, held the whole suite back two
    /// minutes). At most ``concurrentProcesses`` run at once this way, as many as those threads let run before, so that
    /// a hundred command tests do not all start at once on two cores (the time waited for a turn is not in the
    /// seconds returned). Killed, and ``WaitGaveUp`` thrown, once it runs past `seconds`.
    @discardableResult
    public func runToExit(upTo seconds: Double = 300) async throws -> Double {
        guard !ProcessTurns.held else { return try await runWithoutATurn(upTo: seconds) }
        return try await Process.inOneTurn { try await runWithoutATurn(upTo: seconds) }
    }

    /// Runs `body` in one turn of ``runToExit(upTo:)``, which every process it runs shares: a test whose second
    /// process must follow its first at once (a rerun moments after a Ctrl-C) does not wait behind other tests'.
    public static func inOneTurn<Value>(_ body: () async throws -> Value) async throws -> Value {
        await ProcessTurns.shared.take()
        do {
            let value = try await ProcessTurns.$held.withValue(true) { try await body() }
            await ProcessTurns.shared.give()
            return value
        } catch {
            await ProcessTurns.shared.give()
            throw error
        }
    }

    private func runWithoutATurn(upTo seconds: Double) async throws -> Double {
        let killed = KilledFlag()
        let stopwatch = Stopwatch()
        let name = executableURL?.lastPathComponent ?? "a process"
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let ended = FirstOutcome(continuation)
            terminationHandler = { _ in ended.resume(with: .success(())) }
            do {
                try startAlone()
            } catch {
                terminationHandler = nil
                ended.resume(with: .failure(error))
                return
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
                guard isRunning else { return }
                killed.set()
                terminate()
                // A process whose exit Foundation never reports (another child holding the end of its socket pair)
                // fails the test rather than hanging it.
                DispatchQueue.global().asyncAfter(deadline: .now() + 10) {
                    ended.resume(
                        with: .failure(WaitGaveUp(description: "\(name) was killed, and its exit never reported")))
                }
            }
        }
        let ran = stopwatch.seconds
        if killed.isSet {
            throw WaitGaveUp(
                description: "\(executableURL?.lastPathComponent ?? "a process") ran past \(seconds) s and was killed")
        }
        return ran
    }

    /// How many processes ``runToExit(upTo:)`` runs at once.
    public static let concurrentProcesses = 2
}

/// The turns of ``Process/runToExit(upTo:)``: waited for without holding a thread.
private actor ProcessTurns {
    static let shared = ProcessTurns()
    /// Whether this task runs in a turn it holds already (``Process/inOneTurn(_:)``).
    @TaskLocal static var held = false
    private var free = Process.concurrentProcesses
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func take() async {
        if free > 0 {
            free -= 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func give() {
        if waiting.isEmpty {
            free += 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}

private final class KilledFlag: @unchecked Sendable {
    // @unchecked: `value` is guarded by `lock`.
    private let lock = NSLock()
    private var value = false

    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
