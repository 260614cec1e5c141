import Foundation
import Testing

@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking

    /// The private sessions' delegate queue makes URLSession's thread wait while the queue is full, but never while a
    /// cancel waits for that thread: the connection would stay readable, and the cancel waiting, for as long as the
    /// server writes.
    @Suite struct PacedDelegateQueueTests {
        /// A full queue whose delegate is held: an event past the limit would wait its whole bounded wait (50 ms),
        /// but none does while a cancel is under way.
        @Test func noEventWaitsWhileACancelWaitsForURLSessionsThread() async throws {
            let queue = PacedDelegateQueue()
            let held = DispatchSemaphore(value: 0)
            queue.addOperation { held.wait() }
            for _ in 0..<PacedDelegateQueue.limit { queue.addOperation {} }
            defer { held.signal() }
            let past = 40
            func adding() -> TimeInterval {
                let start = Date()
                for _ in 0..<past { queue.addOperation {} }
                return Date().timeIntervalSince(start)
            }
            // Each wait would be a timeout, since nothing is taken: 2 s at least, however loaded the machine.
            // Without a wait the adds take microseconds: 1.5 s is a thousand times that, and short of the waits'
            // least. (The waits themselves are not timed here: a cancel in another test, beside this one, lifts them.)
            let cancelling = PacedDelegateQueue.whileCancelling { adding() }
            #expect(cancelling < 1.5, "\(cancelling) s while a cancel waits")
        }
    }
#endif
