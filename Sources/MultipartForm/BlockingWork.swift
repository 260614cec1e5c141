import Dispatch

/// Runs `work`, which may block (reading a pipe that never yields), on `queue`, and returns its result; a cancel of
/// the calling task returns `cancelled` at once instead, and `work` finishes on its own whenever it does. No call
/// waits for a stream that never comes back. `cancelled` runs only when the cancel comes first: once `work` has
/// answered, a late cancel undoes nothing of what it made.
func awaitBlocking<Value: Sendable>(
    on queue: DispatchQueue, cancelled: @autoclosure @escaping @Sendable () -> Value,
    _ work: @escaping @Sendable () -> Value
) async -> Value {
    let answer = Answer<Value>()
    return await withTaskCancellationHandler {
        await withCheckedContinuation { continuation in
            answer.wait(continuation)
            queue.async {
                let value = work()
                answer.give { value }
            }
        }
    } onCancel: {
        answer.give(cancelled)
    }
}

/// The first value given, handed to the continuation once both are there.
private final class Answer<Value: Sendable>: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Lock()
    private var continuation: CheckedContinuation<Value, Never>?
    private var value: Value?
    private var isGiven = false

    func wait(_ continuation: CheckedContinuation<Value, Never>) {
        let ready: Value? = lock.withLock {
            guard let value else {
                self.continuation = continuation
                return nil
            }
            return value
        }
        if let ready { continuation.resume(returning: ready) }
    }

    /// Gives the value `make` makes, if none was given before; `make` runs only then.
    func give(_ make: () -> Value) {
        let (waiting, given): (CheckedContinuation<Value, Never>?, Value?) = lock.withLock {
            guard !isGiven else { return (nil, nil) }
            isGiven = true
            let made = make()
            value = made
            defer { continuation = nil }
            return (continuation, made)
        }
        if let waiting, let given { waiting.resume(returning: given) }
    }
}
