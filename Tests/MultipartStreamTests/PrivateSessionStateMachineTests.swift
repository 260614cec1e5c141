import Foundation
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// ``PrivateSession/StateMachine``: a private session's tasks and lifetime, transition by transition, without a
/// server.
@Suite struct PrivateSessionStateMachineTests {
    typealias Machine = PrivateSession.StateMachine

    /// An upload that hears nothing: the machine only stores and returns it.
    private final class Silent: UploadTaskEvents {
        func taskBegan() {}
        func bodyStream(for task: URLSessionTask) -> InputStream { InputStream(data: Data()) }
        func sentBody(totalBytesSent: Int64) {}
        func receivedResponse(_ response: URLResponse) {}
        func received(_ data: Data, task: URLSessionTask) {}
        func redirect(
            task: URLSessionTask, response: HTTPURLResponse, proposed: URLRequest, within seconds: TimeInterval,
            answer: @escaping @Sendable (URLRequest?) -> Void
        ) {}
        func challenge(
            _ challenge: URLAuthenticationChallenge, task: URLSessionTask, storage: URLCredentialStorage?,
            answer: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
        ) {}
        func collected(_ metrics: URLSessionTaskMetrics, task: URLSessionTask) {}
        #if canImport(Darwin)
            func waitingForConnectivity(task: URLSessionTask) {}
        #endif
        func taskCompleted(_ task: URLSessionTask, error: (any Error)?) {}
        func cancel(handedOut task: URLSessionTask) -> Bool { false }
    }

    private let second: UInt64 = 1_000_000_000
    private let upload = Silent()

    /// A shared session whose first task (1) was made and started at `now` 0.
    private func inUse(timeout: UInt64 = 30_000_000_000) -> Machine {
        var machine = Machine(singleUse: false, idleTimeout: timeout)
        #expect(machine.taskMade(1, of: upload, started: true, now: 0) == .none)
        return machine
    }

    private func isIdle(_ machine: Machine, since expected: UInt64) -> Bool {
        if case .idle(_, let since) = machine.state { return since == expected }
        return false
    }

    /// A caller's cancel of a task it was handed finds the task's upload while the task runs, and none once it ended
    /// (nor for an identifier the session never made), without starting or idling anything.
    @Test func aHandedOutTasksUploadIsFoundUntilItsEnd() {
        var machine = inUse()
        #expect(machine.uploadOf(task: 1) === upload)
        #expect(machine.uploadOf(task: 2) == nil)
        guard case .inUse = machine.state else {
            Issue.record("\(machine.state)")
            return
        }
        _ = machine.taskEnded(1, callerGone: false, now: 5)
        #expect(machine.uploadOf(task: 1) == nil)
    }

    @Test func theLastStartedTaskEndingMakesTheSessionIdleAndWatched() {
        var machine = inUse()
        #expect(machine.taskEnded(1, callerGone: false, now: 5) == .watch)
        #expect(isIdle(machine, since: 5))
    }

    @Test func aTaskMadeButNotStartedLeavesTheSessionIdle() {
        var machine = Machine(singleUse: false, idleTimeout: second)
        #expect(machine.taskMade(1, of: upload, started: false, now: 3) == .watch)
        #expect(isIdle(machine, since: 3))
        // Its first event (the caller resumed it) puts the session in use, and still finds its upload.
        let (found, began) = machine.taskEvent(1)
        #expect(found === upload && began)
        guard case .inUse = machine.state else {
            Issue.record("\(machine.state)")
            return
        }
        #expect(machine.taskEvent(1).began == false, "only the first event begins a task")
    }

    @Test func theWatchClosesAnIdleSessionOnlyOnceItsTimeoutIsUp() {
        var machine = inUse(timeout: second)
        #expect(machine.taskEnded(1, callerGone: false, now: 10) == .watch)
        #expect(machine.watchFired(now: 10 + second / 2, callerGone: false) == .watch)
        #expect(!machine.isClosed)
        #expect(machine.watchFired(now: 10 + second, callerGone: false) == .close)
        #expect(machine.isClosed)
        #expect(machine.watchFired(now: 20 + second, callerGone: false) == .none, "closed once")
        #expect(machine.reserve() == false, "a closed session takes no task")
    }

    @Test func theWatchClosesAnIdleSessionWhoseCallerIsGoneAtOnce() {
        var machine = inUse()
        #expect(machine.taskEnded(1, callerGone: false, now: 10) == .watch)
        #expect(machine.watchFired(now: 11, callerGone: true) == .close)
    }

    @Test func aWatchThatFindsTheSessionInUseStopsAndTheNextIdleSchedulesAnother() {
        var machine = inUse()
        #expect(machine.taskEnded(1, callerGone: false, now: 10) == .watch)
        #expect(machine.reserve() == true)
        // Idle again before the first watch came: that watch is still to come, so no second one.
        #expect(machine.taskMade(2, of: upload, started: true, now: 11) == .none)
        #expect(machine.taskEnded(2, callerGone: false, now: 12) == .none)
        #expect(isIdle(machine, since: 12))
        #expect(machine.reserve() == true)
        #expect(machine.watchFired(now: 13, callerGone: false) == .none, "in use: the watch stops")
        #expect(machine.taskMade(3, of: upload, started: true, now: 14) == .none)
        #expect(machine.taskEnded(3, callerGone: false, now: 15) == .watch, "no watch left: a new one")
    }

    @Test func aSessionInUseWaitsForItsLastTaskWhenItsCallerGoes() {
        var machine = inUse()
        #expect(machine.reserve() == true)
        #expect(machine.taskMade(2, of: upload, started: true, now: 1) == .none)
        #expect(machine.callerGone() == .none, "tasks still run")
        #expect(machine.taskEnded(1, callerGone: true, now: 2) == .none)
        #expect(machine.taskEnded(2, callerGone: true, now: 3) == .close)
        #expect(machine.isClosed)
    }

    @Test func anIdleSessionClosesAtOnceWhenItsCallerGoes() {
        var machine = inUse()
        #expect(machine.taskEnded(1, callerGone: false, now: 1) == .watch)
        #expect(machine.callerGone() == .close)
        #expect(machine.callerGone() == .none, "closed once")
    }

    @Test func aTaskBeingMadeKeepsTheSessionFromClosing() {
        var machine = inUse(timeout: 0)
        #expect(machine.reserve() == true)
        #expect(machine.taskEnded(1, callerGone: false, now: 1) == .none, "a task is being made")
        #expect(machine.watchFired(now: 2, callerGone: false) == .none)
        #expect(machine.callerGone() == .none)
        #expect(!machine.isClosed)
    }

    @Test func aClosedSessionStillRoutesTheEventsOfATaskResumedLate() {
        var machine = Machine(singleUse: false, idleTimeout: 0)
        #expect(machine.taskMade(7, of: upload, started: false, now: 0) == .watch)
        #expect(machine.watchFired(now: 1, callerGone: false) == .close)
        let (found, began) = machine.taskEvent(7)
        #expect(found === upload && began)
        #expect(machine.taskEnded(7, callerGone: false, now: 2) == .none, "closed once")
        #expect(machine.taskEvent(7).upload == nil, "forgotten once ended")
    }

    @Test func aSingleUseSessionClosesWhenItsTaskEndsAndIsNeverIdle() {
        var machine = Machine(singleUse: true, idleTimeout: 0)
        #expect(machine.taskMade(1, of: upload, started: true, now: 0) == .none)
        #expect(machine.watchFired(now: 5, callerGone: true) == .none)
        #expect(machine.taskEnded(1, callerGone: false, now: 6) == .close)
        #expect(machine.isClosed)
    }

    @Test func aShorterTimeoutAppliesToASessionAlreadyIdle() {
        var machine = inUse()
        #expect(machine.taskEnded(1, callerGone: false, now: 0) == .watch)
        #expect(machine.watchFired(now: second, callerGone: false) == .watch)
        machine.idleTimeout = second / 5
        #expect(machine.watchFired(now: second + 1, callerGone: false) == .close)
    }
}
