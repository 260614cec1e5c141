import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartStream

/// ``DiscoveryGate``, event by event: the first upload to a server nobody asked asks, those that come meanwhile wait
/// for its finding, an asker that ends without one lets each of them ask on its own, and a cancel ends a wait at once.
@Suite struct DiscoveryGateTests {
    private let draft = ResumableUpload.KnownServer(version: .v9, limits: ResumableUpload.Limits(maxAppendSize: 1_000))

    @Test func theFirstAsksAndTheOthersGoOnWithWhatItFound() async throws {
        let gate = DiscoveryGate()
        let (asker, second, third) = (gate.turn(), gate.turn(), gate.turn())
        #expect(await gate.finding(for: asker) == .ask)
        let waits = [second, third].map { turn in Task { await gate.finding(for: turn) } }
        try await waitFor("the others to wait", upTo: 10) { gate.waiting == 2 }
        gate.found(.speaks(draft))
        for wait in waits {
            #expect(try await within(seconds: 10, "a wait") { await wait.value } == .speaks(draft))
        }
        gate.leave(asker)
        // A later upload goes on with it at once; so does one after a finding of none.
        #expect(await gate.finding(for: gate.turn()) == .speaks(draft))
        gate.found(.speaksNone)
        #expect(await gate.finding(for: gate.turn()) == .speaksNone)
        #expect(gate.waiting == 0)
    }

    /// A finding of none holds for its time on the gate's clock, then the next upload asks again, in case the server
    /// took up the draft since (a process's gates, a day); a finding of the draft holds however long. A finding of
    /// none said again by an upload that went whole on it would keep it forever: only an asker says it.
    @Test func aFindingOfNoneHoldsItsTimeThenTheServerIsAskedAgain() async throws {
        let now = LockedValue<UInt64>(1_000)
        let day: UInt64 = 86_400 * 1_000_000_000
        let gate = DiscoveryGate(speaksNoneFor: 86_400, clock: { now.withLock { $0 } })
        let asker = gate.turn()
        #expect(await gate.finding(for: asker) == .ask)
        gate.found(.speaksNone)
        gate.leave(asker)
        now.withLock { $0 += day - 1 }
        #expect(gate.known == .speaksNone)
        #expect(await gate.finding(for: gate.turn()) == .speaksNone)
        now.withLock { $0 += 1 }
        #expect(gate.known == nil, "a day on, nothing is known")
        let again = gate.turn()
        #expect(await gate.finding(for: again) == .ask, "and the next upload asks")
        gate.found(.speaks(draft))
        gate.leave(again)
        now.withLock { $0 += 400 * day }
        #expect(gate.known == .speaks(draft))
        #expect(await gate.finding(for: gate.turn()) == .speaks(draft))
        // Without a time, as a queue keeps its gates, none holds as long as the gate.
        let kept = DiscoveryGate(speaksNoneFor: nil, clock: { now.withLock { $0 } })
        kept.found(.speaksNone)
        now.withLock { $0 = .max }
        #expect(kept.known == .speaksNone)
    }

    /// The process's gates are one an origin (scheme, host, port: not the path), made once; forgetting one origin's
    /// finding (a test server started where an earlier one listened) leaves every other origin's.
    @Test func theProcessKeepsAGateAnOriginAndForgetsOneAlone() throws {
        let port = Int.random(in: 20_000..<60_000)
        let first = try #require(URL(string: "http://127.0.0.1:\(port)/a?x=1"))
        let other = try #require(URL(string: "http://127.0.0.1:\(port + 1)/a"))
        let gate = try #require(DiscoveryGate.forProcess(of: first))
        #expect(DiscoveryGate.forProcess(of: URL(string: "http://127.0.0.1:\(port)/b")) === gate)
        #expect(DiscoveryGate.forProcess(of: URL(string: "https://127.0.0.1:\(port)/a")) !== gate)
        #expect(DiscoveryGate.forProcess(of: URL(string: "file:///tmp/a")) == nil)
        gate.found(.speaks(draft))
        try #require(DiscoveryGate.forProcess(of: other)).found(.speaksNone)
        DiscoveryGate.forgetProcessFindings(of: first)
        #expect(DiscoveryGate.forProcess(of: first)?.known == nil)
        #expect(DiscoveryGate.forProcess(of: other)?.known == .speaksNone)
        DiscoveryGate.forgetProcessFindings(of: other)
    }

    /// An asker that fails (a server out of reach) or is cancelled lets every waiting upload ask on its own: none
    /// waits out another's retries before its own. The next upload to come after them waits for them again.
    @Test func anAskerThatEndsWithoutAFindingLetsEveryWaitingUploadAsk() async throws {
        let gate = DiscoveryGate()
        let (asker, second, third) = (gate.turn(), gate.turn(), gate.turn())
        #expect(await gate.finding(for: asker) == .ask)
        let waits = [second, third].map { turn in Task { await gate.finding(for: turn) } }
        try await waitFor("the others to wait", upTo: 10) { gate.waiting == 2 }
        // A finding of "ask" is no finding.
        gate.found(.ask)
        #expect(gate.waiting == 2)
        // One that never asked leaves: nothing changes.
        let bystander = gate.turn()
        gate.leave(bystander)
        #expect(gate.waiting == 2)
        gate.leave(asker)
        for wait in waits { #expect(try await within(seconds: 10, "a released wait") { await wait.value } == .ask) }
        // The next to come asks, and the one after waits for it.
        let (fourth, fifth) = (gate.turn(), gate.turn())
        #expect(await gate.finding(for: fourth) == .ask)
        let fifthWait = Task { await gate.finding(for: fifth) }
        try await waitFor("the fifth to wait", upTo: 10) { gate.waiting == 1 }
        gate.found(.speaksNone)
        #expect(try await within(seconds: 10, "the fifth's wait") { await fifthWait.value } == .speaksNone)
        for turn in [second, third, fourth, fifth] { gate.leave(turn) }
    }

    @Test func aCancelEndsAWaitAtOnceAndLeavesTheOthersWaiting() async throws {
        let gate = DiscoveryGate()
        let (asker, second, third) = (gate.turn(), gate.turn(), gate.turn())
        #expect(await gate.finding(for: asker) == .ask)
        let secondWait = Task { await gate.finding(for: second) }
        let thirdWait = Task { await gate.finding(for: third) }
        try await waitFor("both to wait", upTo: 10) { gate.waiting == 2 }
        secondWait.cancel()
        #expect(try await within(seconds: 10, "the cancelled wait") { await secondWait.value } == .ask)
        #expect(gate.waiting == 1)
        gate.leave(second)
        #expect(gate.waiting == 1, "the cancelled upload was no asker")
        gate.found(.speaks(draft))
        #expect(try await within(seconds: 10, "the third's wait") { await thirdWait.value } == .speaks(draft))
    }

    @Test func aTurnCancelledBeforeItsWaitBeginsEndsAtOnce() async throws {
        let gate = DiscoveryGate()
        let asker = gate.turn()
        #expect(await gate.finding(for: asker) == .ask)
        let turn = gate.turn()
        let wait = Task {
            // Cancelled before it asks: its wait must not begin and hang.
            withUnsafeCurrentTask { $0?.cancel() }
            return await gate.finding(for: turn)
        }
        #expect(try await within(seconds: 10, "the wait cancelled first") { await wait.value } == .ask)
        #expect(gate.waiting == 0)
        gate.leave(turn)
        gate.leave(asker)
    }
}
