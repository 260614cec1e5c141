import Foundation
import Testing

@testable import MultipartQueue
@testable import MultipartStream

/// The queue's schedule, transition by transition, in virtual time: every moment is a date the test gives.
@Suite struct QueueScheduleTests {
    typealias ID = MultipartUploadQueue.ID

    let start = Date(timeIntervalSince1970: 1_000_000)
    let server = Origin(URL(string: "https://upload.example/")!)!
    let other = Origin(URL(string: "https://other.example/")!)!
    static let answer = MultipartUploadQueue.Answer(statusCode: 201)

    /// At `seconds` past the start.
    private func at(_ seconds: Double) -> Date { start.addingTimeInterval(seconds) }

    private func schedule(limit: Int = 3, _ count: Int, to origin: Origin? = nil) -> QueueSchedule {
        var schedule = QueueSchedule(limit: limit, probeInterval: 15)
        for index in 0..<count { schedule.add(upload(index, to: origin ?? server)) }
        return schedule
    }

    private func upload(
        _ index: Int, to origin: Origin?, state: QueueSchedule.State = .pending, key: String? = nil
    ) -> QueueSchedule.Upload {
        QueueSchedule.Upload(
            id: ID(rawValue: "u\(index)"), sequence: index, key: key, origin: origin, state: state, contentLength: 10)
    }

    private func id(_ index: Int) -> ID { ID(rawValue: "u\(index)") }

    /// Starts what may start at `time`: the IDs in order.
    private func starts(_ schedule: inout QueueSchedule, at time: Date, out: Set<Origin> = []) -> [ID] {
        var started: [ID] = []
        while let next = schedule.next(at: time, out: out) { started.append(next.id) }
        return started
    }

    @Test func uploadsStartInTheOrderAddedUpToTheLimit() {
        var schedule = schedule(limit: 2, 4)
        #expect(starts(&schedule, at: at(0)) == [id(0), id(1)])
        #expect(schedule.uploads[id(0)]?.state == .running && schedule.inFlight == [id(0), id(1)])
        let result1 = schedule.end(id(1), .completed(Self.answer), speaksNone: false, at: at(1))
        #expect(result1 == .completed)
        #expect(starts(&schedule, at: at(1)) == [id(2)])
        let result2 = schedule.end(id(0), .failed(.init(reason: "no")), speaksNone: false, at: at(2))
        #expect(result2 == .failed(reason: "no"))
        #expect(starts(&schedule, at: at(2)) == [id(3)])
        let result3 = schedule.end(id(3), .completed(Self.answer), speaksNone: false, at: at(3))
        #expect(result3 == .completed)
        let result4 = schedule.end(id(3), .completed(Self.answer), speaksNone: false, at: at(3))
        #expect(result4 == nil, "an upload not in flight")
        #expect(schedule.ordered.map(\.state) == [.failed(reason: "no"), .completed, .running, .completed])
    }

    @Test func aMovedUploadGoesFirstTheLatestMoveFirst() {
        var schedule = schedule(limit: 1, 4)
        schedule.prioritize(id(2))
        schedule.prioritize(id(3))
        #expect(schedule.ordered.map(\.id) == [id(3), id(2), id(0), id(1)])
        #expect(starts(&schedule, at: at(0)) == [id(3)])
        _ = schedule.end(id(3), .completed(Self.answer), speaksNone: false, at: at(1))
        #expect(starts(&schedule, at: at(1)) == [id(2)])
        _ = schedule.end(id(2), .completed(Self.answer), speaksNone: false, at: at(2))
        #expect(starts(&schedule, at: at(2)) == [id(0)])
        #expect(schedule.frontPriority == 3)
    }

    @Test func aPausedUploadIsSkippedUntilResumedInItsPlace() {
        var schedule = schedule(limit: 1, 3)
        let result5 = schedule.pause(id(0))
        #expect(!result5, "not in flight: nothing to stop")
        #expect(schedule.uploads[id(0)]?.state == .paused && schedule.isPaused(id(0)))
        #expect(starts(&schedule, at: at(0)) == [id(1)])
        let result6 = schedule.resume(id(0))
        #expect(result6)
        _ = schedule.end(id(1), .completed(Self.answer), speaksNone: false, at: at(1))
        #expect(starts(&schedule, at: at(1)) == [id(0)], "back in its place, before u2")
        // Paused while it runs: its send stops, and it is paused when it ends, unless it ended otherwise.
        let result7 = schedule.pause(id(0))
        #expect(result7)
        let result8 = schedule.end(id(0), .stopped, speaksNone: false, at: at(2))
        #expect(result8 == .paused)
        #expect(starts(&schedule, at: at(2)) == [id(2)])
        let result9 = schedule.pause(id(2))
        #expect(result9)
        let result10 = schedule.end(id(2), .completed(Self.answer), speaksNone: false, at: at(3))
        #expect(result10 == .completed, "it ended first")
        // A pause taken back before the send stopped leaves it running.
        let result11 = schedule.resume(id(0))
        #expect(result11)
        #expect(starts(&schedule, at: at(3)) == [id(0)])
        let result12 = schedule.pause(id(0))
        let result13 = schedule.resume(id(0))
        #expect(result12 && !result13)
        let result14 = schedule.end(id(0), .stopped, speaksNone: false, at: at(4))
        #expect(result14 == .pending)
        let result15 = schedule.pause(id(2))
        #expect(!result15, "a completed upload has nothing to pause")
    }

    @Test func keysAndRemovals() {
        var schedule = QueueSchedule(limit: 3, probeInterval: 15)
        schedule.add(upload(0, to: server, key: "a"))
        schedule.add(upload(1, to: server, key: "a"))
        #expect(schedule.id(forKey: "a") == id(0), "the first answers for a key")
        #expect(starts(&schedule, at: at(0)) == [id(0), id(1)])
        let result16 = schedule.remove(id(0))
        #expect(result16 == nil, "one in flight is stopped first")
        let result17 = schedule.stop(id(0), for: .remove)
        #expect(result17)
        let result18 = schedule.end(id(0), .completed(Self.answer), speaksNone: false, at: at(1))
        #expect(result18 == .forget)
        #expect(schedule.uploads[id(0)] == nil && schedule.id(forKey: "a") == nil)
        _ = schedule.end(id(1), .completed(Self.answer), speaksNone: false, at: at(1))
        schedule.add(upload(2, to: server, state: .completed))
        let result19 = schedule.removeCompleted()
        #expect(Set(result19.map(\.id)) == [id(1), id(2)] && schedule.uploads.isEmpty)
    }

    @Test func aRetriedUploadGoesAgainAndAStoppedRunLeavesItsUploadsPending() {
        var schedule = schedule(limit: 2, 3)
        _ = starts(&schedule, at: at(0))
        _ = schedule.end(id(0), .failed(.init(reason: "gone")), speaksNone: false, at: at(1))
        let result20 = schedule.pause(id(1))
        #expect(result20)
        schedule.retry(id(0))
        schedule.runEnded()
        #expect(schedule.inFlight.isEmpty && schedule.uploads[id(1)]?.state == .paused)
        #expect(starts(&schedule, at: at(2)) == [id(0), id(2)])
    }

    /// A busy server's answer: the upload waits alone, a probe's wait, then goes again.
    @Test func aBusyAnswerWaitsAloneAndGoesWhenItsTimeComes() {
        var schedule = schedule(limit: 1, 2)
        _ = starts(&schedule, at: at(0))
        #expect(
            schedule.end(id(0), .waiting(outage: false), speaksNone: false, at: at(0)) == .waiting(until: at(15)))
        #expect(starts(&schedule, at: at(1)) == [id(1)], "the server is not out: the next goes")
        _ = schedule.end(id(1), .completed(Self.answer), speaksNone: false, at: at(2))
        #expect(starts(&schedule, at: at(2)).isEmpty)
        let result21 = schedule.nextWake(after: at(2))
        #expect(result21 == at(15))
        #expect(
            schedule.due(at: at(14.9), out: []).isEmpty && schedule.uploads[id(0)]?.state == .waiting(until: at(15)))
        let result22 = schedule.due(at: at(15), out: [])
        #expect(result22.isEmpty && schedule.uploads[id(0)]?.state == .pending)
        #expect(starts(&schedule, at: at(15)) == [id(0)])
        let result23 = schedule.nextWake(after: at(15))
        #expect(result23 == nil)
    }

    /// An outage under 3 uploads with 2 more behind: one probe at a time, every wait said with a time that is never
    /// past, and all go once the server is back.
    @Test func anOutageIsProbedByOneUploadAndNoWaitIsEverStale() {
        var schedule = schedule(limit: 3, 5)
        let out: Set<Origin> = [server]
        #expect(starts(&schedule, at: at(0)) == [id(0), id(1), id(2)])
        // Their own retries: each says when it tries again; two park at the gate behind the first.
        for (index, seconds) in [(0, 4.0), (1, 2.0), (2, 3.0)] {
            let result24 = schedule.inFlight(id(index), waitsUntil: at(seconds), turn: 1)
            #expect(result24 == .waiting(until: at(seconds)))
        }
        let result25 = schedule.inFlight(id(1), waitsUntil: at(9), turn: 1)
        #expect(result25 == nil, "a report out of its turn")
        // u1 and u2 pass their time parked; each says the prober's next try, u0's.
        let result26 = schedule.due(at: at(2.4), out: out)
        #expect(result26.isEmpty, "half a second's grace: one that tries says so")
        let result27 = schedule.due(at: at(3.5), out: out)
        #expect(result27.map(\.0) == [id(1), id(2)])
        #expect(schedule.uploads[id(1)]?.state == .waiting(until: at(4)))
        // The prober tries again and is not answered: the run's retries are out, and so it waits in the queue.
        let result28 = schedule.inFlight(id(0), waitsUntil: nil, turn: 2)
        #expect(result28 == .running)
        #expect(
            schedule.end(id(0), .waiting(outage: true), speaksNone: false, at: at(5)) == .waiting(until: at(20)))
        // The others, still parked past the prober's time, say a probe's wait from now.
        let parked = schedule.due(at: at(5), out: out)
        #expect(
            parked.map(\.0).sorted { $0.rawValue < $1.rawValue } == [id(1), id(2)] && parked.allSatisfy { $0.1 > at(5) }
        )
        #expect(starts(&schedule, at: at(5), out: out).isEmpty, "in flight: one at the limit, and the server is out")
        _ = schedule.end(id(1), .waiting(outage: true), speaksNone: false, at: at(6))
        _ = schedule.end(id(2), .waiting(outage: true), speaksNone: false, at: at(7))
        #expect(starts(&schedule, at: at(8), out: out).isEmpty, "nothing probes before the probe's time")
        let result29 = schedule.nextWake(after: at(8))
        #expect(result29 == at(20))
        // Each wait that ends before the probe's time waits on until then, and says so.
        let result30 = schedule.due(at: at(20), out: out)
        #expect(result30.map(\.0) == [id(0)])
        #expect(schedule.uploads[id(0)]?.state == .waiting(until: at(22)))
        let result31 = schedule.due(at: at(21), out: out)
        #expect(result31.map(\.0) == [id(1)])
        let result32 = schedule.due(at: at(22), out: out)
        #expect(result32.isEmpty, "the probe's time: they may go")
        // One of them probes; the others wait for it, until the next probe should it fail.
        let probe = schedule.next(at: at(22), out: out)
        #expect(probe?.id == id(0))
        #expect(Set(probe?.parked.map(\.0) ?? []) == [id(1), id(2)])
        #expect(probe?.parked.allSatisfy { $0.1 == at(37) } == true)
        let result33 = schedule.next(at: at(22), out: out)
        #expect(result33 == nil, "one probe at a time")
        #expect(schedule.uploads[id(3)]?.state == .pending, "never tried: pending")
        // The probe is answered: the server is back, and every upload goes.
        schedule.serverBack(server)
        let result34 = schedule.end(id(0), .completed(Self.answer), speaksNone: false, at: at(23))
        #expect(result34 == .completed)
        #expect(starts(&schedule, at: at(23)) == [id(1), id(2), id(3)])
    }

    /// An outage of one server stops none of another's uploads.
    @Test func anOutageHoldsOnlyItsOwnServer() {
        var schedule = QueueSchedule(limit: 2, probeInterval: 15)
        schedule.add(upload(0, to: server))
        schedule.add(upload(1, to: server))
        schedule.add(upload(2, to: other))
        #expect(starts(&schedule, at: at(0)) == [id(0), id(1)])
        _ = schedule.end(id(0), .waiting(outage: true), speaksNone: false, at: at(1))
        #expect(starts(&schedule, at: at(1), out: [server]) == [id(2)])
    }

    /// Waits said in random orders of random events never name a time past by more than the grace, and the
    /// schedule never starts more than its limit, nor one upload twice.
    @Test func randomEventsKeepTheInvariants() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var schedule = schedule(limit: 2, 6)
            var clock = 0.0
            var out: Set<Origin> = []
            for _ in 0..<60 {
                clock += Double.random(in: 0...6, using: &generator)
                let now = at(clock)
                for (_, until) in schedule.due(at: now, out: out) { #expect(until > now) }
                let ids = (0..<6).map(id)
                let target = ids.randomElement(using: &generator)!
                switch Int.random(in: 0..<9, using: &generator) {
                case 0: out = Bool.random(using: &generator) ? [server] : []
                case 1: if out.isEmpty { schedule.serverBack(server) }
                case 2: _ = schedule.pause(target)
                case 3: _ = schedule.resume(target)
                case 4: schedule.prioritize(target)
                case 5:
                    let until = now.addingTimeInterval(Double.random(in: 0...10, using: &generator))
                    _ = schedule.inFlight(target, waitsUntil: until, turn: Int.random(in: 1...9, using: &generator))
                default:
                    let outcomes: [QueueSchedule.Verdict] = [
                        .completed(Self.answer), .failed(.init(reason: "x")), .waiting(outage: true),
                        .waiting(outage: false), .stopped,
                    ]
                    _ = schedule.end(
                        target, outcomes.randomElement(using: &generator)!, speaksNone: false, at: now)
                }
                let before = schedule.inFlight
                while let next = schedule.next(at: now, out: out) {
                    #expect(!before.contains(next.id), "started twice")
                    for (_, until) in next.parked { #expect(until > now) }
                }
                #expect(schedule.inFlight.count <= 2)
                for upload in schedule.uploads.values {
                    #expect(upload.isInFlight == schedule.inFlight.contains(upload.id))
                    // A wait in the queue is never past: its time's coming was seen by `due`.
                    if case .waiting(let until) = upload.state, !upload.isInFlight { #expect(until > now) }
                }
            }
        }
    }
}
