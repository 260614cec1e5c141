/// A value behind a lock.
final class LockedValue<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = Lock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
        lock.withLock { body(&value) }
    }
}
