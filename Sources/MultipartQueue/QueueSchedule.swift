import Foundation
import MultipartStream

/// Which upload of a queue goes next, and when: the order (the caller's moves, then the order added), keys, pauses,
/// the uploads in flight, their waits and the servers that are out. A value with no I/O: every event that depends on
/// the time takes it as an argument, so that it is tested transition by transition in virtual time; the queue's actor
/// asks it, then writes, sends and tells.
///
/// Each step costs the same however long the queue: the uploads that may start are kept in a heap for each server,
/// the waits in a heap of their times, and an upload that changed place or state is dropped where it comes to the
/// top of a heap it no longer belongs to.
struct QueueSchedule {
    typealias ID = MultipartUploadQueue.ID

    /// How many uploads go at once.
    let limit: Int
    /// How long an upload whose server is out waits for the next probe of it.
    let probeInterval: TimeInterval

    private(set) var uploads = Table()
    private var keys: [String: ID] = [:]
    /// The uploads that may start, for each server (`nil`: an upload whose record names none).
    private var ready: [Origin?: Heap<Rank>] = [:]
    /// The uploads that wait in the queue, by when they look again.
    private var timers = Heap<Timer>()
    private var servers: [Origin: Server] = [:]
    /// Each server's origin, held once for all its uploads.
    private var origins: [Origin: SharedOrigin] = [:]
    /// The uploads whose send is under way.
    private(set) var inFlight: Set<ID> = []
    /// The highest place the caller moved an upload to: the next move goes before it.
    private(set) var topPriority = 0
    /// The queue's progress in bytes, kept on the transitions that change it.
    private(set) var counts = Counts()
    /// The place in the order added of the next upload added: after every one the schedule took.
    private(set) var nextSequence = 0

    init(limit: Int, probeInterval: TimeInterval) {
        self.limit = max(1, limit)
        self.probeInterval = max(1, probeInterval)
    }

    /// Where an upload stands: ``MultipartUploadQueue/State`` without a completed upload's answer, which stays in
    /// its record.
    enum State: Equatable {
        case pending, running, completed, paused
        case waiting(until: Date)
        case failed(reason: String)
    }

    /// What the caller asked of an upload in flight.
    enum Stop: Equatable {
        case pause, remove
    }

    /// A wait: the upload is looked at again at `fires`, if it still waits until `until` then.
    private struct Timer: Comparable {
        var fires: Date
        var id: ID
        var until: Date

        init(until: Date, id: ID, grace: TimeInterval = 0) {
            (self.until, self.id, fires) = (until, id, until.addingTimeInterval(grace))
        }

        static func < (one: Timer, other: Timer) -> Bool {
            one.fires != other.fires ? one.fires < other.fires : one.id.rawValue < other.id.rawValue
        }
    }

    /// How long past its time an upload in flight may wait before it is taken as parked at its server's outage gate:
    /// one that tries again says so at once.
    static let parkedAfter: TimeInterval = 0.5

    /// What the schedule knows of one server.
    private struct Server {
        /// Its uploads in flight.
        var running = 0
        /// When an upload may next start to probe it, while it is out.
        var probe: Date?
        /// Its uploads that wait in the queue: they go at once when it is back.
        var waiting: Set<ID> = []
        /// Whether it speaks no version of the resumable draft: its forms go whole.
        var speaksNone = false
    }

    // MARK: Uploads come and go

    /// Makes room for `count` uploads, which a queue opened is about to add.
    mutating func reserve(_ count: Int) {
        uploads.reserve(count)
    }

    /// The upload of `key`, if one has it.
    func id(forKey key: String) -> ID? { keys[key] }

    /// Takes `upload` in, as its record says it stands. Two of one key (two processes that added it at once) stay
    /// two uploads; the first answers for the key.
    mutating func add(_ upload: Upload) {
        var upload = upload
        if let origin = upload.origin {
            if let shared = origins[origin] { upload.server = shared } else { origins[origin] = upload.server }
        }
        uploads[upload.id] = upload
        if let key = upload.key, keys[key] == nil { keys[key] = upload.id }
        topPriority = max(topPriority, upload.rank.priority)
        if let sequence = upload.sequence { nextSequence = max(nextSequence, sequence + 1) }
        counts.total &+= upload.contentLength
        if upload.state == .completed { counts.ended &+= upload.contentLength }
        if upload.state == .pending { makeReady(upload.id) }
    }

    /// Removes an upload that is not in flight (one in flight is asked to stop first, ``stop(_:for:)``).
    @discardableResult
    mutating func remove(_ id: ID) -> Upload? {
        guard let upload = uploads[id], !upload.isInFlight else { return nil }
        uploads[id] = nil
        if let key = upload.key, keys[key] == id { keys[key] = nil }
        if let origin = upload.origin { servers[origin]?.waiting.remove(id) }
        // Given up, it counts as done; a completed upload counted as it completed.
        if upload.state != .completed { counts.end(upload) }
        return upload
    }

    /// Removes every completed upload, in one pass: what it removed.
    mutating func removeCompleted() -> [Upload] {
        let completed = uploads.values.filter { $0.state == .completed }
        for upload in completed { remove(upload.id) }
        return completed
    }

    /// Every upload, in the queue's order.
    var ordered: [Upload] { uploads.values.sorted { $0.rank < $1.rank } }

    /// The upload `id` in flight handed out `bytes` of its form: its length, or `nil` for one not in flight. Its last
    /// byte counts when the server's answer says it has the form: a form handed out whole and refused keeps the queue
    /// short of done.
    mutating func handedOut(_ bytes: UInt64, by id: ID) -> UInt64? {
        guard var upload = uploads[id], upload.isInFlight else { return nil }
        let counted = min(bytes, upload.contentLength.subtractingSaturated(1))
        if counted > upload.sent {
            counts.inFlight &+= counted - upload.sent
            upload.sent = counted
            uploads[id] = upload
        }
        return upload.contentLength
    }

    // MARK: The caller's moves

    /// Pauses an upload that has not ended: `true` when it is in flight, and its send must be stopped (it is paused
    /// when it ends, ``end(_:_:speaksNone:at:)``). One whose removal is under way stays to be removed: its remover
    /// waits for that.
    mutating func pause(_ id: ID) -> Bool {
        guard var upload = uploads[id], upload.stopping != .remove else { return false }
        switch upload.state {
        case .completed, .failed, .paused: return false
        case .pending, .running, .waiting: break
        }
        if upload.isInFlight {
            upload.stopping = .pause
            uploads[id] = upload
            return true
        }
        if let origin = upload.origin { servers[origin]?.waiting.remove(id) }
        upload.state = .paused
        uploads[id] = upload
        return false
    }

    /// Whether `id` is paused, or pausing: what ``resume(_:)`` takes back.
    func isPaused(_ id: ID) -> Bool {
        uploads[id].map { $0.state == .paused || $0.stopping == .pause } ?? false
    }

    /// Resumes a paused upload, or takes back a pause that has not yet stopped it: `true` when it may start again.
    mutating func resume(_ id: ID) -> Bool {
        guard var upload = uploads[id] else { return false }
        if upload.stopping == .pause {
            upload.stopping = nil
            uploads[id] = upload
            return false
        }
        guard upload.state == .paused else { return false }
        upload.state = .pending
        uploads[id] = upload
        makeReady(id)
        return true
    }

    /// The priority an upload moved to the front would take.
    var frontPriority: Int { topPriority + 1 }

    /// Moves an upload to the front of the order (``frontPriority``).
    mutating func prioritize(_ id: ID) {
        guard var upload = uploads[id] else { return }
        topPriority += 1
        upload.rank.priority = topPriority
        uploads[id] = upload
        if upload.state == .pending { makeReady(id) }
    }

    /// A failed upload goes again, in its place, its form now `contentLength` long (a file changed since it was
    /// added): what it handed out counts up to its new length's last byte.
    mutating func retry(_ id: ID, contentLength: UInt64? = nil) {
        guard var upload = uploads[id], case .failed = upload.state else { return }
        if let length = contentLength, length != upload.contentLength {
            let sent = min(upload.sent, length.subtractingSaturated(1))
            counts.inFlight -= min(counts.inFlight, upload.sent - sent)
            counts.total = counts.total.subtractingSaturated(upload.contentLength) &+ length
            (upload.sent, upload.contentLength) = (sent, length)
        }
        upload.state = .pending
        uploads[id] = upload
        makeReady(id)
    }

    /// Asks an upload in flight to stop for `stop`; `false` for one that is not in flight. A removal asked stays one.
    mutating func stop(_ id: ID, for stop: Stop) -> Bool {
        guard var upload = uploads[id], upload.isInFlight else { return false }
        if upload.stopping != .remove { upload.stopping = stop }
        uploads[id] = upload
        return true
    }

    // MARK: The run's steps

    /// The waits whose time came by `now`. An upload waiting in the queue goes back to pending, or, where its server
    /// is out and a probe of it is under way or yet to come, waits on until the next probe; one in flight that waits
    /// at its server's outage gate for the upload probing it says when that probe next tries. The uploads that wait
    /// on, with their new time, for the queue to say: no wait is said past its time.
    mutating func due(at now: Date, out: Set<Origin>) -> [(ID, Date)] {
        var waitingOn: [(ID, Date)] = []
        while let timer = timers.min, timer.fires <= now {
            timers.popMin()
            guard var upload = uploads[timer.id], upload.state == .waiting(until: timer.until) else { continue }
            let blocked = upload.origin.map { upload.isInFlight ? out.contains($0) : isBlocked($0, at: now, out: out) }
            guard let origin = upload.origin, blocked == true else {
                // One in flight tries again by itself, and says so.
                guard !upload.isInFlight else { continue }
                upload.state = .pending
                uploads[timer.id] = upload
                makeReady(timer.id)
                continue
            }
            let next = upload.isInFlight ? nextTry(of: origin, at: now) : nextProbe(of: origin, at: now)
            upload.state = .waiting(until: next)
            uploads[timer.id] = upload
            timers.insert(Timer(until: next, id: timer.id, grace: upload.isInFlight ? Self.parkedAfter : 0))
            waitingOn.append((timer.id, next))
        }
        return waitingOn
    }

    /// An upload that starts, and the uploads that wait for it: started as the probe of its server, it parks the
    /// uploads whose wait for that server ended, until the next probe.
    struct Start {
        var id: ID
        var parked: [(ID, Date)] = []
    }

    /// The next upload to start at `now`, marked running: the first in the order whose server is not out (or whose
    /// probe it is); `nil` when none may start, or ``limit`` are in flight.
    mutating func next(at now: Date, out: Set<Origin>) -> Start? {
        guard inFlight.count < limit else { return nil }
        var best: (origin: Origin?, rank: Rank)?
        for origin in Array(ready.keys) {
            guard let rank = top(of: origin) else { continue }
            if let origin, isBlocked(origin, at: now, out: out) { continue }
            if best.map({ rank < $0.rank }) ?? true { best = (origin, rank) }
        }
        guard let (origin, rank) = best else { return nil }
        ready[origin]?.popMin()
        let id = ID(rawValue: rank.id)
        uploads[id]?.state = .running
        uploads[id]?.isInFlight = true
        uploads[id]?.waitReports = 0
        inFlight.insert(id)
        var start = Start(id: id)
        guard let origin else { return start }
        servers[origin, default: Server()].running += 1
        servers[origin]?.waiting.remove(id)
        guard out.contains(origin) else { return start }
        // The probe of a server that is out: should it fail, the next comes a probe's wait from now, which the
        // uploads whose wait for the server ended wait for.
        let probe = now.addingTimeInterval(probeInterval)
        servers[origin]?.probe = probe
        for parked in servers[origin]?.waiting ?? [] where uploads[parked]?.state == .pending {
            uploads[parked]?.state = .waiting(until: probe)
            timers.insert(Timer(until: probe, id: parked))
            start.parked.append((parked, probe))
        }
        return start
    }

    /// The least rank of `origin`'s ready heap that still stands, the stale ones above it dropped.
    private mutating func top(of origin: Origin?) -> Rank? {
        while let rank = ready[origin]?.min {
            let upload = uploads[ID(rawValue: rank.id)]
            if let upload, upload.state == .pending, upload.rank == rank { return rank }
            ready[origin]?.popMin()
        }
        ready[origin] = nil
        return nil
    }

    /// An upload in flight waits between its own tries until `until`, or (`nil`) tries again; `turn` orders one
    /// send's reports. The state to say, if it changed.
    mutating func inFlight(_ id: ID, waitsUntil until: Date?, turn: Int) -> State? {
        guard var upload = uploads[id], upload.isInFlight, turn > upload.waitReports else { return nil }
        upload.waitReports = turn
        defer { uploads[id] = upload }
        if let until {
            upload.state = .waiting(until: until)
            // Looked at again then: one parked at its server's outage gate waits on past its own time.
            timers.insert(Timer(until: until, id: id, grace: Self.parkedAfter))
            return upload.state
        }
        guard case .waiting = upload.state else { return nil }
        upload.state = .running
        return upload.state
    }

    /// What the queue does once a send ended.
    enum Ending: Equatable {
        /// The caller removed it while it ran: its record and state go.
        case forget
        /// The caller paused it while it ran: paused, its saved state kept.
        case paused
        case completed
        case failed(reason: String)
        /// It waits in the queue until then.
        case waiting(until: Date)
        /// It goes again in a later run (the run was cancelled).
        case pending
    }

    /// The send of `id` ended as `verdict` says at `now`; `speaksNone` when its server turned out to speak no draft.
    /// `nil` for an upload that was not in flight. ``finished(_:_:speaksNone:at:)`` says what the queue does of it.
    mutating func end(_ id: ID, _ verdict: Verdict, speaksNone: Bool, at now: Date) -> Ending? {
        guard var upload = uploads[id], upload.isInFlight else { return nil }
        upload.isInFlight = false
        inFlight.remove(id)
        if let origin = upload.origin {
            servers[origin]?.running -= 1
            if speaksNone { servers[origin]?.speaksNone = true }
        }
        let stopping = upload.stopping
        upload.stopping = nil
        uploads[id] = upload
        if stopping == .remove {
            remove(id)
            return .forget
        }
        if stopping == .pause,
            verdict == .stopped || verdict == .waiting(outage: true) || verdict == .waiting(outage: false)
        {
            // Paused where it stood: the server's word, and its own, come at the resume.
            uploads[id]?.state = .paused
            return .paused
        }
        switch verdict {
        case .completed:
            if let origin = upload.origin { servers[origin]?.probe = nil }
            counts.end(upload)
            uploads[id]?.state = .completed
            return .completed
        case .failed(let failure):
            uploads[id]?.state = .failed(reason: failure.reason)
            return .failed(reason: failure.reason)
        case .waiting(let outage):
            // The queue's probe of the server: one upload every probe's wait, so that they go again that soon after
            // the network's return. A server that answered (busy) is no outage: this upload waits alone.
            let until = now.addingTimeInterval(probeInterval)
            if let origin = upload.origin {
                servers[origin]?.probe = outage ? until : nil
                servers[origin]?.waiting.insert(id)
            }
            uploads[id]?.state = .waiting(until: until)
            timers.insert(Timer(until: until, id: id))
            return .waiting(until: until)
        case .stopped:
            uploads[id]?.state = .pending
            makeReady(id)
            return .pending
        }
    }

    /// `origin` answered after an outage: its uploads that wait go now.
    mutating func serverBack(_ origin: Origin) {
        servers[origin]?.probe = nil
        for id in servers[origin]?.waiting ?? [] {
            guard uploads[id]?.isInFlight == false, case .waiting? = uploads[id]?.state else { continue }
            uploads[id]?.state = .pending
            makeReady(id)
        }
        servers[origin]?.waiting.removeAll()
    }

    /// The run ended: each upload it left in flight is pending again, or paused where the caller paused it.
    mutating func runEnded() {
        for id in inFlight {
            guard var upload = uploads[id] else { continue }
            upload.isInFlight = false
            upload.state = upload.stopping == .pause ? .paused : .pending
            upload.stopping = nil
            uploads[id] = upload
            if upload.state == .pending { makeReady(id) }
            if let origin = upload.origin { servers[origin]?.running -= 1 }
        }
        inFlight.removeAll()
    }

    /// When the run looks again after `now`, with nothing in flight to end first: the next wait's end, or the next
    /// probe of a server that is out.
    mutating func nextWake(after now: Date) -> Date? {
        while let timer = timers.min, uploads[timer.id]?.state != .waiting(until: timer.until) { timers.popMin() }
        let probes = servers.values.compactMap(\.probe).filter { $0 > now }
        return ([timers.min?.fires].compactMap { $0 } + probes).min()
    }

    /// Whether `origin` was found to speak no version of the draft.
    func speaksNone(_ origin: Origin?) -> Bool {
        origin.flatMap { servers[$0]?.speaksNone } ?? false
    }

    // MARK: Helpers

    /// Whether the uploads to `origin` wait out its outage at `now`: while one of them probes it, or until the next
    /// probe.
    private func isBlocked(_ origin: Origin, at now: Date, out: Set<Origin>) -> Bool {
        guard out.contains(origin), let server = servers[origin] else { return false }
        return server.running > 0 || now < server.probe ?? .distantPast
    }

    /// When an upload in flight parked at `origin`'s outage gate next tries: when the upload probing the server does
    /// (the latest wait of the uploads in flight to it), or, while the probe is under way, a probe's wait from now.
    private func nextTry(of origin: Origin, at now: Date) -> Date {
        let tries = inFlight.compactMap { id -> Date? in
            guard let upload = uploads[id], upload.origin == origin, case .waiting(let until) = upload.state else {
                return nil
            }
            return until > now ? until : nil
        }
        return tries.max() ?? now.addingTimeInterval(probeInterval)
    }

    /// When an upload parked behind `origin`'s outage next looks: the next probe, or a probe's wait from now while
    /// one is under way.
    private func nextProbe(of origin: Origin, at now: Date) -> Date {
        if let probe = servers[origin]?.probe, probe > now { return probe }
        return now.addingTimeInterval(probeInterval)
    }

    private mutating func makeReady(_ id: ID) {
        guard let upload = uploads[id] else { return }
        ready[upload.origin, default: Heap()].insert(upload.rank)
    }
}
