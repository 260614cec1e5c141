import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartQueue
@testable import MultipartStream

/// The queue's schedule under seeded random sequences of every event it takes (adds, the caller's moves, starts,
/// ends of every kind, progress, waits, outages and returns, time passing, a run's end), in virtual time, with what
/// must hold after each event checked: the limit, the order, no start of an upload that is paused, removed,
/// completed, failed or waiting out its time, no wait forgotten, a start whenever one is due, the actions each event
/// returns (a cancel only of a send in flight, an upload forgotten or told removed only once it left), and the
/// progress's counts. A failure names its seed and step; `QUEUE_SCHEDULE_SEED=N` replays that seed alone.
@Suite struct QueueScheduleSequenceTests {
    typealias ID = MultipartUploadQueue.ID
    static let answer = MultipartUploadQueue.Answer(statusCode: 201)

    static let origins: [Origin?] = [
        Origin(URL(string: "https://one.example/")!), Origin(URL(string: "https://two.example/")!), nil,
    ]

    static var seeds: [UInt64] {
        if let seed = ProcessInfo.processInfo.environment["QUEUE_SCHEDULE_SEED"].flatMap(UInt64.init) { return [seed] }
        return Array(1...300)
    }

    @Test func everyInvariantHoldsThroughSeededRandomSequences() {
        for seed in Self.seeds {
            var run = Walk(seed: seed)
            for step in 0..<400 {
                run.step()
                if let broken = run.broken {
                    Issue.record("seed \(seed), step \(step) (\(run.last)): \(broken)")
                    return
                }
            }
        }
    }

    /// One seeded sequence: the schedule, and what the test knows of each upload from the events it gave.
    struct Walk {
        var generator: SeededGenerator
        var schedule: QueueSchedule
        var now = Date(timeIntervalSince1970: 1_000_000)
        /// The servers out now, as the queue's gates would say.
        var out: Set<Origin> = []
        var made = 0
        /// Uploads the schedule took.
        var added = 0
        /// Uploads removed from the schedule: none may come back.
        var removed: Set<ID> = []
        /// When each upload that waits in the queue may go again, unless its server came back first.
        var waitsUntil: [ID: Date] = [:]
        var last = ""
        var broken: String?

        init(seed: UInt64) {
            generator = SeededGenerator(seed: seed)
            schedule = QueueSchedule(limit: Int.random(in: 1...4, using: &generator), probeInterval: 15)
            for _ in 0..<6 { add() }
        }

        private mutating func pick() -> ID? {
            schedule.uploads.values.randomElement(using: &generator)?.id
        }

        private mutating func add() {
            let origin = QueueScheduleSequenceTests.origins.randomElement(using: &generator)!
            let key = Bool.random(using: &generator) ? "k\(Int.random(in: 0..<4, using: &generator))" : nil
            if let key, schedule.id(forKey: key) != nil { return }
            check(
                schedule.added([
                    QueueSchedule.Upload(
                        id: ID(rawValue: String(format: "u%04d", made)), sequence: made, key: key, origin: origin,
                        state: .pending, contentLength: 10)
                ]))
            made += 1
            added += 1
        }

        mutating func step() {
            switch Int.random(in: 0..<15, using: &generator) {
            case 0:
                last = "add"
                add()
            case 1, 2, 3:
                last = "start"
                start()
            case 4, 5:
                last = "end"
                end()
            case 6:
                guard let id = pick() else { return }
                last = "pause \(id.rawValue)"
                let wasInFlight = schedule.uploads[id]?.isInFlight == true
                let removing = schedule.uploads[id]?.stopping == .remove
                let pausing = schedule.uploads[id]?.stopping == .pause
                let stops = check(schedule.take(.pause, id)).contains(.cancel(id))
                if removing, schedule.uploads[id]?.stopping != .remove {
                    broken = "a pause took the place of a remove under way"
                } else if stops != (wasInFlight && !pausing && schedule.uploads[id]?.stopping == .pause) {
                    broken = "pause said \(stops) of an upload in flight: \(wasInFlight)"
                }
                if !wasInFlight { waitsUntil[id] = nil }
            case 7:
                guard let id = pick() else { return }
                last = "resume \(id.rawValue)"
                check(schedule.take(.resume, id))
            case 8:
                guard let id = pick() else { return }
                last = "prioritize \(id.rawValue)"
                check(schedule.take(.prioritize, id))
                if schedule.uploads[id]?.rank.priority != schedule.topPriority { broken = "not moved to the front" }
            case 9:
                guard let id = pick() else { return }
                last = "retry \(id.rawValue)"
                check(schedule.retried(id))
            case 10:
                guard let id = pick() else { return }
                last = "remove \(id.rawValue)"
                if schedule.uploads[id]?.isInFlight == true {
                    if check(schedule.removeAsked(id) ?? []) != [.cancel(id)] { broken = "no cancel of a removal" }
                } else if !check(schedule.removeNow(id)).isEmpty {
                    removed.insert(id)
                    waitsUntil[id] = nil
                }
            case 11:
                last = "time"
                now = now.addingTimeInterval(Double.random(in: 0...20, using: &generator))
                check(schedule.dueWaits(at: now, out: out))
                checkNoWaitPastItsTime()
            case 12:
                guard
                    let origin = QueueScheduleSequenceTests.origins.compactMap({ $0 }).randomElement(using: &generator)
                else { return }
                if out.contains(origin) {
                    last = "back \(origin.serialized)"
                    out.remove(origin)
                    check(schedule.back(origin))
                    for upload in schedule.uploads.values where upload.origin == origin { waitsUntil[upload.id] = nil }
                } else {
                    last = "out \(origin.serialized)"
                    out.insert(origin)
                }
            case 13:
                guard let id = schedule.inFlight.randomElement(using: &generator) else { return }
                last = "in-flight wait \(id.rawValue)"
                let turn = (schedule.uploads[id]?.waitReports ?? 0) + 1
                if Bool.random(using: &generator) {
                    last = "progress \(id.rawValue)"
                    check(schedule.sent(UInt64.random(in: 0...12, using: &generator), by: id))
                    break
                }
                let until = Bool.random(using: &generator) ? now.addingTimeInterval(5) : nil
                check(schedule.waits(id, until: until, turn: turn))
            default:
                if Int.random(in: 0..<4, using: &generator) == 0 {
                    last = "run ended"
                    let pausing = schedule.inFlight.filter { schedule.uploads[$0]?.stopping == .pause }
                    schedule.runEnded()
                    if !schedule.inFlight.isEmpty { broken = "in flight after the run's end" }
                    for id in pausing where schedule.uploads[id]?.state != .paused { broken = "a pause lost: \(id)" }
                } else {
                    last = "remove completed"
                    let completed = schedule.uploads.values.filter { $0.state == .completed }.map(\.id)
                    for case .clear(let cleared) in check(schedule.clearCompleted()) {
                        removed.formUnion(cleared)
                        if Set(cleared) != Set(completed) { broken = "cleared \(cleared), not \(completed)" }
                    }
                }
            }
            if broken == nil { checkAlways() }
        }

        /// Starts what may start now: each start is due, in the order, and when none is left one would not be.
        private mutating func start() {
            while broken == nil {
                let candidates = schedule.uploads.values.filter { upload in
                    upload.state == .pending && !upload.isInFlight && upload.origin.map { !out.contains($0) } ?? true
                }
                let before = schedule.uploads
                guard let next = schedule.next(at: now, out: out) else {
                    if schedule.inFlight.count < schedule.limit, !candidates.isEmpty {
                        broken = "room and \(candidates.map(\.id.rawValue)) pending, yet none started"
                    }
                    return
                }
                guard let was = before[next.id] else {
                    broken = "started \(next.id), which is not in the queue"
                    return
                }
                if removed.contains(next.id) { broken = "started \(next.id), which was removed" }
                if was.state != .pending || was.isInFlight { broken = "started \(next.id) from \(was.state)" }
                if let until = waitsUntil[next.id], now < until {
                    broken = "started \(next.id) before its wait's end \(until.timeIntervalSince(now)) s later"
                }
                if let best = candidates.map(\.rank).min(), best < was.rank {
                    broken = "started \(next.id) before \(best.id), first in the order"
                }
                if schedule.inFlight.count > schedule.limit { broken = "past the limit" }
                if schedule.uploads[next.id]?.state != .running { broken = "started, not running" }
                waitsUntil[next.id] = nil
            }
        }

        /// Ends a send in flight with a random outcome, and checks what its end made of it.
        private mutating func end() {
            guard let id = schedule.inFlight.randomElement(using: &generator), let upload = schedule.uploads[id] else {
                let someone = pick()
                if let someone, schedule.uploads[someone]?.isInFlight == false,
                    schedule.end(someone, .completed(QueueScheduleSequenceTests.answer), speaksNone: false, at: now)
                        != nil
                {
                    broken = "the end of \(someone), not in flight, was taken"
                }
                return
            }
            let outcomes: [QueueSchedule.Verdict] = [
                .completed(QueueScheduleSequenceTests.answer), .failed(.init(reason: "no")), .waiting(outage: true),
                .waiting(outage: false), .stopped,
            ]
            let outcome = outcomes.randomElement(using: &generator)!
            last = "end \(id.rawValue): \(outcome)"
            let ending = schedule.end(id, outcome, speaksNone: Bool.random(using: &generator), at: now)
            let after = schedule.uploads[id]
            switch upload.stopping {
            case .remove:
                if ending != .forget || after != nil {
                    broken = "a remove while in flight ended \(String(describing: ending))"
                }
                removed.insert(id)
                return
            case .pause
            where outcome != .completed(QueueScheduleSequenceTests.answer) && outcome != .failed(.init(reason: "no")):
                if ending != .paused || after?.state != .paused {
                    broken = "a pause while in flight ended \(String(describing: ending))"
                }
                return
            default: break
            }
            switch (outcome, ending) {
            case (.completed, .completed?):
                if after?.state != .completed { broken = "completed, yet \(String(describing: after?.state))" }
            case (.failed, .failed?):
                if case .failed = after?.state {} else { broken = "failed, yet \(String(describing: after?.state))" }
            case (.waiting, .waiting(let until)?):
                if until <= now || after?.state != .waiting(until: until) { broken = "a wait that ends at once" }
                waitsUntil[id] = until
            case (.stopped, .pending?):
                if after?.state != .pending { broken = "stopped, yet \(String(describing: after?.state))" }
            default:
                broken = "\(outcome) ended \(String(describing: ending))"
            }
        }

        /// Once the time of a wait in the queue came, it waits no more: it goes, or waits on for its server's next
        /// probe, a time still to come.
        private mutating func checkNoWaitPastItsTime() {
            for upload in schedule.uploads.values where !upload.isInFlight {
                guard case .waiting(let until) = upload.state, until <= now else { continue }
                broken = "\(upload.id) waits past its time"
            }
        }

        /// Checks the actions an event returned against the schedule after it: a cancel only of a send in flight, an
        /// upload forgotten, cleared or told removed only once it left.
        @discardableResult
        private mutating func check(_ actions: [QueueSchedule.Action]) -> [QueueSchedule.Action] {
            for action in actions {
                switch action {
                case .cancel(let id) where schedule.uploads[id]?.isInFlight != true:
                    broken = "a cancel of \(id), not in flight"
                case .forget(let upload, _) where schedule.uploads[upload.id] != nil:
                    broken = "\(upload.id) forgotten, yet in the schedule"
                case .emit(.removed(let id)) where schedule.uploads[id] != nil:
                    broken = "\(id) told removed, yet in the schedule"
                default: break
                }
                if case .clear(let ids) = action, ids.contains(where: { schedule.uploads[$0] != nil }) {
                    broken = "cleared \(ids), yet in the schedule"
                }
            }
            return actions
        }

        /// What holds after every event.
        private mutating func checkAlways() {
            // The progress: every upload's length in the total; those that completed or left as done; what the
            // others handed out, short of its last byte.
            let counts = schedule.counts
            let completed = schedule.uploads.values.filter { $0.state == .completed }.count
            let handedOut = schedule.uploads.values.filter { $0.state != .completed }.reduce(UInt64(0)) { $0 + $1.sent }
            if counts.total != UInt64(added) * 10 { broken = "a total of \(counts.total) for \(added) uploads" }
            if counts.ended != UInt64(removed.count + completed) * 10 {
                broken = "\(counts.ended) ended for \(removed.count) removed and \(completed) completed"
            }
            if counts.inFlight != handedOut { broken = "\(counts.inFlight) handed out, not \(handedOut)" }
            if schedule.uploads.values.contains(where: { $0.sent >= $0.contentLength }) {
                broken = "a last byte counted"
            }
            let flying = Set(schedule.uploads.values.filter(\.isInFlight).map(\.id))
            if flying != schedule.inFlight { broken = "in flight: \(flying) against \(schedule.inFlight)" }
            if schedule.inFlight.count > schedule.limit { broken = "past the limit" }
            if let back = removed.first(where: { schedule.uploads[$0] != nil }) { broken = "\(back) came back" }
            // No wait is forgotten: one waiting in the queue has a time the run wakes at.
            let waiting = schedule.uploads.values.contains { upload in
                guard !upload.isInFlight, case .waiting = upload.state else { return false }
                return true
            }
            if waiting, schedule.nextWake(after: now) == nil { broken = "an upload waits, and no wake is set" }
        }
    }
}
