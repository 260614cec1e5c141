import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartQueue
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A remove that waits for another process's run is cancellable: the wait sleeps on the queue's clock, whose sleep
/// returns at once when cancelled, and a loop around it that never looked at the cancel spun until its 10 s end.
@Suite struct QueueRemoveCancelTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    /// Another process runs the queue (it holds the queue's lock) and never gets to the removal; the queue's clock
    /// stands still, so only the cancel can end the remove's wait: a wait that missed it spins and never returns,
    /// which the deadline on its return catches wherever the test runs. It returns
    /// ``MultipartUploadQueue/Removal/asked`` within half a second of the cancel, measured where the test runs alone
    /// (`measuredAlone`: beside every suite a fresh clone's CI measured 4.4 s, and 14.6 s under AddressSanitizer, the
    /// remove's task waiting its turn for the two threads), the clock not moved, and the removal stays asked on disk
    /// for that run.
    @Test(.tags(.measuredAlone)) func aRemoveWaitingForAnotherProcessesRunReturnsAtItsCancel() async throws {
        let clock = VirtualClock(at: Date(timeIntervalSince1970: 2_000_000_000))
        let queueDirectory = directory.path("queue")
        let queue = try MultipartUploadQueue(directory: queueDirectory, clock: clock.queueClock)
        var form = MultipartFormData()
        form.append("Summer 2026", name: "album")
        let id = try await queue.add(form, with: URLRequest(url: URL(string: "http://127.0.0.1:9/upload")!))
        // The other process's run: its lock, taken through a store of its own.
        let lock = try QueueStore(queueDirectory).lock()
        defer { lock.release() }
        let remover = Task { await queue.remove(id) }
        // Under a sanitizer beside every suite, the remove took over 30 s to come to its sleep: every hop of a task
        // waits its turn on two threads there.
        try await Stopwatch.wait(atMost: CancelBound.sanitized ? 150 : 30, polling: 0.01) { clock.sleeps.isEmpty }
        #expect(!clock.sleeps.isEmpty, "the remove waits on the queue's clock")
        let sinceCancel = Stopwatch()
        remover.cancel()
        let removal = try await within(seconds: CancelBound.sanitized ? 150 : 30, "the cancelled remove") {
            await remover.value
        }
        if LongRuns.alone {
            #expect(sinceCancel.seconds < CancelBound.seconds(), "returned \(sinceCancel.seconds) s after its cancel")
        }
        #expect(removal == .asked)
        #expect(clock.now == Date(timeIntervalSince1970: 2_000_000_000), "the cancel ended the wait, not its time")
        #expect(try QueueStore(queueDirectory).read(id.rawValue).state.removing == true, "asked of the other run")
    }
}
