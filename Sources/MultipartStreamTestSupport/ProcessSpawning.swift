import Foundation

extension Process {
    /// Starts the process with no other process of this test run starting at the same moment, after `prepare` (which
    /// makes the pipes it hands the process) in the same turn.
    ///
    /// Foundation's `Process` learns of a child's exit from a socket pair it makes in `run()`: the child holds one end,
    /// and the exit is seen when that end closes. A child another thread started between the pair's making and the
    /// child's own start inherited that end too, and the first child's exit then went unseen until the second ended:
    /// a CI run hung so for 12 minutes (a draft server, started beside a command, held the command's end, and the test
    /// awaited the command). `run()` closes every other descriptor in the child, but only those open when it looks, so
    /// a pipe made meanwhile by another thread leaks the same way: made in `prepare`, it is not.
    public func startAlone<Value>(preparing prepare: () throws -> Value) throws -> Value {
        try Self.spawning.withLock {
            let value = try prepare()
            try run()
            return value
        }
    }

    /// ``startAlone(preparing:)`` with nothing to prepare.
    public func startAlone() throws {
        try startAlone {}
    }

    private static let spawning = NSLock()
}
