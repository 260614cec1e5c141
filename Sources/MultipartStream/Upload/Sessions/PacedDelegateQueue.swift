import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
    import Synchronization

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
    /// cannot deadlock with it: past ``longestWait`` the event is queued all the same. No queue waits at all while a
    /// cancel made through ``cancel(_:)`` waits for that thread, whichever session it is for.
    final class PacedDelegateQueue: OperationQueue, @unchecked Sendable {
        // @unchecked: `queued` and `waiting` are atomics; `condition` only carries the wake-up.
        /// Events queued and not yet taken: counted without a lock, since every event of every task passes here
        /// and only a full queue needs one.
        private let queued = Atomic<Int>(0)
        /// Threads waiting for room: an event taken wakes them only when there are some.
        private let waiting = Atomic<Int>(0)
        private let condition = NSCondition()

        /// Events that may wait before URLSession is made to: 16 MiB of an answer's body at most.
        static let limit = 1024
        static let longestWait: TimeInterval = 0.05

        /// Cancels made and not yet returned, in every session: URLSession makes a cancel on the one thread that
        /// reads every answer (all sessions share it), and keeps that thread on a connection while it stays
        /// readable. A queue that slowed the reading then would keep the connection readable, and the cancel
        /// waiting, for as long as the server writes (an endless answer: forever) whenever the delegate takes pieces
        /// slower than the server writes them: behind a sink on a slow disk, or another task's event that holds the
        /// delegate queue, each piece waits 50 ms, 320 KiB a second. Read at full speed, the connection drains and the
        /// cancel runs.
        private static let cancelsWaiting = Atomic<Int>(0)

        /// Makes a task's cancel, during which no queue waits.
        static func cancel(_ task: URLSessionTask) {
            whileCancelling { task.cancel() }
        }

        /// Runs `cancel`, which waits for URLSession's thread, with no queue making that thread wait meanwhile.
        static func whileCancelling<T>(_ cancel: () -> T) -> T {
            cancelsWaiting.add(1, ordering: .relaxed)
            defer { cancelsWaiting.subtract(1, ordering: .relaxed) }
            return cancel()
        }

        override init() {
            super.init()
            // As URLSession's own delegate queue: events in order.
            maxConcurrentOperationCount = 1
            name = "MultipartStream.PrivateSession"
        }

        override func addOperation(_ block: @escaping @Sendable () -> Void) {
            if queued.add(1, ordering: .sequentiallyConsistent).newValue > Self.limit,
                Self.cancelsWaiting.load(ordering: .relaxed) == 0
            {
                waitForRoom()
            }
            super.addOperation { [self] in
                block()
                // A waiter counts itself before it looks at `queued`, under `condition`: seen here, or it sees the
                // room this makes.
                if queued.subtract(1, ordering: .sequentiallyConsistent).newValue <= Self.limit,
                    waiting.load(ordering: .sequentiallyConsistent) > 0
                {
                    condition.lock()
                    condition.signal()
                    condition.unlock()
                }
            }
        }

        /// One bounded wait, not a loop: see the type's description.
        private func waitForRoom() {
            condition.lock()
            waiting.add(1, ordering: .sequentiallyConsistent)
            if queued.load(ordering: .sequentiallyConsistent) > Self.limit {
                _ = condition.wait(until: Date(timeIntervalSinceNow: Self.longestWait))
            }
            waiting.subtract(1, ordering: .sequentiallyConsistent)
            condition.unlock()
        }
    }
#endif
