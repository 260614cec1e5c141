import Foundation
import Testing

@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// ``CancelGate``, event by event, on a task that only counts its cancels: what passes before the end, what the end
/// waits for, and what comes too late.
@Suite struct CancelGateTests {
    /// A task that counts its cancels, and once cancelled says so in its `error`, as URLSession's second step of a
    /// cancel does; `holding` makes `cancel()` wait until released, as one waiting for URLSession's queue does.
    final class CountingTask: URLSessionDataTask, @unchecked Sendable {
        // @unchecked: guarded by `lock`.
        private let lock = NSLock()
        private var count = 0
        private let hold: DispatchSemaphore?
        let entered = DispatchSemaphore(value: 0)

        init(holding: Bool = false) {
            hold = holding ? DispatchSemaphore(value: 0) : nil
            super.init()
        }

        override func cancel() {
            entered.signal()
            hold?.wait()
            lock.withLock { count += 1 }
        }

        override var error: (any Error)? {
            lock.withLock { count > 0 ? URLError(.cancelled) : nil }
        }

        var cancels: Int { lock.withLock { count } }

        func release() { hold?.signal() }
    }

    @Test func aCancelBeforeTheEndReachesTheTaskAndTheEndReturns() {
        let gate = CancelGate()
        let task = CountingTask()
        gate.cancel(task)
        gate.cancel(task)
        #expect(task.cancels == 2)
        gate.taskEnded(task)
        #expect(task.cancels == 2)
    }

    @Test func aCancelAfterTheEndDoesNothing() {
        let gate = CancelGate()
        let task = CountingTask()
        gate.taskEnded(task)
        gate.cancel(task)
        #expect(task.cancels == 0)
    }

    @Test func anEndWithNoCancelReturnsAtOnce() {
        let gate = CancelGate()
        let task = CountingTask()
        let stopwatch = Date()
        gate.taskEnded(task)
        // Its error is nil, which an end after a cancel would wait on: no cancel passed, so nothing is waited for. An
        // end that waited would wait `CancelGate.longestWait`, 10 s; 5 s fails it, and no load holds a lock and a flag
        // that long.
        #expect(Date().timeIntervalSince(stopwatch) < CancelGate.longestWait / 2)
    }

    /// On threads of their own, as URLSession's: the concurrency pool, which the suite keeps busy, decides nothing.
    @Test func theEndWaitsForACancelUnderWayAndNoneStartsMeanwhile() {
        let gate = CancelGate()
        let task = CountingTask(holding: true)
        let (cancelReturned, ended) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        Thread.detachNewThread {
            gate.cancel(task)
            cancelReturned.signal()
        }
        #expect(task.entered.wait(timeout: .now() + 10) == .success, "the cancel never reached the task")
        Thread.detachNewThread {
            gate.taskEnded(task)
            ended.signal()
        }
        #expect(ended.wait(timeout: .now() + 0.2) == .timedOut, "the end returned while a cancel was under way")
        // A cancel asked for now comes after the end was told: it does not reach the task.
        let late = CountingTask()
        gate.cancel(late)
        #expect(late.cancels == 0)
        task.release()
        #expect(cancelReturned.wait(timeout: .now() + 10) == .success)
        #expect(ended.wait(timeout: .now() + 10) == .success, "the end did not return once the cancel did")
        #expect(task.cancels == 1)
    }

    @Test func aTaskTheLibraryDidNotMakeIsGivenItsOwnCancel() {
        let task = CountingTask()
        URLSession.shared.cancelMultipartUpload(task)
        #expect(task.cancels == 1)
    }

}
