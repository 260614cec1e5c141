import Foundation
import Testing

@testable import MultipartQueue

/// What each of a run's decisions writes of a record (``QueueRecord/Change``), decision by decision, from a state that
/// holds something in every field: only the fields the decision is about change.
@Suite struct QueueRecordChangeTests {
    private let now = Date(timeIntervalSince1970: 1_700_000_000)
    private let answer = QueueRecord.Answer(statusCode: 201, headers: ["Location": "/u/1"], body: Data("ok".utf8))

    /// A state with every field set: a run of another process, a pause, a move, an earlier failure.
    private var busy: QueueRecord.State {
        QueueRecord.State(
            paused: true, runner: 1, removing: nil, priority: 4, outcome: .failed(.init(reason: "earlier")), starts: 2,
            sentAgain: 1, sentWhole: Date(timeIntervalSince1970: 1), generation: 3)
    }

    private func applied(_ change: QueueRecord.Change, to state: QueueRecord.State) -> QueueRecord.State {
        var state = state
        change.apply(to: &state)
        return state
    }

    @Test func aStartCountsItselfAndNamesThisProcess() {
        var expected = QueueRecord.State(runner: getpid(), starts: 1)
        #expect(applied(.started(whole: false, at: now), to: QueueRecord.State()) == expected)
        // To a server that speaks no draft, the form goes whole: said, and counted only where a run before started it.
        expected.sentWhole = now
        #expect(applied(.started(whole: true, at: now), to: QueueRecord.State()) == expected)
        var again = busy
        (again.starts, again.runner, again.sentWhole, again.sentAgain) = (3, getpid(), now, 2)
        #expect(applied(.started(whole: true, at: now), to: busy) == again)
    }

    @Test func aStartIsDeclinedForAnUploadAnotherProcessPausedOrIsRemoving() {
        let start = QueueRecord.Change.started(whole: false, at: now)
        #expect(start.declines(QueueRecord.State(paused: true)))
        #expect(start.declines(QueueRecord.State(removing: true)))
        #expect(!start.declines(QueueRecord.State()))
        let others: [QueueRecord.Change] = [
            .completed(answer), .failed(.init(reason: "x")), .paused, .stopped, .sending(again: true, wholeAt: now),
        ]
        for change in others {
            #expect(!change.declines(QueueRecord.State(paused: true, removing: true)), "\(change)")
        }
    }

    @Test func anEndWritesItsOutcomeAndLetsGoOfTheUpload() {
        var completed = busy
        (completed.outcome, completed.runner, completed.paused) = (.completed(answer), nil, nil)
        #expect(applied(.completed(answer), to: busy) == completed, "a pause that came as it completed goes")
        var failed = busy
        (failed.outcome, failed.runner, failed.paused) = (.failed(.init(reason: "the server answered 400")), nil, nil)
        #expect(applied(.failed(.init(reason: "the server answered 400")), to: busy) == failed)
        let paused = QueueRecord.State(runner: 9, starts: 1)
        #expect(applied(.paused, to: paused) == QueueRecord.State(paused: true, starts: 1))
        var stopped = busy
        stopped.runner = nil
        #expect(applied(.stopped, to: busy) == stopped, "only the runner: the pause and the rest stay")
    }

    @Test func aSendSaysItGoesAgainOrWholeBeforeItGoes() {
        var state = busy
        (state.sentAgain, state.sentWhole) = (2, now)
        #expect(applied(.sending(again: true, wholeAt: now), to: busy) == state)
        state = busy
        state.sentAgain = 2
        #expect(applied(.sending(again: true, wholeAt: nil), to: busy) == state, "its last whole send stays")
        #expect(applied(.sending(again: false, wholeAt: nil), to: busy) == busy)
    }

    @Test func theEndsACallerReliesOnAreSynced() {
        #expect(QueueRecord.Change.failed(.init(reason: "x")).isSynced && QueueRecord.Change.paused.isSynced)
        #expect(!QueueRecord.Change.started(whole: true, at: now).isSynced)
        #expect(!QueueRecord.Change.completed(answer).isSynced && !QueueRecord.Change.stopped.isSynced)
        #expect(!QueueRecord.Change.sending(again: true, wholeAt: now).isSynced)
    }
}
