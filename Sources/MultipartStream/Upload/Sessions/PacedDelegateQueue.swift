import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking

    /// The private session's delegate queue, which makes Linux URLSession wait while too many of its events wait for
    /// the delegate: the one way to slow its reading of an answer to the pace the answer is taken at.
    ///
    /// swift-corelibs-foundation hands each piece of an answer's body (at most libcurl's 16 KiB buffer) to the
    /// delegate queue from libcurl's thread and reads on at once: it never pauses a transfer for its delegate (its
    /// `suspend()` of a running task traps when the next piece arrives). An answer that comes faster than it is
    /// written (a file under writeback, a pipe) piles up in the queue, up to its whole length. Blocking that thread
    /// here leaves the socket unread, and TCP then slows the server.
    ///
    /// The wait is bounded, so that a delegate event that itself waits for that thread (making or cancelling a task)
    /// cannot deadlock with it: past ``longestWait`` the event is queued all the same. Events that are quick to take
    /// (a small answer's, or one the upload stopped keeping) never reach ``limit``.
    final class PacedDelegateQueue: OperationQueue, @unchecked Sendable {
        // @unchecked: `queued` is guarded by `condition`.
        private let condition = NSCondition()
        private var queued = 0

        /// Events that may wait before URLSession is made to: 16 MiB of an answer's body at most.
        static let limit = 1024
        static let longestWait: TimeInterval = 0.05

        override init() {
            super.init()
            // As URLSession's own delegate queue: events in order.
            maxConcurrentOperationCount = 1
            name = "MultipartStream.PrivateSession"
        }

        override func addOperation(_ block: @escaping @Sendable () -> Void) {
            condition.lock()
            if queued >= Self.limit {
                // One wait, not a loop: see the type's description.
                _ = condition.wait(until: Date(timeIntervalSinceNow: Self.longestWait))
            }
            queued += 1
            condition.unlock()
            super.addOperation { [condition] in
                block()
                condition.lock()
                self.queued -= 1
                condition.signal()
                condition.unlock()
            }
        }
    }
#endif
