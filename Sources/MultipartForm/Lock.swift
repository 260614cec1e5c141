import Foundation

/// A mutex with a scoped `withLock`, since `NSLock.withLock` needs iOS 17 and macOS 14 and this package goes down to
/// Swift concurrency's own floor. Also the lock of the tests and the `multipart` command.
package final class Lock: @unchecked Sendable {
    // @unchecked: NSLock is thread-safe; the class only adds the scope.
    private let mutex = NSLock()

    package init() {}

    /// Runs `body` with the lock held and returns what it returns.
    package func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        mutex.lock()
        defer { mutex.unlock() }
        return try body()
    }
}
