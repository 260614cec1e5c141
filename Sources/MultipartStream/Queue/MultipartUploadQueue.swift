import Foundation

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
/// Each upload is on disk before ``add(_:with:key:)`` returns: what rebuilds its form byte for byte (fields, data and
/// file parts by path with the file's identity, custom part headers), and the request without credentials, which go
/// through the `headers` hook of ``run(on:headers:)`` and are never written. ``run(on:headers:)`` sends the uploads
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
    /// logger read theirs at once. Read it before ``run(on:headers:)`` starts to see every event of the run.
    public nonisolated var events: AsyncStream<Event> { eventSink.stream() }

    private let eventSink = EventBroadcast<Event>()
    /// How each upload retries before it waits in the queue.
    private let resumption: MultipartResumption
    private let store: SavedUploadDirectory
    private var entries: [Entry] = [] {
        didSet { if entries.count != index.count { reindex() } }
    }
    /// Where each upload is in ``entries``.
    private var index: [ID: Int] = [:]
    /// The upload of each key.
    private var keys: [String: ID] = [:]
    /// No upload before this place in ``entries`` is pending: where the search for the next one starts.
    private var cursor = 0
    /// The uploads that wait, until when.
    private var waiting: [ID: Date] = [:]
    /// The bytes handed out by uploads that have not completed.
    private var inFlightBytes: UInt64 = 0
    private var nextSequence = 0
    private var isRunning = false
    /// The bytes of uploads that completed or were removed, which progress never takes back.
    private var endedBytes: UInt64 = 0
    /// The origins found to speak no version of the draft: one probe for a server, not one an upload.
    private var plainOrigins: Set<Origin> = []
    /// Each server's outage, which the uploads to it wait out together.
    private var servers: [Origin: Server] = [:]
    /// Wakes the run's sleep early, when a server's outage ends.
    private var alarm: Alarm?
    /// How many times the run slept: a few for each wait, never a loop.
    private(set) var sleeps = 0

    /// What the queue knows of one server.
    private struct Server {
        /// Where the uploads to it wait out an outage together.
        var gate: OutageGate
        /// Its uploads in flight.
        var running = 0
        /// When an upload may next start to probe it, after an outage ended an upload.
        var probe: Date?
    }

    /// One upload as the queue holds it.
    private struct Entry {
        var id: ID
        /// The record; `nil` for a file that could not be read, listed as failed.
        var record: QueueRecord?
        var file: URL
        var state: State
        /// The most bytes of the form this upload handed out, counted in the queue's progress: at most all but the last
        /// until it completes.
        var sent: UInt64 = 0
        /// Cancels the upload under way.
        var cancel: CancelHandle?
        /// Whether the caller removed it while it ran.
        var removing = false
        /// Whether the caller paused it while it ran.
        var pausing = false
        /// The last of its send's reports of a wait between its own tries that was applied: they come in order.
        var waitReports = 0

        /// Whether a send of it is under way: `running`, or `waiting` between the tries of its own retries.
        var isInFlight: Bool { cancel != nil }

        /// Where its requests go.
        var origin: Origin? { record.flatMap { Origin($0.request.url) } }

        var isCompleted: Bool {
            if case .completed = state { return true }
            return false
        }
    }

    /// The queue kept in `directory`, made if it does not exist (owned by this user, not writable by others), with
    /// every upload an earlier process added. A record that cannot be read is listed as a failed upload.
    ///
    /// - Parameters:
    ///   - directory: Where the queue is kept: a directory of the app's own (Application Support, or
    ///     `$XDG_STATE_HOME`).
    ///   - maximumConcurrentUploads: How many uploads go at once: 3 unless set, at least 1.
    ///   - resumption: How each upload retries before it waits in the queue (the defaults wait out 3 minutes at
    ///     least), and a stall; its state directory is the queue's own, and its `events` hear every upload's. Its ``MultipartResumption/maximumDelay``
    ///     is also how often the queue probes a server whose outage outlasted those retries.
    /// - Throws: ``MultipartError/Reason/stateUnwritable(_:errno:)`` for a directory that cannot be made or is
    ///   another user's.
    public init(
        directory: URL, maximumConcurrentUploads: Int = 3, resumption: MultipartResumption = MultipartResumption()
    ) throws {
        self.directory = directory
        self.maximumConcurrentUploads = max(1, maximumConcurrentUploads)
        self.resumption = resumption
        store = SavedUploadDirectory(directory, interopVersions: [])
        try store.prepare()
        var loaded: [Entry] = []
        var seen: Set<String> = []
        let files =
            (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? []
        let recordFiles = files.filter { $0.pathExtension == "json" }
        for file in recordFiles.sorted(by: { $0.lastPathComponent < $1.lastPathComponent }) {
            let name = file.deletingPathExtension().lastPathComponent
            do throws(QueueRecord.Damage) {
                let record = try QueueRecord.read(file)
                guard seen.insert(record.id).inserted else {
                    throw QueueRecord.Damage(reason: "another record has its ID")
                }
                var entry = Entry(id: ID(rawValue: record.id), record: record, file: file, state: .pending)
                switch record.outcome {
                case .completed(let answer)?: entry.state = .completed(Answer(answer))
                case .failed(let reason)?: entry.state = .failed(reason: reason)
                case nil: if record.paused == true { entry.state = .paused }
                }
                loaded.append(entry)
                nextSequence = max(nextSequence, record.sequence + 1)
            } catch {
                loaded.append(
                    Entry(
                        id: ID(rawValue: name), file: file,
                        state: .failed(reason: "its record \(file.lastPathComponent) is damaged: \(error.reason)")))
            }
        }
        // The caller's moves first (the latest first), then the order added, which the file names keep.
        loaded = loaded.enumerated().sorted { first, second in
            let (one, other) = (first.element.record?.priority ?? 0, second.element.record?.priority ?? 0)
            return one != other ? one > other : first.offset < second.offset
        }.map(\.element)
        entries = loaded
        index = Dictionary(loaded.enumerated().map { ($0.element.id, $0.offset) }) { first, _ in first }
        // Two records of one key (two processes that added it at once) stay two uploads; the first answers for it.
        keys = Dictionary(loaded.compactMap { entry in entry.record?.key.map { ($0, entry.id) } }) { first, _ in first }
        let total = loaded.reduce(UInt64(0)) { $0 + ($1.record?.contentLength ?? 0) }
        let ended = loaded.reduce(UInt64(0)) { $0 + ($1.isCompleted ? ($1.record?.contentLength ?? 0) : 0) }
        endedBytes = ended
        progress = Progress(totalUnitCount: Int64(clamping: total))
        progress.completedUnitCount = Int64(clamping: ended)
    }

    deinit {
        // Readers' loops end with the queue.
        eventSink.finish()
    }

    /// Rebuilds ``index`` after an upload was removed or added.
    private func reindex() {
        index = Dictionary(entries.enumerated().map { ($0.element.id, $0.offset) }) { first, _ in first }
        cursor = min(cursor, entries.count)
    }

    /// Every upload of the queue, in its order.
    public var uploads: [Upload] {
        entries.map { entry in
            Upload(
                id: entry.id, key: entry.record?.key, files: entry.record?.files ?? [], state: entry.state,
                url: entry.record?.request.url ?? entry.file,
                added: entry.record?.added ?? .distantPast, contentLength: entry.record?.contentLength ?? 0,
                sentAgain: entry.record?.sentAgain ?? 0)
        }
    }

    // MARK: Adding

    /// Adds an upload of `form` with `request` to the end of the queue, on disk before it returns; with a `key`
    /// already in the queue, adds nothing and returns that upload's ID.
    ///
    /// A key makes adding safe to repeat: an app that adds every photo of a folder with the photo's own identifier as
    /// the key can add the folder again after a kill, or on every launch, and each photo is queued once, whatever
    /// state its upload is in, until it is removed.
    ///
    /// - Parameters:
    ///   - form: The form: fields, data and file parts (a stream part cannot outlive the process).
    ///   - request: The request, without credentials (they go through the `headers` hook of
    ///     ``run(on:headers:)``).
    ///   - key: What identifies the upload for the caller (a file's path, a photo's identifier); `nil` adds every
    ///     time.
    /// - Throws: ``MultipartError/Reason/streamNotQueued`` naming a stream part, which cannot outlive the process;
    ///   ``MultipartError/Reason/credentialNotQueued(_:)`` for a request that carries `Authorization`, `Cookie`,
    ///   `Proxy-Authorization` or a user and password in its URL (give them through the `headers` hook of
    ///   ``run(on:headers:)``); the form's ``MultipartFormData/appendError``;
    ///   ``MultipartError/Reason/stateUnwritable(_:errno:)`` when the record cannot be written (a full disk): then
    ///   nothing was added.
    public func add(_ form: MultipartFormData, with request: URLRequest, key: String? = nil) async throws -> ID {
        if let key, let existing = keys[key] { return existing }
        let record = try newRecord(NewUpload(form: form, request: request, key: key))
        try record.write(to: store)
        return enter(record)
    }

    /// Adds many uploads to the end of the queue, in their order, all on disk before it returns, in a few synced
    /// writes for the whole call rather than one an upload: a library of photos is added a thousand at a time. Each
    /// upload's ID, in the order given; a key already in the queue, or earlier in the call, adds nothing and gives
    /// that upload's ID.
    ///
    /// - Throws: What ``add(_:with:key:)`` throws, for the first upload that cannot be queued: then none of the call
    ///   is added.
    public func add(contentsOf uploads: [NewUpload]) async throws -> [ID] {
        var made: [QueueRecord] = []
        var ids: [ID] = []
        var keyed: [String: ID] = [:]
        for upload in uploads {
            if let key = upload.key, let existing = keys[key] ?? keyed[key] {
                ids.append(existing)
                continue
            }
            let record = try newRecord(upload, sequence: nextSequence + made.count)
            let id = ID(rawValue: record.id)
            if let key = upload.key { keyed[key] = id }
            made.append(record)
            ids.append(id)
        }
        // Unsynced, then the file system flushed once: none of the call stays where a write failed.
        var written = 0
        do {
            for record in made {
                try record.write(to: store, syncing: false)
                written += 1
            }
            try store.syncEverything()
        } catch {
            for record in made.prefix(written) {
                try? FileManager.default.removeItem(at: directory.appendingPathComponent(record.fileName))
            }
            throw error
        }
        for record in made { _ = enter(record) }
        return ids
    }

    /// The record of `upload` at the queue's end (or at `sequence`), checked as ``add(_:with:key:)`` says.
    private func newRecord(_ upload: NewUpload, sequence: Int? = nil) throws -> QueueRecord {
        let stored = try QueueRecord.Form(upload.form)
        let storedRequest = try QueueRecord.Request(upload.request)
        if let appendError = upload.form.appendError { throw appendError }
        guard let length = upload.form.contentLength else { throw MultipartError(.streamNotQueued) }
        return QueueRecord(
            id: UUID().uuidString.lowercased(), key: upload.key, sequence: sequence ?? nextSequence, added: Date(),
            request: storedRequest, form: stored, contentLength: length)
    }

    /// Puts `record`, on disk already, at the queue's end.
    private func enter(_ record: QueueRecord) -> ID {
        nextSequence = max(nextSequence, record.sequence + 1)
        let id = ID(rawValue: record.id)
        if let key = record.key { keys[key] = id }
        let file = directory.appendingPathComponent(record.fileName)
        index[id] = entries.count
        entries.append(Entry(id: id, record: record, file: file, state: .pending))
        progress.totalUnitCount += Int64(clamping: record.contentLength)
        eventSink.yield(.added(id))
        return id
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
    /// - Throws: ``MultipartError/Reason/queueInUse(_:)`` when another process (or another `run` of this queue)
    ///   runs it; `CancellationError` when cancelled. An upload's own failure is its state, never thrown.
    public func run(on session: URLSession = .shared, headers: MultipartHeaders? = nil) async throws {
        guard !isRunning else { throw MultipartError(.queueInUse(directory)) }
        let lock = try takeLock()
        isRunning = true
        var failure: (any Error)?
        do {
            try await drive(session: session, headers: headers)
        } catch {
            failure = error
        }
        lock.release()
        isRunning = false
        // Uploads stopped by a cancel are pending again (paused, where the caller paused them): their saved state
        // resumes them.
        for index in entries.indices where entries[index].isInFlight || entries[index].state == .running {
            entries[index].state = entries[index].pausing ? .paused : .pending
            (entries[index].cancel, entries[index].pausing) = (nil, false)
            cursor = min(cursor, index)
        }
        if let failure { throw failure }
    }

    /// The queue's lock, which one process at a time holds while it runs the queue.
    private func takeLock() throws(MultipartError) -> SavedUploadLock {
        do {
            return try store.lock("queue")
        } catch {
            if case .uploadInProgress = error.reason { throw MultipartError(.queueInUse(directory)) }
            throw error
        }
    }

    /// Starts uploads while there is room and one to start, and records each as it ends, until none is left.
    private func drive(session: URLSession, headers: MultipartHeaders?) async throws {
        try await withThrowingTaskGroup(of: Finished?.self) { group in
            var inFlight = 0
            // The one task that sleeps until the next upload's time comes, or a server is back.
            var sleeping: (alarm: Alarm, until: Date)?
            while true {
                // One moment for both questions: what may start now, and else when to look again.
                let now = Date()
                // Cancelled, the run starts nothing more, and records how each upload in flight ended (an upload
                // may complete as the cancel comes) before it returns.
                while !Task.isCancelled, inFlight < maximumConcurrentUploads,
                    let job = startNext(at: now, session: session, headers: headers)
                {
                    group.addTask { await job.send() }
                    inFlight += 1
                }
                let time = nextWake(after: now)
                if sleeping == nil, !Task.isCancelled,
                    // While uploads run and others wait for a server, the run sleeps too: the server's return
                    // starts them at once, not when an upload in flight ends.
                    let until = time ?? (inFlight > 0 && waitsForAServer ? now.addingTimeInterval(3_600) : nil)
                {
                    let alarm = Alarm()
                    (sleeping, self.alarm) = ((alarm, until), alarm)
                    sleeps += 1
                    group.addTask { await Self.sleep(until: until, orUntil: alarm) }
                }
                if let (alarm, until) = sleeping {
                    // An earlier time came up, or nothing is left to wait for: the sleep ends, to begin again.
                    if time.map({ $0 < until }) ?? (inFlight == 0) { alarm.ring() }
                } else if inFlight == 0 {
                    try Task.checkCancellation()
                    return
                }
                switch try await group.next() {
                case .some(.some(let finished)):
                    inFlight -= 1
                    await finish(finished, session: session, headers: headers)
                case .some(.none):
                    sleeping = nil
                case .none:
                    continue
                }
            }
        }
    }

    /// Sleeps until `time`, `alarm` rings, or a cancel.
    private static func sleep(until time: Date, orUntil alarm: Alarm) async -> Finished? {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                try? await Task.sleep(nanoseconds: UInt64(max(0, time.timeIntervalSinceNow) * 1e9) + 1_000_000)
            }
            group.addTask { await alarm.wait() }
            await group.next()
            group.cancelAll()
        }
        return nil
    }

    /// Whether an upload waits for its server, or a server's outage is under way.
    private var waitsForAServer: Bool {
        !waiting.isEmpty || servers.values.contains { $0.gate.isOut }
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
    /// upload starts over with the file's new length and identity, and what a server holds of the old one is left for
    /// the server to expire. An upload that has not failed is left as it is.
    ///
    /// - Throws: The file's error, naming the part (``MultipartError/Reason/fileNotFound(_:)`` for one still
    ///   missing), and the upload stays failed; ``MultipartError/Reason/stateUnwritable(_:errno:)`` when the record
    ///   cannot be written.
    public func retry(_ id: ID) throws {
        guard let at = index[id], case .failed = entries[at].state, var record = entries[at].record else { return }
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
        if changed {
            guard let length = try record.form.rebuilt()?.contentLength else {
                throw MultipartError(.stateUnwritable(entries[at].file, errno: EINVAL))
            }
            progress.totalUnitCount += Int64(clamping: length) - Int64(clamping: record.contentLength)
            let sent = min(entries[at].sent, length.subtractingSaturated(1))
            inFlightBytes -= min(inFlightBytes, entries[at].sent - sent)
            entries[at].sent = sent
            record.contentLength = length
        }
        record.outcome = nil
        try record.write(to: store)
        // The saved state is of the old form: the upload starts over.
        if changed { try? FileManager.default.removeItem(at: stateDirectory(of: id)) }
        entries[at].record = record
        entries[at].state = .pending
        cursor = min(cursor, at)
    }

    /// Removes an upload from the queue and its record from disk. One that has not completed is given up: cancelled
    /// if it runs, and its upload resource on the server deleted (through `session`, with `headers`).
    public func remove(_ id: ID, on session: URLSession = .shared, headers: MultipartHeaders? = nil) async {
        guard let at = index[id] else { return }
        let entry = entries[at]
        if entry.isInFlight {
            entries[at].removing = true
            entry.cancel?.cancel()
            return
        }
        await forget(entry, session: session, headers: headers, givingUp: !entry.isCompleted)
    }

    /// Pauses an upload that has not ended: it stays as it is, in this process and the next, until ``resume(_:)``;
    /// one that runs is stopped, its saved state kept for the resume. A ``run(on:headers:)`` returns once every
    /// upload is completed, failed or paused.
    ///
    /// - Throws: ``MultipartError/Reason/stateUnwritable(_:errno:)`` when the record cannot be written: then nothing
    ///   changed.
    public func pause(_ id: ID) throws {
        guard let at = index[id], var record = entries[at].record else { return }
        switch entries[at].state {
        case .completed, .failed, .paused: return
        case .pending, .waiting, .running: break
        }
        record.paused = true
        try record.write(to: store)
        entries[at].record = record
        waiting[id] = nil
        if entries[at].isInFlight {
            entries[at].pausing = true
            entries[at].cancel?.cancel()
        } else {
            entries[at].state = .paused
        }
    }

    /// Resumes a paused upload: it goes again in its place in the queue, from where the server stands, at once if
    /// the queue runs.
    ///
    /// - Throws: ``MultipartError/Reason/stateUnwritable(_:errno:)`` when the record cannot be written.
    public func resume(_ id: ID) throws {
        // A pause that has not yet stopped the upload is taken back too, on disk as here.
        guard let at = index[id], var record = entries[at].record, entries[at].state == .paused || entries[at].pausing
        else { return }
        record.paused = nil
        try record.write(to: store)
        entries[at].record = record
        entries[at].pausing = false
        guard entries[at].state == .paused else { return }
        entries[at].state = .pending
        cursor = min(cursor, at)
        alarm?.ring()
    }

    /// Moves an upload to the front of the queue, in this process and the next: it is the next to start (an upload
    /// moved later goes before it).
    ///
    /// - Throws: ``MultipartError/Reason/stateUnwritable(_:errno:)`` when the record cannot be written.
    public func prioritize(_ id: ID) throws {
        guard let at = index[id], var record = entries[at].record else { return }
        record.priority = (entries.compactMap { $0.record?.priority }.max() ?? 0) + 1
        try record.write(to: store)
        var entry = entries.remove(at: at)
        entry.record = record
        entries.insert(entry, at: 0)
        reindex()
        cursor = 0
        alarm?.ring()
    }

    /// Removes every completed upload from the queue, its record and saved state: what a backup that went through
    /// leaves behind. Uploads in any other state stay.
    public func removeCompleted() async {
        for entry in entries where entry.isCompleted {
            await forget(entry, session: .shared, headers: nil, givingUp: false)
        }
    }

    // MARK: The run's steps

    /// The first pending upload whose turn it is, or a waiting one whose time has come, marked running; `nil` for
    /// none.
    private func startNext(at now: Date, session: URLSession, headers: MultipartHeaders?) -> Job? {
        // An upload whose record cannot be written or makes no form fails, and the next is tried.
        while let index = nextReady(at: now) {
            if let job = start(index, session: session, headers: headers) { return job }
        }
        return nil
    }

    /// The first pending upload, or an earlier waiting one whose time has come, of a server that is not paused by an
    /// outage.
    private func nextReady(at now: Date) -> Int? {
        while cursor < entries.count, entries[cursor].state != .pending { cursor += 1 }
        let ready = waiting.filter { $0.value <= now }.compactMap { index[$0.key] }.sorted()
        var pending = (cursor..<entries.count).lazy.filter { self.entries[$0].state == .pending }.makeIterator()
        var nextWaiting = ready.makeIterator()
        var (candidatePending, candidateWaiting) = (pending.next(), nextWaiting.next())
        while let candidate = [candidatePending, candidateWaiting].compactMap({ $0 }).min() {
            if !isPaused(entries[candidate].origin, at: now) { return candidate }
            if candidate == candidatePending {
                candidatePending = pending.next()
            } else {
                candidateWaiting = nextWaiting.next()
            }
        }
        return nil
    }

    /// Whether the uploads to `origin` wait out its outage: while one of them probes it, or until the next probe.
    private func isPaused(_ origin: Origin?, at now: Date) -> Bool {
        guard let origin, let server = servers[origin], server.gate.isOut else { return false }
        return server.running > 0 || now < server.probe ?? .distantPast
    }

    /// The send of the upload at `index`, marked running; `nil` when it failed instead.
    private func start(_ index: Int, session: URLSession, headers: MultipartHeaders?) -> Job? {
        waiting[entries[index].id] = nil
        guard var record = entries[index].record else {
            fail(index, because: "it has no record")
            return nil
        }
        let startedBefore = record.starts > 0
        record.starts += 1
        let knownNotResumable = entries[index].origin.map { plainOrigins.contains($0) } ?? false
        if knownNotResumable {
            // The form goes whole: said, and counted where it goes again, in this write (see `Notes`).
            record.sentWhole = Date()
            if startedBefore { record.sentAgain += 1 }
        }
        do {
            // Not synced: it outlives a kill, and counts what a crash of the system may send again.
            try record.write(to: store, syncing: false)
        } catch {
            fail(index, because: "its record cannot be written: \(error)")
            return nil
        }
        entries[index].record = record
        let form: MultipartFormData?
        do {
            form = try record.form.rebuilt()
        } catch {
            fail(index, because: "\(error)")
            return nil
        }
        guard let form else {
            fail(index, because: "its record does not make a form")
            return nil
        }
        // A file gone or changed while the upload waited fails it before it asks the server for anything. One a run
        // before started is left to its saved state, which deletes the server's upload of the old file.
        do {
            if !startedBefore { try form.checkFiles() }
        } catch {
            fail(index, because: "\(error)")
            return nil
        }
        let id = entries[index].id
        let handle = CancelHandle()
        let origin = entries[index].origin
        var outage: OutageGate.Pass?
        if let origin {
            outage = server(origin).gate.pass()
            servers[origin]?.running += 1
        }
        entries[index].state = .running
        entries[index].cancel = handle
        entries[index].waitReports = 0
        eventSink.yield(.started(id))
        return Job(
            id: id, record: record, store: store, form: form, request: record.request.urlRequest,
            stateDirectory: stateDirectory(of: id),
            resumption: resumption, startedBefore: startedBefore,
            knownNotResumable: knownNotResumable, outage: outage,
            session: session, headers: headers, cancel: handle,
            waits: { [weak self] until, turn in Task { await self?.inFlight(id, waitsUntil: until, turn: turn) } },
            progress: { [weak self] sent in Task { await self?.sent(sent, by: id) } })
    }

    /// An upload in flight waits between its own tries until `until`, said at once (`waiting`, and its event), or
    /// (`nil`) tries again. `turn` orders one send's reports, which reach the queue each on a task of its own.
    private func inFlight(_ id: ID, waitsUntil until: Date?, turn: Int) {
        guard let at = index[id], entries[at].isInFlight, turn > entries[at].waitReports else { return }
        entries[at].waitReports = turn
        if let until {
            entries[at].state = .waiting(until: until)
            eventSink.yield(.waiting(id, until: until))
        } else if case .waiting = entries[at].state {
            entries[at].state = .running
        }
    }

    /// When the run looks again for an upload to start, after `now`: a waiting upload's time, or a paused server's
    /// next probe.
    private func nextWake(after now: Date) -> Date? {
        (waiting.values + servers.values.compactMap(\.probe)).filter { $0 > now }.min()
    }

    /// The server of `origin`, made at its first upload.
    private func server(_ origin: Origin) -> Server {
        if let server = servers[origin] { return server }
        let server = Server(gate: OutageGate { [weak self] in Task { await self?.outageEnded(at: origin) } })
        servers[origin] = server
        return server
    }

    /// A server is back: its uploads that wait go now.
    private func outageEnded(at origin: Origin) {
        servers[origin]?.probe = nil
        let now = Date()
        for (id, _) in waiting {
            if let at = index[id], entries[at].origin == origin { waiting[id] = now }
        }
        alarm?.ring()
    }

    private func sent(_ bytes: UInt64, by id: ID) {
        guard let index = index[id], entries[index].isInFlight else { return }
        let length = entries[index].record?.contentLength ?? bytes
        eventSink.yield(.progress(id, bytesSent: bytes, of: length))
        // Its last byte counts when the server's answer says it has the form: a form handed out whole and refused
        // keeps the queue short of done.
        let counted = min(bytes, length.subtractingSaturated(1))
        guard counted > entries[index].sent else { return }
        inFlightBytes += counted - entries[index].sent
        entries[index].sent = counted
        report()
    }

    /// Sets the progress from what ended and what is in flight: never less than before.
    private func report() {
        let completed = Int64(clamping: endedBytes + inFlightBytes)
        if completed > progress.completedUnitCount { progress.completedUnitCount = completed }
    }

    /// Records how an upload ended.
    private func finish(_ finished: Finished, session: URLSession, headers: MultipartHeaders?) async {
        guard let index = index[finished.id] else { return }
        entries[index].cancel = nil
        let origin = entries[index].origin
        if let origin { servers[origin]?.running -= 1 }
        if entries[index].removing {
            return await forget(entries[index], session: session, headers: headers, givingUp: true)
        }
        entries[index].record = finished.record
        if finished.sentWhole, let origin {
            plainOrigins.insert(origin)
        }
        if entries[index].pausing {
            entries[index].pausing = false
            entries[index].record?.paused = true
            switch finished.outcome {
            case .stopped, .waiting:
                // Paused where it stood, its saved state kept: the server's word, and its own, come at the resume.
                entries[index].state = .paused
                cursor = min(cursor, index)
                try? entries[index].record?.write(to: store)
                return
            case .completed, .failed:
                // It ended as the pause came: that stands.
                entries[index].record?.paused = nil
            }
        }
        switch finished.outcome {
        case .completed(let answer):
            // A server that speaks no draft says it is back this way.
            if let origin { servers[origin]?.gate.answered() }
            complete(index, with: answer, recorded: finished.completionRecorded)
        case .failed(let reason):
            fail(index, because: reason)
        case .waiting(let outage):
            // The queue's probe of the server: one upload every longest wait of the uploads' own (15 s unless set,
            // 1 s at least), so that they go again that soon after the network's return; its own retries waited out
            // the outage's start already. A server that answered (busy) is no outage: this upload waits alone.
            let until = Date(timeIntervalSinceNow: max(1, resumption.wait(.infinity)))
            if outage, let origin {
                servers[origin]?.gate.markOut()
                servers[origin]?.probe = until
            } else if let origin {
                servers[origin]?.gate.answered()
            }
            entries[index].state = .waiting(until: until)
            waiting[finished.id] = until
            try? entries[index].record?.write(to: store)
            eventSink.yield(.waiting(finished.id, until: until))
        case .stopped:
            entries[index].state = .pending
            cursor = min(cursor, index)
        }
    }

    /// The upload completed; `recorded` when its send wrote the record already.
    private func complete(_ index: Int, with answer: Answer, recorded: Bool) {
        let id = entries[index].id
        inFlightBytes -= min(inFlightBytes, entries[index].sent)
        entries[index].state = .completed(answer)
        if var record = entries[index].record {
            if !recorded {
                record.outcome = .completed(answer.stored)
                entries[index].record = record
                // The saved state goes only once the record says the upload completed (see `Job.recordCompleted`).
                if (try? record.write(to: store)) != nil {
                    try? FileManager.default.removeItem(at: stateDirectory(of: id))
                }
            }
            endedBytes += record.contentLength
        }
        report()
        eventSink.yield(.completed(id, answer))
    }

    private func fail(_ index: Int, because reason: String) {
        let id = entries[index].id
        // What it handed out stays counted, and what it did not keeps the progress short of done.
        entries[index].state = .failed(reason: reason)
        if var record = entries[index].record {
            record.outcome = .failed(reason: reason)
            entries[index].record = record
            try? record.write(to: store)
        }
        eventSink.yield(.failed(id, reason: reason))
    }

    /// Removes `entry`'s record and state; `givingUp` an upload that has not completed deletes its upload resource.
    private func forget(_ entry: Entry, session: URLSession, headers: MultipartHeaders?, givingUp: Bool) async {
        entries.removeAll { $0.id == entry.id }
        waiting[entry.id] = nil
        if let key = entry.record?.key, keys[key] == entry.id { keys[key] = nil }
        if !entry.isCompleted { inFlightBytes -= min(inFlightBytes, entry.sent) }
        try? FileManager.default.removeItem(at: entry.file)
        if givingUp, let record = entry.record, let form = try? record.form.rebuilt() {
            var policy = MultipartResumption()
            policy.stateDirectory = stateDirectory(of: entry.id)
            _ = try? await session.abandonUpload(
                form, with: record.request.urlRequest, resumption: policy, headers: headers)
        }
        try? FileManager.default.removeItem(at: stateDirectory(of: entry.id))
        // A removed upload counts as done: the caller gave it up.
        if !entry.isCompleted { endedBytes += entry.record?.contentLength ?? 0 }
        report()
    }

    /// Where an upload keeps its saved state: a directory of its own, so that two uploads of the same form never
    /// share one.
    private nonisolated func stateDirectory(of id: ID) -> URL {
        directory.appendingPathComponent("state", isDirectory: true).appendingPathComponent(id.rawValue)
    }
}
