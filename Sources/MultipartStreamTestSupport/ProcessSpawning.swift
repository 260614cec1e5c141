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

    /// Starts the process alone with a pipe for its standard output, made in the same turn, and returns all it wrote,
    /// once it has exited: read to the end first, so that a large output cannot block the child.
    public func outputAlone() throws -> Data {
        let pipe = try startAlone {
            let pipe = Pipe()
            standardOutput = pipe
            return pipe
        }
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        waitUntilExit()
        return output
    }

    /// ``startAlone(preparing:)`` with nothing to prepare.
    public func startAlone() throws {
        try startAlone {}
    }

    private static let spawning = NSLock()
}
