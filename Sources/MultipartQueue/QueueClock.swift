import Foundation

/// The queue's time: what time it is, and a sleep until a time. Every time the queue decides on (a wait's end, a
/// probe, when a record says a form went) comes from one, so that a run's waits are tested in virtual time.
package struct QueueClock: Sendable {
    /// The time now.
    package var now: @Sendable () -> Date
    /// Returns at `time`, or at once when the task is cancelled.
    package var sleep: @Sendable (_ until: Date) async -> Void

    package init(now: @escaping @Sendable () -> Date, sleep: @escaping @Sendable (_ until: Date) async -> Void) {
        self.now = now
        self.sleep = sleep
    }

    /// The system's clock. A millisecond past the time, so that the wait it ends has come when the run looks.
    package static let system = QueueClock(
        now: { Date() },
        sleep: { time in
            try? await Task.sleep(nanoseconds: UInt64(max(0, time.timeIntervalSinceNow) * 1e9) + 1_000_000)
        })
}
