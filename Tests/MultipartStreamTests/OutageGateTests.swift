import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartStream

/// ``OutageGate``, event by event: the first upload to fail probes, the others wait for it until an answer, the
/// probe passes on when its prober ends, and a cancel or an upload's own bound ends a wait.
@Suite struct OutageGateTests {
    /// Counts the ends of outages the gate reports.
    private final class Ends: Sendable {
        let count = LockedValue(0)
    }

    @Test func theFirstToFailProbesAndTheOthersWaitForItsAnswer() async throws {
        let ends = Ends()
        let gate = OutageGate { ends.count.withLock { $0 += 1 } }
        let (prober, other) = (gate.pass(), gate.pass())
        #expect(!gate.isOut)
        try await within(seconds: 10, "the prober's wait") { await prober.wait(seconds: 0.01, atMost: nil) }
        #expect(gate.isOut)
        let waiting = Task { await other.wait(seconds: 0.01, atMost: nil) }
        try await waitFor("the other upload to wait", upTo: 10) { gate.parked == 1 }
        // The prober fails again: it stays the prober, and waits its own time.
        try await within(seconds: 10, "the prober's second wait") { await prober.wait(seconds: 0.01, atMost: nil) }
        #expect(gate.parked == 1)
        prober.answered()
        try await within(seconds: 10, "the other upload, released") { await waiting.value }
        #expect(!gate.isOut && gate.parked == 0)
        #expect(ends.count.withLock { $0 } == 1, "one outage ended")
        prober.answered()
        #expect(ends.count.withLock { $0 } == 1, "an answer out of an outage ends none")
    }

    @Test func aProberThatEndsPassesTheProbeToTheFirstWaiting() async throws {
        let gate = OutageGate()
        let (prober, second, third) = (gate.pass(), gate.pass(), gate.pass())
        await prober.wait(seconds: 0, atMost: nil)
        let secondWait = Task { await second.wait(seconds: 0, atMost: nil) }
        try await waitFor("the second to wait", upTo: 10) { gate.parked == 1 }
        let thirdWait = Task { await third.wait(seconds: 0, atMost: nil) }
        try await waitFor("the third to wait", upTo: 10) { gate.parked == 2 }
        second.leave()
        #expect(gate.parked == 2, "one that does not probe passes nothing on")
        prober.leave()
        try await within(seconds: 10, "the second, given the probe") { await secondWait.value }
        #expect(gate.parked == 1, "the third still waits")
        // The second fails in turn: it probes now, and waits its own time, not the third's.
        try await within(seconds: 10, "the new prober's wait") { await second.wait(seconds: 0, atMost: nil) }
        #expect(gate.parked == 1 && gate.isOut)
        second.answered()
        try await within(seconds: 10, "the third, released") { await thirdWait.value }
    }

    @Test func aCancelOrTheUploadsOwnBoundEndsAWait() async throws {
        let gate = OutageGate()
        let (prober, cancelled, bounded) = (gate.pass(), gate.pass(), gate.pass())
        await prober.wait(seconds: 0, atMost: nil)
        let cancelledWait = Task { await cancelled.wait(seconds: 0, atMost: nil) }
        try await waitFor("the upload to wait", upTo: 10) { gate.parked == 1 }
        cancelledWait.cancel()
        try await within(seconds: 10, "the cancelled wait") { await cancelledWait.value }
        #expect(gate.parked == 0)
        let started = Date()
        try await within(seconds: 10, "the bounded wait") { await bounded.wait(seconds: 0, atMost: 0.2) }
        #expect(Date().timeIntervalSince(started) >= 0.2, "it waited for the prober until its bound")
        #expect(gate.isOut, "neither ended the outage")
    }

    @Test func aWaitCancelledBeforeItBeginsDoesNotWait() async throws {
        let gate = OutageGate()
        let (prober, other) = (gate.pass(), gate.pass())
        await prober.wait(seconds: 0, atMost: nil)
        let wait = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            await other.wait(seconds: 0, atMost: nil)
        }
        try await within(seconds: 10, "the wait") { await wait.value }
        #expect(gate.parked == 0)
    }
}
