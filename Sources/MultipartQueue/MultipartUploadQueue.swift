import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A queue of uploads kept in a directory of the caller's choosing, sent a few at a time in the order added, that
/// outlives the process and waits out outages.
///
/// ```swift
/// let queue = try MultipartUploadQueue(directory: backupDirectory)
/// var form = MultipartFormData()
/// try form.append(fileURL: photo, name: "photo")
/// _ = try await queue.add(form, with: URLRequest(url: uploadURL))
/// try await queue.run(on: .shared, headers: .fresh { _ in ["Authorization": try await tokens.current()] })
/// ```
///
/// Each upload is committed before ``add(_:with:key:again:)`` returns, and outlives a kill of the process: what rebuilds its
/// form byte for byte (fields, data and file parts by path with the file's identity, custom part headers), and the request without credentials, which go
/// through the `headers` hook of ``run(on:headers:pacing:)`` and are never written. ``run(on:headers:pacing:)`` sends the uploads
/// ``maximumConcurrentUploads`` at a time as resumable uploads (<doc:ResumableUploads>), each with its saved state in
/// the queue's directory: a kill, a crash or a reboot costs what was in flight, and the next run, in any process,
/// resumes each upload where the server stands. See <doc:UploadQueues> for what is guaranteed where.
public actor MultipartUploadQueue {
    /// The directory the queue is kept in.
    public nonisolated let directory: URL
    /// How many uploads go at once.
    public nonisolated let maximumConcurrentUploads: Int
    /// The queue's progress in bytes of its forms: every upload's length in all, and the bytes of those that
    /// completed or were removed and those the others handed out. It never goes back: an upload resumed or sent again
    /// counts no byte twice. A failed upload's unsent bytes keep it short of done until it is retried and completes,
    /// or removed.
    public nonisolated let progress: Progress
    /// What happens in the queue from the moment this is read: uploads added, started, their progress, waits,
    /// completions and failures. Each read is a stream of its own, and every stream gets every event: a view and a
    /// logger read theirs at once. An event comes once ``progress`` counts it. Read it before ``run(on:headers:pacing:)``
    /// starts to see every event of the run.
    public nonisolated var events: AsyncStream<Event> { eventSink.stream() }
    /// The rate the uploads in flight keep to together, every request of each counted (appends, resends, a whole
    /// form where the server speaks no draft): their sum stays under it however many start and end, as a link's
    /// budget needs. `nil`, the default, sends as fast as the network takes it. It can be changed at any time, from
    /// any thread, while a run goes: the uploads in flight keep to the new rate from their next read. As with any
    /// pacing, the reads wait on the thread that reads the body, which on Linux is URLSession's one for the whole
    /// process.
    public nonisolated var pacing: MultipartPacing? {
        get { pacer.pacing }
        set { pacer.change(to: newValue) }
    }
    /// The upload whose event the `events` closure of the queue's ``MultipartStream/MultipartResumption`` is hearing,
    /// while it hears it; `nil` anywhere else. That closure hears the requests, answers and retries of every upload,
    /// and this says which one each is of:
    ///
    /// ```swift
    /// var resumption = MultipartResumption()
    /// resumption.events = { event in print(MultipartUploadQueue.uploadHeard?.rawValue ?? "-", event) }
    /// ```
    @TaskLocal public static var uploadHeard: ID?
    /// The clock every upload in flight reads by. Reads that fell behind (a pause between two requests, or between
    /// two uploads) catch up a tenth of a second at most, so that any 5 s at the link carry at most that and one
    /// read's bytes over the rate: 4 % of it.
    private nonisolated let pacer = MultipartPacer(nil, catchUp: 0.1)

    private let eventSink = EventBroadcast<Event>()
    /// How each upload retries before it waits in the queue.
    private let resumption: MultipartResumption
    private let store: QueueStore
    /// Which upload goes next, and when.
    private var schedule: QueueSchedule
    /// The cancel of each send under way.
    private var cancels: [ID: CancelHandle] = [:]
    /// The uploads that completed since the last write, with their answers: the next start writes them.
    private var completing: [(upload: QueueSchedule.Upload, answer: Answer)] = []
    /// Where the uploads to each server wait out an outage together: their own retries, as the queue's probes.
    private var gates: [Origin: OutageGate] = [:]
    /// Where the uploads to each server wait for the one that asks what it speaks.
    private var discoveries: [Origin: DiscoveryGate] = [:]
    /// What each server was found to speak, by its origin, kept in the database for later runs: only the first
    /// upload to a server asks it (`OPTIONS` in each version down to the one it speaks).
    private var knownServers: [String: ResumableUpload.KnownServer]
    /// The bytes handed out by uploads that have not completed.
    private var inFlightBytes: UInt64 = 0
    private var nextSequence = 0
    private var isRunning: Bool { running != nil }
    /// The session and headers of the run under way.
    private var running: (URLSession, MultipartHeaders?)?
    /// The bytes of uploads that completed or were removed, which progress never takes back.
    private var endedBytes: UInt64 = 0
    /// The run's sleep, which ends early when its alarm rings (a server is back, the caller moved an upload, an upload
    /// waits), and until when it sleeps.
    private var sleep: (alarm: Alarm, until: Date)?
    /// How many times the run slept: a few for each wait, never a loop.
    private(set) var sleeps = 0
    /// The store's version this queue has seen: what other processes wrote since is looked for while it runs.
    private var seenVersion: Int64
    /// How often a run looks for what other processes changed, in nanoseconds: `Task.sleep(nanoseconds:)` is there
    /// from the package's floor (iOS 13), where `Duration` and `sleep(for:)` wait for iOS 16.
    static let lookAgain: UInt64 = 500_000_000
    /// Where the queue's times come from.
    private let clock: QueueClock

    /// The queue kept in `directory`, made if it does not exist (owned by this user, not writable by others), with
    /// every upload an earlier process added. A record that cannot be read is listed as a failed upload.
    ///
    /// - Parameters:
    ///   - directory: Where the queue is kept: a directory of the app's own (Application Support, or
    ///     `$XDG_STATE_HOME`).
    ///   - maximumConcurrentUploads: How many uploads go at once: 3 unless set, at least 1.
    ///   - resumption: How each upload retries before it waits in the queue (the defaults wait out 3 minutes at
    ///     least), and a stall; its state directory is the queue's own, and its `events` hear every upload's. Its ``MultipartStream/MultipartResumption/maximumDelay``
    ///     is also how often the queue probes a server whose outage outlasted those retries.
    /// - Throws: ``MultipartStream/MultipartError/Reason/stateUnwritable(_:errno:)`` for a directory that cannot be made or is
    ///   another user's.
    public init(
        directory: URL, maximumConcurrentUploads: Int = 3, resumption: MultipartResumption = MultipartResumption()
    ) throws {
        try self.init(
            directory: directory, maximumConcurrentUploads: maximumConcurrentUploads, resumption: resumption,
            clock: .system)
    }

    /// The queue above, its times from `clock`.
    package init(
        directory: URL, maximumConcurrentUploads: Int = 3, resumption: MultipartResumption = MultipartResumption(),
        clock: QueueClock
    ) throws {
        self.clock = clock
        self.directory = directory
        self.maximumConcurrentUploads = max(1, maximumConcurrentUploads)
        self.resumption = resumption
        store = try QueueStore(directory)
        // Before the listing: what is written meanwhile comes again as a change, which changes nothing twice.
        seenVersion = store.version
        var schedule = QueueSchedule(
            limit: maximumConcurrentUploads, probeInterval: max(1, resumption.wait(.infinity)))
        var origins: [String: Origin?] = [:]
        var nextSequence = 0
        var (total, ended): (UInt64, UInt64) = (0, 0)
        store.forEachRecord { listed in
            let upload: QueueSchedule.Upload
            switch listed {
            case .record(let summary):
                upload =
                    schedule.uploads[ID(rawValue: summary.id)] == nil
                    ? Self.upload(summary, origin: Self.origin(of: summary.url, in: &origins))
                    : Self.damaged(summary.id, reason: "another record has its ID")
                nextSequence = max(nextSequence, summary.sequence + 1)
            case .damaged(let id, let reason):
                upload = Self.damaged(id, reason: reason)
            }
            // A damaged record's name may be another's ID: the first keeps it.
            guard schedule.uploads[upload.id] == nil else { return }
            schedule.add(upload)
            total += upload.contentLength
            if upload.state == .completed { ended += upload.contentLength }
        }
        self.schedule = schedule
        self.nextSequence = nextSequence
        knownServers = store.knownServers()
        endedBytes = ended
        progress = Progress(totalUnitCount: Int64(clamping: total))
        progress.completedUnitCount = Int64(clamping: ended)
    }

    deinit {
        // Readers' loops end with the queue.
        eventSink.finish()
    }

    /// The upload a record's summary says.
    private static func upload(_ summary: QueueRecord.Summary, origin: Origin?) -> QueueSchedule.Upload {
        return QueueSchedule.Upload(
            id: ID(rawValue: summary.id), sequence: summary.sequence, key: summary.key,
            priority: summary.priority ?? 0, origin: origin, state: summary.standing.scheduled,
            contentLength: summary.contentLength)
    }

    /// The origin of the upload URL `url`, parsed once a URL (`found` keeps them): most queues send to one URL or a
    /// few.
    private static func origin(of url: String, in found: inout [String: Origin?]) -> Origin? {
        if let origin = found[url] { return origin }
        let origin = Origin(URL(string: url))
        found[url] = .some(origin)
        return origin
    }

    /// The row `id` that is no record, listed as failed.
    private static func damaged(_ id: String, reason: String) -> QueueSchedule.Upload {
        QueueSchedule.Upload(
            id: ID(rawValue: id), sequence: nil, key: nil, origin: nil,
            state: .failed(reason: "its record is damaged: \(reason)"), contentLength: 0)
    }

    /// The record of `upload`, whole; a damaged one has none.
    private func record(of upload: QueueSchedule.Upload) throws(QueueRecord.Damage) -> QueueRecord {
        guard upload.sequence != nil else { throw QueueRecord.Damage(reason: "it is no record") }
        return try store.read(upload.id.rawValue)
    }

    /// Every upload of the queue, in its order, each read from its row's columns without its form (``upload(_:)``
    /// reads one, ``forEachUpload(_:)`` one at a time).
    public var uploads: [Upload] {
        var all: [Upload] = []
        all.reserveCapacity(schedule.uploads.values.count)
        eachUpload { all.append($0) }
        return all
    }

    /// Calls `body` with every upload of the queue, in its order, one at a time: a listing of a hundred thousand
    /// holds one of them at a time, where ``uploads`` holds them all.
    public func forEachUpload(_ body: @Sendable (Upload) -> Void) {
        eachUpload(body)
    }

    private func eachUpload(_ body: (Upload) -> Void) {
        // One pass of the database's index of the order, which is the schedule's: no sorted copy of the queue.
        var damaged: [QueueSchedule.Upload] = []
        store.forEachListing { row, listing in
            let id: String
            switch row {
            case .record(let summary): id = summary.id
            case .damaged(let damaged, _): id = damaged
            }
            // A row another process wrote since this one last looked is listed once it is applied.
            guard let upload = schedule.uploads[ID(rawValue: id)] else { return }
            guard upload.sequence != nil else { return damaged.append(upload) }
            body(listed(upload, listing: listing))
        }
        // A row that is no record has no place in the order: last, as the schedule ranks it.
        for upload in damaged.sorted(by: { $0.rank < $1.rank }) { body(listed(upload, listing: nil)) }
    }

    /// The upload `id`, read from its row's columns; `nil` for one the queue does not hold.
    public func upload(_ id: ID) -> Upload? {
        schedule.uploads[id].map { listed($0, listing: $0.sequence == nil ? nil : store.listing(of: id.rawValue)) }
    }

    /// `upload` as the schedule has it and its row's columns say: a listing of a hundred thousand decodes no form.
    private func listed(_ upload: QueueSchedule.Upload, listing: QueueStore.Listing?) -> Upload {
        // Another process's run names itself in the record while it sends; one killed names a process gone.
        // This process knows what it sends: its own name in a record is a send that ended.
        let runner =
            upload.state == .running
            ? getpid() : listing?.runner.flatMap { $0 != getpid() && kill($0, 0) == 0 ? $0 : nil }
        let state = upload.state.published(runner: runner, listing: listing)
        return Upload(
            id: upload.id, key: upload.key, files: listing?.files.map { URL(fileURLWithPath: $0) } ?? [], state: state,
            url: listing?.url ?? store.url.appendingPathComponent(QueueStore.databaseName),
            added: listing?.added ?? .distantPast, contentLength: upload.contentLength,
            sentAgain: listing?.sentAgain ?? 0, runner: runner)
    }

    // MARK: Adding

    /// Adds an upload of `form` with `request` to the end of the queue, committed before it returns; with a `key`
    /// already in the queue, adds nothing and returns that upload's ID, and with one whose upload completed or was
    /// removed and has left the queue (``end(ofKey:)`` says which), adds nothing and returns that upload's ID, which
    /// ``upload(_:)`` no longer finds, unless `again`.
    ///
    /// The add outlives a kill or a crash of the process at any moment after it returns. It is not synced to the disk
    /// (a sync costs as long as a small upload): a power cut may lose the last adds, which an app that adds its files
    /// with their keys at launch adds again.
    ///
    /// A key makes adding safe to repeat: an app that adds every photo of a folder with the photo's own identifier as
    /// the key can add the folder again after a kill, or on every launch, and each photo is queued once, whatever
    /// state its upload is in, and once it completed or was removed: ``removeCompleted()`` and
    /// ``remove(_:on:headers:)`` clear the queue without the next launch's adds sending those photos again. The key of
    /// a removed upload is kept, with the removal, in the queue's database.
    ///
    /// - Parameters:
    ///   - form: The form: fields, data and file parts (a stream part cannot outlive the process).
    ///   - request: The request, without credentials (they go through the `headers` hook of
    ///     ``run(on:headers:pacing:)``).
    ///   - key: What identifies the upload for the caller (a file's path, a photo's identifier); `nil` adds every
    ///     time.
    ///   - again: Adds the upload even though the key's last upload completed or was removed (a user who asks to send
    ///     a photo again); a key in the queue still adds nothing.
    /// - Throws: ``MultipartStream/MultipartError/Reason/streamNotQueued`` naming a stream part, which cannot outlive the process;
    ///   ``MultipartStream/MultipartError/Reason/credentialNotQueued(_:)`` for a request that carries `Authorization`, `Cookie`,
    ///   `Proxy-Authorization` or a user and password in its URL (give them through the `headers` hook of
    ///   ``run(on:headers:pacing:)``); the form's ``MultipartStream/MultipartFormData/appendError``;
    ///   ``MultipartStream/MultipartError/Reason/stateUnwritable(_:errno:)`` when the record cannot be written (a full disk): then
    ///   nothing was added.
    public func add(
        _ form: MultipartFormData, with request: URLRequest, key: String? = nil, again: Bool = false
    ) async throws -> ID {
        if let key, let existing = upload(ofKey: key, again: again, removal: store.removal(ofKey: key)) {
            return existing
        }
        let record = try newRecord(NewUpload(form: form, request: request, key: key))
        // Committed to the write-ahead log, not synced: a commit there outlives a kill of the process (SQLite's WAL
        // with `synchronous = NORMAL`, what Android gives apps and WorkManager's enqueue relies on); a sync would cost
        // each add as long as a small upload, and only a power cut can lose it, which adding again by key restores.
        try store.write(record, syncing: false)
        enter([record])
        return ID(rawValue: record.id)
    }

    /// Adds many uploads to the end of the queue, in their order, all committed before it returns, in one
    /// transaction for the whole call rather than one an upload: a library of photos is added a thousand at a time.
    /// Not synced, as ``add(_:with:key:again:)`` says. Each upload's ID, in the order given; a key already in the queue, or
    /// earlier in the call, adds nothing and gives that upload's ID, and so does one whose upload completed or was
    /// removed, unless the upload says `again` (``NewUpload/again``).
    ///
    /// - Throws: What ``add(_:with:key:again:)`` throws, for the first upload that cannot be queued: then none of the call
    ///   is added.
    public func add(contentsOf uploads: [NewUpload]) async throws -> [ID] {
        // Which are new, in order, with their IDs and places; then their records, made on every core.
        var new: [(upload: NewUpload, id: String, sequence: Int)] = []
        var ids: [ID] = []
        var keyed: [String: ID] = [:]
        let now = clock.now()
        // The keys whose upload left the queue, asked of the database at once.
        let ended = store.removals(
            ofKeys: uploads.compactMap { upload in
                upload.key.flatMap { !upload.again && schedule.id(forKey: $0) == nil ? $0 : nil }
            })
        for upload in uploads {
            if let key = upload.key,
                let existing = keyed[key] ?? self.upload(ofKey: key, again: upload.again, removal: ended[key])
            {
                ids.append(existing)
                continue
            }
            let id = ID(rawValue: Self.newID(at: now))
            if let key = upload.key { keyed[key] = id }
            new.append((upload, id.rawValue, nextSequence + new.count))
            ids.append(id)
        }
        let made = try inParallel(new) { new throws(MultipartError) in
            try Self.newRecord(new.upload, id: new.id, sequence: new.sequence, at: now)
        }
        // One transaction: none of the call stays where a write failed. Not synced, as `add(_:with:key:again:)` says.
        try store.write(made, syncing: false)
        enter(made)
        return ids
    }

    /// The upload `key` names: the one in the queue; else, unless `again`, the last one with it that completed or
    /// was removed, and left, as `removal` finds it in the database (read only when needed).
    private func upload(
        ofKey key: String, again: Bool, removal: @autoclosure () -> (id: String, removed: QueueStore.Removed)?
    ) -> ID? {
        if let id = schedule.id(forKey: key) { return id }
        guard !again, let removed = removal() else { return nil }
        return ID(rawValue: removed.id)
    }

    /// How the last upload added with `key` ended, once it left the queue: ``KeyEnd/completed`` (the server has the
    /// form; cleared by ``removeCompleted()`` or ``remove(_:on:headers:)``) or ``KeyEnd/removed`` before it completed.
    /// `nil` for a key no upload that left had, or one in the queue now. Adding the key again adds nothing, unless
    /// asked to (``add(_:with:key:again:)``).
    public func end(ofKey key: String) -> KeyEnd? {
        guard schedule.id(forKey: key) == nil, let removed = store.removal(ofKey: key) else { return nil }
        return removed.removed == .removed ? .removed : .completed
    }

    /// The record of `upload` at the queue's end, checked as ``add(_:with:key:again:)`` says.
    private func newRecord(_ upload: NewUpload) throws -> QueueRecord {
        let now = clock.now()
        return try Self.newRecord(upload, id: Self.newID(at: now), sequence: nextSequence, at: now)
    }

    /// The record of `upload` as `id` at `sequence`, added `now`, checked as ``add(_:with:key:again:)`` says.
    private static func newRecord(
        _ upload: NewUpload, id: String, sequence: Int, at now: Date
    ) throws(MultipartError) -> QueueRecord {
        let stored = try QueueRecord.Form(upload.form)
        let storedRequest = try QueueRecord.Request(upload.request)
        if let appendError = upload.form.appendError { throw appendError }
        guard let length = upload.form.contentLength else { throw MultipartError(.streamNotQueued) }
        return QueueRecord(
            id: id, key: upload.key, sequence: sequence, added: now, request: storedRequest, form: stored,
            contentLength: length)
    }

    /// A new upload's ID: a UUID of version 7 (RFC 9562), whose first 48 bits are the time in milliseconds and next
    /// 12 a count within it, so that the IDs a process makes sort in the order made and a hundred thousand added go
    /// into the database's indexes at their ends rather than at random pages of them.
    static func newID(at now: Date = Date()) -> String {
        lastID.withLock { newID(at: now, after: &$0) }
    }

    /// The ID made at `now` after the one of time and count `last`, which it updates.
    static func newID(at now: Date, after last: inout IDClock) -> String {
        let time = UInt64(max(0, (now.timeIntervalSince1970 * 1_000).rounded(.down)))
        // The same millisecond, or a clock that went back, counts on; a count used up moves to the next.
        if time > last.milliseconds {
            last = IDClock(milliseconds: time, count: 0)
        } else if last.count < 0xFFF {
            last.count += 1
        } else {
            last = IDClock(milliseconds: last.milliseconds + 1, count: 0)
        }
        var bytes = UUID().uuid
        let (milliseconds, count) = (last.milliseconds, last.count)
        withUnsafeMutableBytes(of: &bytes) { raw in
            for place in 0..<6 { raw[place] = UInt8(truncatingIfNeeded: milliseconds >> (40 - 8 * UInt64(place))) }
            raw[6] = 0x70 | UInt8(count >> 8)
            raw[7] = UInt8(truncatingIfNeeded: count)
            raw[8] = 0x80 | raw[8] & 0x3F
        }
        return UUID(uuid: bytes).uuidString.lowercased()
    }

    /// The time and count of the last ID made.
    struct IDClock: Sendable {
        var milliseconds: UInt64 = 0
        var count: UInt16 = 0
    }

    /// This process's last ID.
    private static let lastID = LockedValue(IDClock())

    /// Puts `records`, on disk already, at the queue's end in their order: each URL's origin found once, and the
    /// progress, which tells its observers each time it changes, changed once.
    private func enter(_ records: [QueueRecord]) {
        var origins: [String: Origin?] = [:]
        var total: UInt64 = 0
        for record in records {
            nextSequence = max(nextSequence, record.sequence + 1)
            let summary = record.summary
            let upload = Self.upload(summary, origin: Self.origin(of: summary.url, in: &origins))
            schedule.add(upload)
            total &+= record.contentLength
            eventSink.yield(.added(upload.id))
        }
        progress.totalUnitCount += Int64(clamping: total)
        wake()
    }

    // MARK: Running

    /// Sends the queue's uploads, ``maximumConcurrentUploads`` at a time in the order added, until none is left to
    /// send: each completed or failed. An upload the network or the server fails for now (a dropped or refused
    /// connection, a timeout, a 408, 429 or 5xx, an outage longer than its retries) waits and goes again; cancel the
    /// task that runs the queue to stop it, and the uploads in flight are kept for the next run.
    ///
    /// - Parameters:
    ///   - session: The session the uploads go through.
    ///   - headers: Fresh headers for each request, credentials included, which the queue never writes.
    ///   - pacing: The rate of all the uploads in flight together (``pacing``, which can be changed while the run
    ///     goes); `nil` keeps ``pacing`` as it is, unlimited unless set.
    /// - Throws: ``MultipartStream/MultipartError/Reason/queueInUse(_:)`` when another process (or another `run` of this queue)
    ///   runs it; `CancellationError` when cancelled. An upload's own failure is its state, never thrown.
    public func run(
        on session: URLSession = .shared, headers: MultipartHeaders? = nil, pacing: MultipartPacing? = nil
    ) async throws {
        guard !isRunning else { throw MultipartError(.queueInUse(directory)) }
        if let pacing { self.pacing = pacing }
        let lock = try store.lock()
        running = (session, headers)
        var failure: (any Error)?
        do {
            try await drive(session: session, headers: headers)
        } catch {
            failure = error
        }
        // Uploads stopped by a cancel are pending again (paused, where the caller paused them): their saved state
        // resumes them.
        schedule.runEnded()
        cancels.removeAll()
        // A remove whose send's end the run did not record (none should be left) removes the upload now, before
        // another run can start it: no remove waits forever.
        for (id, waiting) in removers {
            var removal = Removal.removed
            if let upload = schedule.uploads[id] {
                removal = await removing(upload, session: session, headers: headers)
            }
            for remover in waiting { remover.resume(returning: removal) }
        }
        removers.removeAll()
        lock.release()
        running = nil
        if let failure { throw failure }
    }

    /// Starts uploads while there is room and one to start, and records each as it ends, until none is left.
    private func drive(session: URLSession, headers: MultipartHeaders?) async throws {
        try await withThrowingTaskGroup(of: Finished?.self) { group in
            // What other processes say (an add, a pause, a removal) reaches the run within `lookAgain`.
            group.addTask {
                // A cancel ends the sleep with an error, and the loop with it.
                while (try? await Task.sleep(nanoseconds: Self.lookAgain)) != nil {
                    await self.applyChanges()
                }
                return nil
            }
            // The one task that sleeps until the next upload's time comes, or a server is back.
            var sleeping: (alarm: Alarm, until: Date)?
            // The sends that ended, as they say it, and those the run took: sends that end together are taken
            // together, and their ends and the starts of the next written in one commit.
            let ended = LockedValue(0)
            var taken = 0
            while true {
                // One moment for both questions: what may start now, and else when to look again.
                let now = clock.now()
                // Cancelled, the run starts nothing more, and records how each upload in flight ended (an upload
                // may complete as the cancel comes) before it returns.
                if ended.withLock({ $0 }) == taken {
                    if !Task.isCancelled {
                        for job in startAll(at: now, session: session, headers: headers) {
                            group.addTask {
                                let finished = await job.send()
                                ended.withLock { $0 += 1 }
                                return finished
                            }
                        }
                    }
                    // The completions no start took with it.
                    _ = try? recordCompletions()
                }
                let inFlight = schedule.inFlight.count
                let time = schedule.nextWake(after: now)
                if sleeping == nil, !Task.isCancelled,
                    // While uploads run, the run sleeps too: a server's return or the caller's move starts uploads at
                    // once, and an upload's wait is looked at in its time, not when an upload in flight ends.
                    let until = time ?? (inFlight > 0 ? now.addingTimeInterval(3_600) : nil)
                {
                    let alarm = Alarm()
                    (sleeping, sleep) = ((alarm, until), (alarm, until))
                    sleeps += 1
                    group.addTask { [clock] in await Self.sleep(until: until, orUntil: alarm, on: clock) }
                }
                if let (alarm, until) = sleeping {
                    // An earlier time came up, or nothing is left to wait for: the sleep ends, to begin again.
                    if time.map({ $0 < until }) ?? (inFlight == 0) { alarm.ring() }
                } else if inFlight == 0 {
                    group.cancelAll()
                    try Task.checkCancellation()
                    return
                }
                switch try await group.next() {
                case .some(.some(let finished)):
                    taken += 1
                    await finish(finished, session: session, headers: headers)
                case .some(.none):
                    sleeping = nil
                case .none:
                    continue
                }
            }
        }
    }

    /// Sleeps until `time` on `clock`, `alarm` rings, or a cancel.
    private static func sleep(until time: Date, orUntil alarm: Alarm, on clock: QueueClock) async -> Finished? {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await clock.sleep(time) }
            group.addTask { await alarm.wait() }
            await group.next()
            group.cancelAll()
        }
        return nil
    }

    /// Ends the run's sleep, for it to look again at once.
    private func wake() {
        sleep?.alarm.ring()
    }

    /// The servers whose outage is under way, as their gates say: the uploads in flight to them see it first.
    private var outServers: Set<Origin> {
        Set(gates.filter { $0.value.isOut }.keys)
    }

    /// Ends the run's sleep early, once.
    private final class Alarm: Sendable {
        private struct Held {
            var rung = false
            var waiter: CheckedContinuation<Void, Never>?
        }
        private let held = LockedValue(Held())

        /// Waits until rung, or cancelled.
        func wait() async {
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let now = held.withLock { held -> Bool in
                        if held.rung { return true }
                        held.waiter = continuation
                        return false
                    }
                    if now { continuation.resume() }
                }
            } onCancel: {
                ring()
            }
        }

        func ring() {
            let waiter = held.withLock { held -> CheckedContinuation<Void, Never>? in
                held.rung = true
                defer { held.waiter = nil }
                return held.waiter
            }
            waiter?.resume()
        }
    }

    /// Sends a failed upload again: it goes back to pending, in its place in the queue, with its files as they are
    /// now. A file that changed since the upload was added, or was deleted and put back, is sent as it is now: the
    /// upload starts over with the file's new length and identity, and the next run deletes the server's upload of the
    /// old file (its saved state says where) before it sends the new one. An upload that has not failed is left as it
    /// is.
    ///
    /// - Throws: The file's error, naming the part (``MultipartStream/MultipartError/Reason/fileNotFound(_:)`` for one still
    ///   missing), and the upload stays failed; ``MultipartStream/MultipartError/Reason/stateUnwritable(_:errno:)`` when the record
    ///   cannot be written.
    public func retry(_ id: ID) throws {
        guard let upload = schedule.uploads[id], case .failed = upload.state, var record = try? record(of: upload)
        else { return }
        var changed = false
        for (place, part) in record.form.parts.enumerated() {
            guard let path = part.file else { continue }
            do throws(MultipartError.Reason) {
                let now = try FileIdentity.current(of: URL(fileURLWithPath: path))
                guard now != part.identity else { continue }
                record.form.parts[place].identity = now
                changed = true
            } catch {
                throw MultipartError(error, partIndex: place, partName: part.name)
            }
        }
        var length = record.contentLength
        if changed {
            guard let rebuilt = try record.form.rebuilt()?.contentLength else {
                throw MultipartError(.stateUnwritable(store.url.appendingPathComponent(record.id), errno: EINVAL))
            }
            length = rebuilt
        }
        // The saved state stays: it is of the old file, and the next run, finding the form changed, deletes the
        // server's upload of it and starts over.
        try changeRecord(of: upload) { () throws(MultipartError) in
            try store.rewrite(id.rawValue) {
                if changed {
                    $0.form.parts = record.form.parts
                    $0.contentLength = length
                    // Another form for the server: a key of its own.
                    $0.state.generation = ($0.state.generation ?? 0) + 1
                }
                $0.state.outcome = nil
            }
        }
        if changed {
            progress.totalUnitCount += Int64(clamping: length) - Int64(clamping: record.contentLength)
            let sent = min(upload.sent, length.subtractingSaturated(1))
            inFlightBytes -= min(inFlightBytes, upload.sent - sent)
            schedule.update(id) { ($0.sent, $0.contentLength) = (sent, length) }
        }
        schedule.retry(id)
        eventSink.yield(.retried(id))
        wake()
    }

    /// Removes an upload from the queue and its record from disk, and says whether the server has its form. One that
    /// has not completed is given up: cancelled if it runs, and its upload resource on the server deleted (through
    /// `session`, with `headers`); this returns once its send has stopped, and no byte of it goes again. One that
    /// completed, or completed as the remove came, is the server's: ``Removal/completed(_:)`` says so, and nothing is
    /// deleted there.
    ///
    /// While another process runs the queue, that run stops and deletes the upload, as its own remove would, and this
    /// returns once it has (within a few seconds; ``Removal/asked`` where it has not yet, or at once when the task
    /// that waits is cancelled: the removal stays asked, and that run carries it out).
    @discardableResult
    public func remove(_ id: ID, on session: URLSession = .shared, headers: MultipartHeaders? = nil) async -> Removal {
        guard let upload = schedule.uploads[id] else { return .notInQueue }
        if schedule.stop(id, for: .remove) {
            cancels[id]?.cancel()
            // Its send's end removes it, and says how (``finish(_:session:headers:)``).
            return await withCheckedContinuation { removers[id, default: []].append($0) }
        }
        // This process's run, or none: the lock keeps another from starting while this one removes.
        let lock = isRunning ? nil : try? store.lock()
        if isRunning || lock != nil {
            let removal = await removing(upload, session: session, headers: headers)
            lock?.release()
            return removal
        }
        // Another process runs the queue: it may be sending this upload, with its saved state.
        if (try? change(upload, { $0.removing = true })) != nil {
            let deadline = clock.now().addingTimeInterval(Self.removalWait)
            // The clock's sleep returns at once when cancelled, and would spin here until the deadline: a cancel ends
            // the wait.
            while !Task.isCancelled, clock.now() < deadline, store.listing(of: id.rawValue) != nil {
                await clock.sleep(min(deadline, clock.now().addingTimeInterval(0.02)))
            }
            guard store.listing(of: id.rawValue) == nil else { return .asked }
        }
        if let upload = schedule.remove(id) { ended(upload) }
        switch store.removal(of: id.rawValue) {
        case .completed(let answer)?:
            return .completed(answer.map(Answer.init) ?? Answer(statusCode: nil, headers: [:], body: Data()))
        case .removed?, nil:
            return .removed
        }
    }

    /// Removes `upload`, not in flight, as ``remove(_:on:headers:)`` says.
    private func removing(
        _ upload: QueueSchedule.Upload, session: URLSession, headers: MultipartHeaders?
    ) async -> Removal {
        let answer =
            upload.state == .completed ? store.listing(of: upload.id.rawValue)?.answer.map(Answer.init) : nil
        await forget(upload, session: session, headers: headers, givingUp: upload.state != .completed)
        return answer.map(Removal.completed) ?? .removed
    }

    /// The removes that wait for an upload's send to end, by its ID.
    private var removers: [ID: [CheckedContinuation<Removal, Never>]] = [:]

    /// How long a remove waits for another process's run to stop and delete the upload: its look for changes, a
    /// cancel, and the server's `DELETE`.
    static let removalWait: TimeInterval = 10

    /// Pauses an upload that has not ended: it stays as it is, in this process and the next, until ``resume(_:)``;
    /// one that runs is stopped, its saved state kept for the resume. A ``run(on:headers:pacing:)`` returns once every
    /// upload is completed, failed or paused. An upload whose ``remove(_:on:headers:)`` is under way is removed all
    /// the same.
    ///
    /// - Throws: ``MultipartStream/MultipartError/Reason/stateUnwritable(_:errno:)`` when the record cannot be written: then nothing
    ///   changed.
    public func pause(_ id: ID) throws {
        // One being removed stays so: its record goes, and its remover waits for the send's end.
        guard let upload = schedule.uploads[id], upload.stopping != .remove else { return }
        switch upload.state {
        case .completed, .failed, .paused: return
        case .pending, .waiting, .running: break
        }
        try change(upload) { $0.paused = true }
        if schedule.pause(id) { cancels[id]?.cancel() }
        eventSink.yield(.paused(id))
    }

    /// Changes the state of `upload`'s record as it stands on disk.
    private func change(_ upload: QueueSchedule.Upload, _ change: (inout QueueRecord.State) -> Void) throws {
        try changeRecord(of: upload) { () throws(MultipartError) in try store.update(upload.id.rawValue, change) }
    }

    /// Writes `upload`'s record with `write`, which gives `nil` where the record is gone: an error then.
    private func changeRecord<Written>(
        of upload: QueueSchedule.Upload, _ write: () throws(MultipartError) -> Written?
    ) throws {
        let unwritable = MultipartError.Reason.stateUnwritable(
            store.url.appendingPathComponent(QueueStore.databaseName), errno: EINVAL)
        guard upload.sequence != nil else { throw MultipartError(unwritable) }
        guard try write() != nil else {
            throw MultipartError(unwritable, underlying: QueueRecord.Damage(reason: "it is gone", gone: true))
        }
    }

    /// Resumes a paused upload: it goes again in its place in the queue, from where the server stands, at once if
    /// the queue runs.
    ///
    /// - Throws: ``MultipartStream/MultipartError/Reason/stateUnwritable(_:errno:)`` when the record cannot be written.
    public func resume(_ id: ID) throws {
        // A pause that has not yet stopped the upload is taken back too, on disk as here.
        guard let upload = schedule.uploads[id], schedule.isPaused(id) else { return }
        try change(upload) { $0.paused = nil }
        if schedule.resume(id) { wake() }
        eventSink.yield(.resumed(id))
    }

    /// Moves an upload to the front of the queue, in this process and the next: it is the next to start (an upload
    /// moved later goes before it).
    ///
    /// - Throws: ``MultipartStream/MultipartError/Reason/stateUnwritable(_:errno:)`` when the record cannot be written.
    public func prioritize(_ id: ID) throws {
        guard let upload = schedule.uploads[id], upload.sequence != nil else { return }
        let priority = schedule.frontPriority
        try change(upload) { $0.priority = priority }
        schedule.prioritize(id)
        eventSink.yield(.prioritized(id))
        wake()
    }

    /// Removes every completed upload from the queue, its record and saved state: what a backup that went through
    /// leaves behind. Uploads in any other state stay.
    public func removeCompleted() async {
        // One pass for all of them: a hundred thousand go at once.
        let removed = schedule.removeCompleted()
        store.removeRecords(removed.map(\.id.rawValue))
        for upload in removed {
            store.removeState(of: upload.id.rawValue)
            eventSink.yield(.removed(upload.id))
        }
    }

    // MARK: The run's steps

    /// The uploads whose turn it is at `now`, each marked running, their starts written in one transaction with the
    /// completions that wait (uploads that ended together start their successors in one commit). Uploads whose wait
    /// ended while their server is still out say their new wait.
    private func startAll(at now: Date, session: URLSession, headers: MultipartHeaders?) -> [Job] {
        let out = outServers
        for (id, until) in schedule.due(at: now, out: out) { eventSink.yield(.waiting(id, until: until)) }
        var jobs: [Job] = []
        // An upload whose record cannot be read or written, or makes no form, fails, and the next is tried.
        while true {
            var starting: [(id: ID, speaksNone: Bool, whole: Bool)] = []
            while let next = schedule.next(at: now, out: out) {
                for (id, until) in next.parked { eventSink.yield(.waiting(id, until: until)) }
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
    private func start(
        _ id: ID, as found: QueueRecord.State?, speaksNone: Bool, whole: Bool, session: URLSession,
        headers: MultipartHeaders?
    ) -> Job? {
        guard let upload = schedule.uploads[id] else { return nil }
        var record: QueueRecord
        do {
            // Removed by another process since the queue last looked: it goes without a byte sent.
            guard let found else { return dropping(id) }
            record = try store.read(id.rawValue)
            record.state = found
        } catch {
            if error.gone { return dropping(id) }
            return failing(id, because: Failure(reason: "its record cannot be read: \(error.reason)"))
        }
        // Its start counted, where it was written: a run before started it.
        let startedBefore = record.state.starts > 1
        // Its removal asked for by another process since the queue last looked: removed, not started.
        if record.state.removing == true {
            _ = schedule.pause(id)
            _ = schedule.finished(id, .stopped, speaksNone: false, at: clock.now())
            Task { await self.removeAsked(id) }
            return nil
        }
        // Paused by another process since the queue last looked: it stays as it is.
        if record.state.paused == true {
            _ = schedule.pause(id)
            _ = schedule.finished(id, .stopped, speaksNone: false, at: clock.now())
            return nil
        }
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
        eventSink.yield(.started(id))
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

    /// An upload the schedule started whose record another process removed: gone from the queue, `nil`, for the next
    /// to be tried. The process that removed it deleted its upload resource.
    private func dropping(_ id: ID) -> Job? {
        _ = schedule.stop(id, for: .remove)
        _ = schedule.finished(id, .stopped, speaksNone: false, at: clock.now())
        if let upload = schedule.remove(id) { ended(upload) }
        return nil
    }

    /// An upload gone from the queue, which every reader of ``events`` hears, counts as done: the caller gave it up.
    private func ended(_ upload: QueueSchedule.Upload) {
        if upload.state != .completed {
            inFlightBytes -= min(inFlightBytes, upload.sent)
            endedBytes += upload.contentLength
        }
        eventSink.yield(.removed(upload.id))
        report()
    }

    /// Applies what other processes wrote since the queue last looked, as their calls here would have: an added
    /// upload joins, a paused or removed one that has not started never starts and one under way is stopped (a
    /// removed one is deleted on the server as it ends), a resumed, retried or moved one goes as it says. What this
    /// process wrote comes back too, and changes nothing.
    func applyChanges() async {
        guard let (version, written, removed) = store.changes(since: seenVersion) else { return }
        seenVersion = version
        for case .record(let summary) in written { await apply(summary) }
        for id in removed.map(ID.init(rawValue:)) {
            guard schedule.uploads[id] != nil else { continue }
            if schedule.stop(id, for: .remove) {
                cancels[id]?.cancel()
            } else if let upload = schedule.remove(id) {
                ended(upload)
            }
        }
    }

    private func apply(_ summary: QueueRecord.Summary) async {
        let id = ID(rawValue: summary.id)
        guard let upload = schedule.uploads[id] else {
            let added = Self.upload(summary, origin: Origin(URL(string: summary.url)))
            nextSequence = max(nextSequence, summary.sequence + 1)
            schedule.add(added)
            progress.totalUnitCount += Int64(clamping: added.contentLength)
            if added.state == .completed { endedBytes += added.contentLength }
            eventSink.yield(.added(id))
            wake()
            return
        }
        if (summary.priority ?? 0) > upload.rank.priority {
            schedule.prioritize(id)
            eventSink.yield(.prioritized(id))
            wake()
        }
        switch summary.standing {
        case .removing:
            if schedule.stop(id, for: .remove) {
                cancels[id]?.cancel()
            } else {
                await removeAsked(id)
            }
        case .paused where !schedule.isPaused(id):
            if schedule.pause(id) { cancels[id]?.cancel() }
            eventSink.yield(.paused(id))
        case .paused:
            break
        case .pending where upload.isInFlight:
            // Its own send's write, or a resume of a pause not yet taken: the send's end decides.
            break
        case .pending:
            if schedule.isPaused(id) {
                if schedule.resume(id) { wake() }
                eventSink.yield(.resumed(id))
            } else if case .failed = upload.state {
                let length = summary.contentLength
                progress.totalUnitCount += Int64(clamping: length) - Int64(clamping: upload.contentLength)
                schedule.update(id) {
                    ($0.sent, $0.contentLength) = (min($0.sent, length.subtractingSaturated(1)), length)
                }
                schedule.retry(id)
                eventSink.yield(.retried(id))
                wake()
            }
        case .completed, .failed:
            break
        }
    }

    /// Removes the upload `id`, not in flight, whose removal another process asked for, as its remove would have.
    private func removeAsked(_ id: ID) async {
        guard let upload = schedule.uploads[id], !upload.isInFlight, let (session, headers) = running else { return }
        await forget(upload, session: session, headers: headers, givingUp: upload.state != .completed)
    }

    /// An upload the schedule started fails before its send: `nil`, for the next to be tried.
    private func failing(_ id: ID, because failure: Failure) -> Job? {
        _ = schedule.finished(id, .failed(reason: failure.reason), speaksNone: false, at: clock.now())
        fail(id, because: failure)
        return nil
    }

    /// An upload in flight waits between its own tries until `until`, said at once (`waiting`, and its event), or
    /// (`nil`) tries again. `turn` orders one send's reports, which reach the queue each on a task of its own.
    private func inFlight(_ id: ID, waitsUntil until: Date?, turn: Int) {
        if case .waiting(let until)? = schedule.inFlight(id, waitsUntil: until, turn: turn) {
            eventSink.yield(.waiting(id, until: until))
            // The run looks again then: one still parked at its server's outage gate says when it next tries.
            if let sleep, until.addingTimeInterval(QueueSchedule.parkedAfter) < sleep.until { sleep.alarm.ring() }
        }
    }

    /// An upload found what `origin`'s server speaks: the next uploads to it go without asking.
    private func learned(_ server: ResumableUpload.KnownServer, for origin: Origin) {
        guard knownServers[origin.serialized] != server else { return }
        knownServers[origin.serialized] = server
        store.keep(server, for: origin.serialized)
    }

    /// The gate of `origin`'s uploads, made at its first upload.
    private func gate(_ origin: Origin) -> OutageGate {
        if let gate = gates[origin] { return gate }
        let gate = OutageGate { [weak self] in Task { await self?.outageEnded(at: origin) } }
        gates[origin] = gate
        return gate
    }

    /// The discovery gate of `origin`'s uploads, made at its first upload.
    private func discovery(_ origin: Origin) -> DiscoveryGate {
        if let gate = discoveries[origin] { return gate }
        let gate = DiscoveryGate()
        discoveries[origin] = gate
        return gate
    }

    /// A server is back: its uploads that wait go now.
    private func outageEnded(at origin: Origin) {
        schedule.serverBack(origin)
        wake()
    }

    private func sent(_ bytes: UInt64, by id: ID) {
        guard let upload = schedule.uploads[id], upload.isInFlight else { return }
        let length = upload.contentLength
        // Its last byte counts when the server's answer says it has the form: a form handed out whole and refused
        // keeps the queue short of done.
        let counted = min(bytes, length.subtractingSaturated(1))
        if counted > upload.sent {
            inFlightBytes += counted - upload.sent
            schedule.update(id) { $0.sent = counted }
            report()
        }
        // After the progress, which a reader of the event finds up to date.
        eventSink.yield(.progress(id, bytesSent: bytes, of: length))
    }

    /// Sets the progress from what ended and what is in flight: never less than before.
    private func report() {
        let completed = Int64(clamping: endedBytes + inFlightBytes)
        if completed > progress.completedUnitCount { progress.completedUnitCount = completed }
    }

    /// Records how an upload's send ended, as the schedule says.
    private func finish(_ finished: Finished, session: URLSession, headers: MultipartHeaders?) async {
        cancels[finished.id] = nil
        guard let upload = schedule.uploads[finished.id] else { return }
        let outcome: QueueSchedule.Outcome =
            switch finished.outcome {
            case .completed: .completed
            case .failed(let failure): .failed(reason: failure.reason)
            case .waiting(let outage): .waiting(outage: outage)
            case .stopped: .stopped
            }
        // A server that went whole speaks no draft now, whatever an earlier upload found.
        if finished.speaksNone, let origin = upload.origin?.serialized, knownServers[origin] != nil {
            knownServers[origin] = nil
            store.forgetServer(origin)
        }
        guard let ending = schedule.finished(finished.id, outcome, speaksNone: finished.speaksNone, at: clock.now())
        else {
            return
        }
        let gate = upload.origin.flatMap { gates[$0] }
        switch ending {
        case .forget:
            // A send that completed as the remove came leaves the form to the server, and the remove says so.
            var answer: Answer?
            if case .completed(let completed) = finished.outcome { answer = completed }
            // Its record as the send had it: another process's remove took the one on disk.
            await forget(
                upload, session: session, headers: headers, givingUp: answer == nil, record: finished.record)
            for remover in removers.removeValue(forKey: finished.id) ?? [] {
                remover.resume(returning: answer.map(Removal.completed) ?? .removed)
            }
        case .paused:
            // Its saved state kept: the server's word, and its own, come at the resume.
            _ = try? write([(finished.id, .paused)])
        case .completed:
            // A server that speaks no draft says it is back this way.
            gate?.answered()
            // Written with the next start, in one commit (``recordCompletions(with:)``).
            if case .completed(let answer) = finished.outcome { completing.append((upload, answer)) }
        case .failed(let reason):
            // The upload's own failure, whole; the schedule keeps its words.
            if case .failed(let failure) = finished.outcome {
                fail(finished.id, because: failure)
            } else {
                fail(finished.id, because: Failure(reason: reason))
            }
        case .waiting(let until):
            if case .waiting(outage: true) = outcome { gate?.markOut() } else { gate?.answered() }
            _ = try? write([(finished.id, .stopped)])
            eventSink.yield(.waiting(finished.id, until: until))
        case .pending:
            // Stopped by a cancel: its record no longer names this process.
            _ = try? write([(finished.id, .stopped)])
        }
    }

    /// Writes the uploads that completed since the last write as completed, with `starts` (the next uploads' starts)
    /// in the same transaction, not synced: a power cut that loses one sends the form again, under the same key, and
    /// counts it. Then each completed upload's saved state goes, and its event: a kill before the write resumes it,
    /// and the server says it has the form. The state each start wrote, or found and left, in order; `nil` for an
    /// upload gone.
    ///
    /// - Throws: The starts' failure to write; the completions are written alone then.
    @discardableResult
    private func recordCompletions(with starts: [(ID, QueueRecord.Change)] = []) throws -> [QueueRecord.State?] {
        let ended = completing
        completing = []
        let changes = ended.map { upload, answer in (upload.id, QueueRecord.Change.completed(answer.stored)) }
        guard !changes.isEmpty || !starts.isEmpty else { return [] }
        var written: [QueueRecord.State?] = []
        var failure: (any Error)?
        do {
            written = try write(changes + starts)
        } catch {
            failure = error
            if !starts.isEmpty { written = (try? write(changes)) ?? [] }
        }
        for (index, (upload, answer)) in ended.enumerated() {
            if index < written.count, written[index] != nil { store.removeState(of: upload.id.rawValue) }
            inFlightBytes -= min(inFlightBytes, upload.sent)
            endedBytes += upload.contentLength
            report()
            eventSink.yield(.completed(upload.id, answer))
        }
        if let failure, !starts.isEmpty { throw failure }
        return Array(written.dropFirst(changes.count))
    }

    /// Writes the run's `changes` of records in one transaction, synced where one of them is: the run's one way to
    /// change a record. The state each wrote, or found and left, in order; `nil` for an upload gone.
    private func write(_ changes: [(id: ID, change: QueueRecord.Change)]) throws -> [QueueRecord.State?] {
        try store.update(
            changes.map { id, change in
                QueueStore.StateChange(id: id.rawValue, declines: change.declines, change: change.apply)
            },
            syncing: changes.contains { $0.change.isSynced })
    }

    /// The upload failed, and its record says so (where it can be read).
    private func fail(_ id: ID, because failure: Failure) {
        // What it handed out stays counted, and what it did not keeps the progress short of done.
        if schedule.uploads[id]?.sequence != nil { _ = try? write([(id, .failed(failure))]) }
        eventSink.yield(.failed(id, failure))
    }

    /// Removes `upload`'s record and state; `givingUp` an upload that has not completed deletes its upload resource.
    private func forget(
        _ upload: QueueSchedule.Upload, session: URLSession, headers: MultipartHeaders?, givingUp: Bool,
        record known: QueueRecord? = nil
    ) async {
        let record = givingUp ? known ?? (try? record(of: upload)) : nil
        schedule.remove(upload.id)
        store.removeRecord(upload.id.rawValue)
        if let record, let form = try? record.form.rebuilt() {
            var policy = MultipartResumption()
            policy.stateDirectory = store.stateDirectory(of: upload.id.rawValue)
            _ = try? await session.abandonUpload(
                form, with: record.request.urlRequest, resumption: policy, headers: headers)
        }
        store.removeState(of: upload.id.rawValue)
        ended(upload)
    }
}
