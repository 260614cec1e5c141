import Foundation
import Testing

@testable import MultipartQueue
@testable import MultipartStream

/// The schedule's events, each in every state it can meet, and the actions each returns for the queue's actor to
/// carry out, as AsyncHTTPClient tests its state machines: no I/O, every moment a date the test gives.
@Suite struct QueueScheduleEventTests {
    typealias ID = MultipartUploadQueue.ID
    typealias Action = QueueSchedule.Action

    let start = Date(timeIntervalSince1970: 1_000_000)
    let server = Origin(URL(string: "https://upload.example/")!)!
    let answer = MultipartUploadQueue.Answer(statusCode: 201, headers: ["Location": "/u/1"], body: Data("ok".utf8))
    let failure = MultipartUploadQueue.Failure(reason: "the server answered 413", category: .status)

    private func at(_ seconds: Double) -> Date { start.addingTimeInterval(seconds) }
    private func id(_ index: Int) -> ID { ID(rawValue: "u\(index)") }

    private func upload(_ index: Int, state: QueueSchedule.State = .pending, length: UInt64 = 10)
        -> QueueSchedule.Upload
    {
        QueueSchedule.Upload(
            id: id(index), sequence: index, key: "k\(index)", origin: server, state: state, contentLength: length)
    }

    /// Where an upload can stand when an event meets it.
    enum Standing: CaseIterable {
        case pending, running, pausing, removing, waitingInFlight, waiting, paused, completed, failed
    }

    /// A schedule of one upload, `u0`, standing as `standing` says, with the actions that brought it there made.
    private func schedule(_ standing: Standing) -> QueueSchedule {
        var schedule = QueueSchedule(limit: 3, probeInterval: 15)
        let state: QueueSchedule.State =
            switch standing {
            case .paused: .paused
            case .completed: .completed
            case .failed: .failed(reason: "gone")
            default: .pending
            }
        _ = schedule.added([upload(0, state: state)])
        switch standing {
        case .pending, .paused, .completed, .failed: break
        case .running: _ = schedule.next(at: at(0), out: [])
        case .pausing:
            _ = schedule.next(at: at(0), out: [])
            _ = schedule.take(.pause, id(0))
        case .removing:
            _ = schedule.next(at: at(0), out: [])
            _ = schedule.removeAsked(id(0))
        case .waitingInFlight:
            _ = schedule.next(at: at(0), out: [])
            _ = schedule.waits(id(0), until: at(5), turn: 1)
        case .waiting:
            _ = schedule.next(at: at(0), out: [])
            _ = schedule.finished(id(0), .waiting(outage: false), speaksNone: false, at: at(0))
        }
        return schedule
    }

    @Test func anAddJoinsAndIsToldOnce() {
        var schedule = QueueSchedule(limit: 3, probeInterval: 15)
        #expect(
            schedule.added([upload(0), upload(1, state: .completed, length: 7)])
                == [.emit(.added(id(0))), .emit(.added(id(1))), .wake(by: nil)])
        #expect(schedule.added([upload(0)]) == [], "an upload the schedule holds is not added again")
        #expect(schedule.counts == .init(total: 17, ended: 7, inFlight: 0), "a completed one counts as done")
        #expect(schedule.nextSequence == 2)
    }

    /// What the caller's pause, resume and move write first, and what each does once written, in every standing.
    @Test func eachMoveInEveryStanding() {
        let pauses: [Standing: (QueueRecord.Change?, [Action])] = [
            .pending: (.pauseAsked, [.emit(.paused(id(0)))]),
            .running: (.pauseAsked, [.cancel(id(0)), .emit(.paused(id(0)))]),
            .waitingInFlight: (.pauseAsked, [.cancel(id(0)), .emit(.paused(id(0)))]),
            .waiting: (.pauseAsked, [.emit(.paused(id(0)))]),
            // Asked already, or a removal under way, which its remover waits for; or nothing left to pause.
            .pausing: (nil, []), .removing: (nil, []), .paused: (nil, []), .completed: (nil, []), .failed: (nil, []),
        ]
        let resumes: [Standing: (QueueRecord.Change?, [Action])] = [
            .paused: (.resumeAsked, [.wake(by: nil), .emit(.resumed(id(0)))]),
            // A pause that has not stopped the send is taken back: the send goes on.
            .pausing: (.resumeAsked, [.emit(.resumed(id(0)))]),
        ]
        for standing in Standing.allCases {
            var paused = schedule(standing)
            #expect(paused.change(for: .pause, of: id(0)) == pauses[standing]?.0, "\(standing)")
            #expect(paused.take(.pause, id(0)) == pauses[standing]?.1, "pause, \(standing)")
            var resumed = schedule(standing)
            #expect(resumed.change(for: .resume, of: id(0)) == resumes[standing]?.0, "\(standing)")
            #expect(resumed.take(.resume, id(0)) == resumes[standing]?.1 ?? [], "resume, \(standing)")
            var moved = schedule(standing)
            #expect(moved.change(for: .prioritize, of: id(0)) == .moved(priority: 1), "\(standing)")
            #expect(moved.take(.prioritize, id(0)) == [.emit(.prioritized(id(0))), .wake(by: nil)])
            #expect(moved.uploads[id(0)]?.rank.priority == 1)
        }
        var none = QueueSchedule(limit: 1, probeInterval: 15)
        for move in [QueueSchedule.Move.pause, .resume, .prioritize] {
            #expect(none.change(for: move, of: id(9)) == nil && none.take(move, id(9)) == [], "\(move) of none")
        }
    }

    @Test func aRetryGoesAgainOnlyFromAFailureAndCountsAChangedLength() {
        for standing in Standing.allCases where standing != .failed {
            var schedule = schedule(standing)
            #expect(schedule.retried(id(0)) == [], "\(standing)")
        }
        var schedule = QueueSchedule(limit: 1, probeInterval: 15)
        _ = schedule.added([upload(0, length: 100)])
        _ = schedule.next(at: at(0), out: [])
        _ = schedule.sent(80, by: id(0))
        _ = schedule.finished(id(0), .failed(failure), speaksNone: false, at: at(1))
        #expect(schedule.counts == .init(total: 100, ended: 0, inFlight: 80))
        #expect(schedule.retried(id(0), contentLength: 50) == [.emit(.retried(id(0))), .wake(by: nil)])
        #expect(
            schedule.counts == .init(total: 50, ended: 0, inFlight: 49), "what it handed out, short of its last byte")
        #expect(schedule.uploads[id(0)]?.state == .pending)
    }

    /// The caller's remove: one in flight is stopped, and its end forgets it; one that is not leaves now, its
    /// server's upload deleted unless it completed.
    @Test func aRemoveInEveryStanding() {
        for standing in Standing.allCases {
            var schedule = schedule(standing)
            let before = schedule.uploads[id(0)]!
            switch standing {
            case .running, .pausing, .removing, .waitingInFlight:
                #expect(schedule.removeAsked(id(0)) == [.cancel(id(0))], "\(standing)")
                #expect(schedule.uploads[id(0)]?.stopping == .remove, "a removal asked stays one")
            case .pending, .waiting, .paused, .completed, .failed:
                #expect(schedule.removeAsked(id(0)) == nil, "\(standing)")
                #expect(
                    schedule.removeNow(id(0))
                        == [.forget(before, givingUp: standing != .completed), .emit(.removed(id(0)))], "\(standing)")
                #expect(schedule.uploads[id(0)] == nil && schedule.id(forKey: "k0") == nil)
                #expect(schedule.counts.ended == 10, "gone, it counts as done")
                #expect(schedule.removeNow(id(0)) == [], "once")
            }
        }
        var gone = schedule(.pending)
        #expect(gone.removeNow(id(0), recordGone: true) == [.emit(.removed(id(0)))], "removed by another process")
    }

    @Test func clearingTakesTheCompletedOnesAloneInOneAction() {
        var schedule = QueueSchedule(limit: 3, probeInterval: 15)
        _ = schedule.added([upload(0, state: .completed), upload(1), upload(2, state: .completed)])
        #expect(
            schedule.clearCompleted() == [.clear([id(0), id(2)]), .emit(.removed(id(0))), .emit(.removed(id(2)))])
        #expect(schedule.uploads.values.map(\.id) == [id(1)])
        #expect(schedule.clearCompleted() == [])
        #expect(schedule.counts == .init(total: 30, ended: 20, inFlight: 0), "counted once, as they completed")
    }

    /// Each way a send ends, with no move of the caller's, with a pause, and with a remove under way.
    @Test func everyVerdictInEveryStandingInFlight() {
        let verdicts: [QueueSchedule.Verdict] = [
            .completed(answer), .failed(failure), .waiting(outage: true), .waiting(outage: false), .stopped,
        ]
        for verdict in verdicts {
            var running = schedule(.running)
            let expected: [Action] =
                switch verdict {
                case .completed(let answer): [.serverAnswered(server), .complete(id(0), answer)]
                case .failed(let failure): [.write(id(0), .failed(failure)), .emit(.failed(id(0), failure))]
                case .waiting(let outage):
                    [
                        outage ? .serverOut(server) : .serverAnswered(server), .write(id(0), .stopped),
                        .emit(.waiting(id(0), until: at(16))),
                    ]
                case .stopped: [.write(id(0), .stopped)]
                }
            #expect(running.finished(id(0), verdict, speaksNone: false, at: at(1)) == expected, "\(verdict)")
            #expect(running.finished(id(0), verdict, speaksNone: false, at: at(1)) == [], "one end a send")

            var pausing = schedule(.pausing)
            let paused: [Action] =
                switch verdict {
                case .waiting, .stopped: [.write(id(0), .paused)]
                default: expected
                }
            #expect(pausing.finished(id(0), verdict, speaksNone: false, at: at(1)) == paused, "pausing, \(verdict)")

            var removing = schedule(.removing)
            let before = removing.uploads[id(0)]!
            var completed: MultipartUploadQueue.Answer?
            if case .completed(let answer) = verdict { completed = answer }
            #expect(
                removing.finished(id(0), verdict, speaksNone: true, at: at(1)) == [
                    .speaksNone(server), .forget(before, givingUp: completed == nil), .emit(.removed(id(0))),
                    .answerRemovers(id(0), completed.map(MultipartUploadQueue.Removal.completed) ?? .removed),
                ], "removing, \(verdict)")
        }
        for standing in [Standing.pending, .waiting, .paused, .completed, .failed] {
            var schedule = schedule(standing)
            #expect(schedule.finished(id(0), .stopped, speaksNone: false, at: at(1)) == [], "\(standing)")
        }
    }

    /// A start its record declined: another process paused the upload, asked for its removal, or removed it.
    @Test func aDeclinedStartIsPausedRemovedOrGoneAndTold() {
        var paused = schedule(.running)
        #expect(paused.declined(id(0), because: .paused, at: at(1)) == [.emit(.paused(id(0)))])
        #expect(paused.uploads[id(0)]?.state == .paused && paused.inFlight.isEmpty)

        var asked = schedule(.running)
        let before = asked.uploads[id(0)]!
        var after = before
        (after.state, after.isInFlight) = (.paused, false)
        #expect(
            asked.declined(id(0), because: .removalAsked, at: at(1))
                == [.forget(after, givingUp: true), .emit(.removed(id(0)))])
        #expect(asked.uploads[id(0)] == nil && before.state == .running)

        var gone = schedule(.running)
        _ = gone.sent(6, by: id(0))
        #expect(gone.declined(id(0), because: .gone, at: at(1)) == [.emit(.removed(id(0)))])
        #expect(gone.uploads[id(0)] == nil && gone.inFlight.isEmpty)
        #expect(gone.counts == .init(total: 10, ended: 10, inFlight: 0), "gone, it counts as done")

        var idle = schedule(.pending)
        #expect(idle.declined(id(0), because: .gone, at: at(1)) == [], "no start to decline")
    }

    @Test func aSendsProgressCountsUpToItsLastByteAndIsTold() {
        var schedule = schedule(.running)
        #expect(schedule.sent(4, by: id(0)) == [.emit(.progress(id(0), bytesSent: 4, of: 10))])
        #expect(schedule.sent(2, by: id(0)) == [.emit(.progress(id(0), bytesSent: 2, of: 10))], "a resend is told")
        #expect(schedule.counts.inFlight == 4, "and counts no byte twice")
        _ = schedule.sent(10, by: id(0))
        #expect(schedule.counts.inFlight == 9, "the last byte waits for the answer")
        _ = schedule.finished(id(0), .completed(answer), speaksNone: false, at: at(1))
        #expect(schedule.counts == .init(total: 10, ended: 10, inFlight: 0))
        #expect(schedule.sent(10, by: id(0)) == [], "nothing of a send that ended")
    }

    @Test func aSendsWaitIsToldAndWakesTheRunBeforeItsTime() {
        var schedule = schedule(.running)
        #expect(
            schedule.waits(id(0), until: at(5), turn: 1)
                == [.emit(.waiting(id(0), until: at(5))), .wake(by: at(5 + QueueSchedule.parkedAfter))])
        #expect(schedule.waits(id(0), until: at(9), turn: 1) == [], "a report older than the last is dropped")
        #expect(schedule.waits(id(0), until: nil, turn: 2) == [], "trying again is no wait")
        #expect(schedule.uploads[id(0)]?.state == .running)
    }

    /// A wait whose time came goes, told nothing; one whose server is out while another upload probes it waits on,
    /// and is told; the server's return wakes the run.
    @Test func aDueWaitIsToldAndAServerBackWakesTheRun() {
        var goes = schedule(.waiting)
        #expect(goes.dueWaits(at: at(20), out: []) == [])
        #expect(goes.uploads[id(0)]?.state == .pending)

        var waitsOn = schedule(.waiting)
        _ = waitsOn.added([upload(1)])
        #expect(waitsOn.next(at: at(1), out: [])?.id == id(1))
        #expect(waitsOn.dueWaits(at: at(20), out: [server]) == [.emit(.waiting(id(0), until: at(35)))])
        #expect(waitsOn.back(server) == [.wake(by: nil)])
        #expect(waitsOn.uploads[id(0)]?.state == .pending)
    }

    /// What another process wrote, in every standing here: what its calls here would have done.
    @Test func whatAnotherProcessWroteInEveryStanding() {
        func summary(_ standing: UploadStanding, priority: Int? = nil, length: UInt64 = 10) -> QueueRecord.Summary {
            QueueRecord.Summary(
                id: "u0", sequence: 0, key: "k0", priority: priority, contentLength: length, url: server.serialized,
                standing: standing)
        }
        var new = QueueSchedule(limit: 1, probeInterval: 15)
        #expect(new.seen(summary(.pending), origin: server) == [.emit(.added(id(0))), .wake(by: nil)])
        #expect(new.seen(summary(.pending), origin: server) == [], "its own write, seen again")

        for standing in Standing.allCases {
            var paused = schedule(standing)
            let pause = paused.changeless(.pause)
            #expect(paused.seen(summary(.paused), origin: server) == pause, "\(standing)")
            var moved = schedule(standing)
            #expect(
                moved.seen(summary(moved.uploads[id(0)]!.state.standing, priority: 5), origin: server)
                    == [.emit(.prioritized(id(0))), .wake(by: nil)], "\(standing)")
            var removing = schedule(standing)
            let before = removing.uploads[id(0)]!
            let removed = removing.seen(summary(.removing), origin: server)
            if before.isInFlight {
                #expect(removed == [.cancel(id(0))], "\(standing)")
            } else {
                #expect(
                    removed == [.forget(before, givingUp: standing != .completed), .emit(.removed(id(0)))],
                    "\(standing)")
            }
            var gone = schedule(standing)
            #expect(gone.seenRemoved(id(0)) == (before.isInFlight ? [.cancel(id(0))] : [.emit(.removed(id(0)))]))
        }
        var resumed = schedule(.paused)
        #expect(resumed.seen(summary(.pending), origin: server) == [.wake(by: nil), .emit(.resumed(id(0)))])
        var retried = schedule(.failed)
        #expect(
            retried.seen(summary(.pending, length: 12), origin: server) == [.emit(.retried(id(0))), .wake(by: nil)])
        #expect(retried.counts.total == 12)
        var ownWrite = schedule(.pausing)
        #expect(ownWrite.seen(summary(.pending), origin: server) == [], "in flight, its send's end decides")
    }
}

extension QueueSchedule {
    /// What the caller's `move` of `u0` would return here, without changing this schedule.
    fileprivate func changeless(_ move: Move) -> [Action] {
        var copy = self
        return copy.take(move, ID(rawValue: "u0"))
    }
}

extension QueueSchedule.State {
    /// The standing a row of an upload in this state says.
    fileprivate var standing: UploadStanding {
        switch self {
        case .paused: .paused
        case .completed: .completed
        case .failed(let reason): .failed(reason: reason)
        case .pending, .running, .waiting: .pending
        }
    }
}
