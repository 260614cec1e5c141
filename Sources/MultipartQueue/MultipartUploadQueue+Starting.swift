import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The starts of sends: each upload's record read, its form made, its job handed out.
extension MultipartUploadQueue {
    /// The uploads whose turn it is at `now`, each marked running, their starts written in one transaction with the
    /// completions that wait (uploads that ended together start their successors in one commit). Uploads whose wait
    /// ended while their server is still out say their new wait.
    func startAll(at now: Date, session: URLSession, headers: MultipartHeaders?) -> [Job] {
        let out = outServers
        performNow(schedule.dueWaits(at: now, out: out))
        var jobs: [Job] = []
        // An upload whose record cannot be read or written, or makes no form, fails, and the next is tried.
        while true {
            var starting: [(id: ID, speaksNone: Bool, whole: Bool)] = []
            while let next = schedule.next(at: now, out: out) {
                performNow(next.parked.map { .emit(.waiting($0, until: $1)) })
                guard let upload = schedule.uploads[next.id] else { continue }
                guard upload.sequence != nil else {
                    _ = failing(next.id, because: Failure(reason: "its record cannot be read: it is no record"))
                    continue
                }
                // Whole in one request: to a server known to speak no draft, or a form small enough for one.
                let speaksNone = schedule.speaksNone(upload.origin)
                let whole = speaksNone || resumption.goesInOneRequest(upload.contentLength)
                starting.append((next.id, speaksNone, whole))
            }
            guard !starting.isEmpty else { return jobs }
            let written: [QueueRecord.State?]
            do {
                written = try recordCompletions(with: starting.map { ($0.id, .started(whole: $0.whole, at: now)) })
            } catch {
                for (id, _, _) in starting {
                    _ = failing(id, because: Failure(reason: "its record cannot be read or written: \(error)"))
                }
                continue
            }
            for ((id, speaksNone, whole), state) in zip(starting, written) {
                if let job = start(
                    id, as: state, speaksNone: speaksNone, whole: whole, session: session, headers: headers)
                {
                    jobs.append(job)
                }
            }
        }
    }

    /// The send of `id`, which the schedule marked running and whose start wrote `found`;
    /// `nil` when it failed, or stays as another process left it, instead.
    func start(
        _ id: ID, as found: QueueRecord.State?, speaksNone: Bool, whole: Bool, session: URLSession,
        headers: MultipartHeaders?
    ) -> Job? {
        guard let upload = schedule.uploads[id] else { return nil }
        var record: QueueRecord
        do {
            // Removed by another process since the queue last looked: it goes without a byte sent.
            guard let found else { return declined(id, because: .gone) }
            record = try store.read(id.rawValue)
            record.state = found
        } catch {
            if error.gone { return declined(id, because: .gone) }
            return failing(id, because: Failure(reason: "its record cannot be read: \(error.reason)"))
        }
        // Its start counted, where it was written: a run before started it.
        let startedBefore = record.state.starts > 1
        // Its removal asked for, or a pause, by another process since the queue last looked: removed, or left as it
        // is, not started.
        if record.state.removing == true { return declined(id, because: .removalAsked) }
        if record.state.paused == true { return declined(id, because: .paused) }
        let form: MultipartFormData?
        do {
            form = try record.form.rebuilt()
        } catch {
            return failing(id, because: Job.failure(error))
        }
        guard let form else { return failing(id, because: Failure(reason: "its record does not make a form")) }
        // A file gone or changed while the upload waited fails it before it asks the server for anything. One a run
        // before started is left to its saved state, which deletes the server's upload of the old file.
        do {
            if !startedBefore { try form.checkFiles() }
        } catch {
            return failing(id, because: Job.failure(error))
        }
        let handle = CancelHandle()
        cancels[id] = handle
        let outage = upload.origin.map { gate($0).pass() }
        perform(.emit(.started(id)))
        let askOnce = upload.origin.map { discovery($0) }
        return Job(
            id: id, record: record, store: store, form: form, request: record.request.urlRequest,
            stateDirectory: store.stateDirectory(of: id.rawValue),
            resumption: resumption, startedBefore: startedBefore,
            speaksNone: speaksNone, goesWhole: whole,
            knownServer: upload.origin.flatMap { knownServers[$0.serialized] },
            learned: { [weak self] server in
                guard let origin = upload.origin else { return }
                Task { await self?.learned(server, for: origin) }
            },
            discovery: askOnce,
            outage: outage, pacer: pacer, session: session, headers: headers, cancel: handle,
            waits: { [weak self] until, turn in Task { await self?.inFlight(id, waitsUntil: until, turn: turn) } },
            progress: { [weak self] sent in Task { await self?.sent(sent, by: id) } }, clock: clock)
    }

    /// An upload the schedule started that its record declined: `nil`, for the next to be tried.
    func declined(_ id: ID, because decline: QueueSchedule.Decline) -> Job? {
        performNow(schedule.declined(id, because: decline, at: clock.now()))
        return nil
    }

    /// An upload the schedule started fails before its send: `nil`, for the next to be tried.
    func failing(_ id: ID, because failure: Failure) -> Job? {
        performNow(schedule.finished(id, .failed(failure), speaksNone: false, at: clock.now()))
        return nil
    }

    /// Carries out `actions` without waiting: where one of them waits for the server (a removal's `DELETE`), all of
    /// them go in order on a task of the queue's, and the starts go on meanwhile.
    func performNow(_ actions: [QueueSchedule.Action]) {
        guard !actions.contains(where: { if case .forget = $0 { true } else { false } }) else {
            Task { await self.perform(actions) }
            return
        }
        for action in actions { perform(action) }
        report()
    }

    /// An upload found what `origin`'s server speaks: the next uploads to it go without asking.
    func learned(_ server: ResumableUpload.KnownServer, for origin: Origin) {
        guard knownServers[origin.serialized] != server else { return }
        knownServers[origin.serialized] = server
        writeKnown(server, for: origin)
    }

    /// The gate of `origin`'s uploads, made at its first upload.
    func gate(_ origin: Origin) -> OutageGate {
        if let gate = gates[origin] { return gate }
        let gate = OutageGate { [weak self] in Task { await self?.outageEnded(at: origin) } }
        gates[origin] = gate
        return gate
    }

    /// The discovery gate of `origin`'s uploads, made at its first upload.
    func discovery(_ origin: Origin) -> DiscoveryGate {
        if let gate = discoveries[origin] { return gate }
        let gate = DiscoveryGate()
        discoveries[origin] = gate
        return gate
    }
}
