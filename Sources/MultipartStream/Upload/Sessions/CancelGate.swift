import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Cancels one task so that the cancel never races the task's own end, which traps the process on Linux.
///
/// swift-corelibs-foundation 6.3 (and its main branch) cancels in two steps. The first, on the task's work queue,
/// finds the task running, marks it cancelling, and asks for the task's protocol with a callback that queues the
/// second step: report the failure through the session's task registry. That callback runs at once when the
/// protocol exists, and later when the task is still waiting for its configuration's `URLCache`, which answers on a
/// background-priority thread: the task then starts loading first, and on loopback a small upload can be sent and
/// answered before that thread queues the second step. Meanwhile the task's natural end tells the delegate
/// (`didCompleteWithError`), marks the task completed, and removes it from the registry. The second step then finds
/// no task and traps ("Trying to access a behaviour for a task that in not in the registry"). URLSession's own upload
/// tasks, cancelled a moment after they start, meet it within a hundred cancels.
///
/// The removal is queued only after the delegate returns from `didCompleteWithError`, and the second step, once it
/// runs, holds URLSession's one queue until it has reported: so the delegate closes the window. Told of the end
/// (``taskEnded(_:)``), the gate lets no new cancel start, waits for any under way to return, and, if one passed,
/// waits until the second step has begun: it is the one writer of the task's `error` as `URLError(.cancelled)`.
/// A cancel that comes after the end does nothing: the task has ended.
///
/// Only cancels made through the gate are covered: one the caller makes on the task itself is not, which is why a
/// task handed to the caller is stopped through ``URLSession/cancelMultipartUpload(_:)``.
final class CancelGate: @unchecked Sendable {
    // @unchecked: every property is guarded by `condition`.
    private let condition = NSCondition()
    /// Cancels that passed the gate and have not returned.
    private var cancelling = 0
    /// Whether the task's end was told: no cancel passes after it.
    private var ended = false
    /// Whether a cancel passed: only then does the end wait for its second step.
    private var cancelled = false

    /// How long the end waits for a cancel's steps, which wait for URLSession's one queue and for a thread of the
    /// lowest priority: far longer than either takes (a few milliseconds at most, measured under load), short of a
    /// hang.
    static let longestWait: TimeInterval = 10

    /// Cancels `task`, unless its end was told already.
    func cancel(_ task: URLSessionTask) {
        condition.lock()
        guard !ended else { return condition.unlock() }
        cancelling += 1
        cancelled = true
        condition.unlock()
        #if canImport(FoundationNetworking)
            PacedDelegateQueue.cancel(task)
        #else
            task.cancel()
        #endif
        condition.lock()
        cancelling -= 1
        if cancelling == 0 { condition.broadcast() }
        condition.unlock()
    }

    /// `task` ended: to be called from the delegate's `didCompleteWithError`, before it returns.
    func taskEnded(_ task: URLSessionTask) {
        let deadline = Date(timeIntervalSinceNow: Self.longestWait)
        condition.lock()
        ended = true
        while cancelling > 0, condition.wait(until: deadline) {}
        let waits = cancelled
        condition.unlock()
        #if canImport(FoundationNetworking)
            guard waits else { return }
            // Reading `priority` waits for the task's queue, where a second step queued at once runs; one queued
            // later is waited for in short naps.
            _ = task.priority
            while (task.error as? URLError)?.code != .cancelled, Date() < deadline {
                usleep(50)
                _ = task.priority
            }
        #endif
    }
}
