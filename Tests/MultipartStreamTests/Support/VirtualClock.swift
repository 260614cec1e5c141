import Foundation
import MultipartStreamTestSupport

@testable import MultipartQueue
@testable import MultipartStream

/// A queue's clock that stands still until the test moves it: the queue's waits last no real time, and end when the
/// test says.
final class VirtualClock: Sendable {
    private struct Held {
        var now: Date
        var next = 0
        /// Sleeps under way, by token: until when, and who to wake.
        var sleepers: [Int: (until: Date, waiter: CheckedContinuation<Void, Never>)] = [:]
    }
    private let held: LockedValue<Held>

    init(at start: Date) {
        held = LockedValue(Held(now: start))
    }

    var now: Date { held.withLock { $0.now } }

    /// When the sleeps under way end.
    var sleeps: [Date] { held.withLock { $0.sleepers.values.map(\.until).sorted() } }

    var queueClock: QueueClock {
        QueueClock(now: { [self] in now }, sleep: { [self] until in await sleep(until: until) })
    }

    /// Moves the time on to `time`, waking every sleep that ends by then.
    func advance(to time: Date) {
        let woken = held.withLock { held -> [CheckedContinuation<Void, Never>] in
            held.now = max(held.now, time)
            let due = held.sleepers.filter { $0.value.until <= held.now }
            for token in due.keys { held.sleepers[token] = nil }
            return due.values.map(\.waiter)
        }
        for waiter in woken { waiter.resume() }
    }

    private func sleep(until: Date) async {
        let token = held.withLock { held -> Int in
            held.next += 1
            return held.next
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                let now = held.withLock { held -> Bool in
                    // Cancelled before it began (the handler found nothing to wake), or already due.
                    if Task.isCancelled || until <= held.now { return true }
                    held.sleepers[token] = (until, waiter)
                    return false
                }
                if now { waiter.resume() }
            }
        } onCancel: {
            held.withLock { $0.sleepers.removeValue(forKey: token) }?.waiter.resume()
        }
    }
}
