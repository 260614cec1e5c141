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
    /// logger read theirs at once. An event comes once ``progress`` counts it. Read it before ``run(on:headers:)``
    /// starts to see every event of the run.
    public nonisolated var events: AsyncStream<Event> { eventSink.stream() }

    private let eventSink = EventBroadcast<Event>()
    /// How each upload retries before it waits in the queue.
    private let resumption: MultipartResumption
    private let store: QueueStore
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
    /// The highest place the caller moved an upload to: the next move goes before it.
    private var topPriority = 0
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

    /// One upload as the queue holds it: what its schedule needs, and no form, which is read from its record when it
    /// starts.
    private struct Entry {
        var id: ID
        /// Its place in the order added; `nil` for a file that could not be read, listed as failed.
        var sequence: Int?
        var key: String?
        var priority: Int
        /// Where its requests go.
        var origin: Origin?
        var contentLength: UInt64
        var state: Standing
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

        /// Its record's file name.
        var fileName: String {
            sequence.map { QueueRecord.fileName(sequence: $0, id: id.rawValue) } ?? id.rawValue + ".json"
        }

        var isCompleted: Bool { state == .completed }

        /// Its place in the order added: a damaged record's name starts with it too.
        var order: Int { sequence ?? Int(id.rawValue.prefix(12)) ?? .max }

        /// An upload whose record says this.
        init(_ summary: QueueRecord.Summary, origin: Origin?) {
            id = ID(rawValue: summary.id)
            sequence = summary.sequence
            key = summary.key
            priority = summary.priority ?? 0
            self.origin = origin
            contentLength = summary.contentLength
            switch summary.standing {
            case .pending: state = .pending
            case .paused: state = .paused
            case .completed: state = .completed
            case .failed(let reason): state = .failed(reason: reason)
            }
        }

        /// The file `name` that is no record, failed.
        init(damaged name: String, reason: String) {
            id = ID(rawValue: String(name.dropLast(".json".count)))
            priority = 0
            contentLength = 0
            state = .failed(reason: "its record \(name) is damaged: \(reason)")
        }
    }

    /// Where an upload stands in this process: ``State`` without a completed upload's answer, which stays in its
    /// record.
    private enum Standing: Equatable {
        case pending, running, completed, paused
        case waiting(until: Date)
        case failed(reason: String)
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
        store = try QueueStore(directory)
        var loaded: [Entry] = []
        // Where each upload is, once sorted; first, which IDs were seen.
        var index: [ID: Int] = [:]
        // Most queues send to one URL or a few: each is parsed once.
        var origins: [String: Origin?] = [:]
        var nextSequence = 0
        store.forEachRecord { listed in
            switch listed {
            case .record(let summary):
                let id = ID(rawValue: summary.id)
                guard index.updateValue(0, forKey: id) == nil else {
                    loaded.append(Entry(damaged: summary.fileName, reason: "another record has its ID"))
                    return
                }
                if origins[summary.url] == nil { origins[summary.url] = .some(Origin(URL(string: summary.url))) }
                loaded.append(Entry(summary, origin: origins[summary.url] ?? nil))
                nextSequence = max(nextSequence, summary.sequence + 1)
            case .damaged(let name, let reason):
                loaded.append(Entry(damaged: name, reason: reason))
            }
        }
        // The caller's moves first (the latest first), then the order added, which the file names keep.
        loaded.sort { one, other in
            if one.priority != other.priority { return one.priority > other.priority }
            if one.order != other.order { return one.order < other.order }
            return one.id.rawValue < other.id.rawValue
        }
        topPriority = loaded.first?.priority ?? 0
        index.removeAll(keepingCapacity: true)
        var keys: [String: ID] = [:]
        for (place, entry) in loaded.enumerated() {
            // A damaged record's name may be another's ID: the first keeps it.
            if index[entry.id] == nil { index[entry.id] = place }
            // Two records of one key (two processes that added it at once) stay two uploads; the first answers for it.
            if let key = entry.key, keys[key] == nil { keys[key] = entry.id }
        }
        entries = loaded
        self.index = index
        self.keys = keys
        self.nextSequence = nextSequence
        let total = loaded.reduce(UInt64(0)) { $0 + $1.contentLength }
        let ended = loaded.reduce(UInt64(0)) { $0 + ($1.isCompleted ? $1.contentLength : 0) }
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

    /// Every upload of the queue, in its order, each read from its record: a listing of a hundred thousand takes
    /// seconds (``upload(_:)`` reads one).
    public var uploads: [Upload] {
        entries.map(listed)
    }

    /// The upload `id`, read from its record; `nil` for one the queue does not hold.
    public func upload(_ id: ID) -> Upload? {
        index[id].map { listed(entries[$0]) }
    }

    private func listed(_ entry: Entry) -> Upload {
        let record = try? store.read(entry.fileName)
        let state: State =
            switch entry.state {
            case .pending: .pending
            case .running: .running
            case .waiting(let until): .waiting(until: until)
            case .paused: .paused
            case .failed(let reason): .failed(reason: reason)
            case .completed:
                if case .completed(let answer)? = record?.outcome {
                    .completed(Answer(answer))
                } else {
                    .completed(Answer(statusCode: nil, headers: [:], body: Data()))
                }
            }
        return Upload(
            id: entry.id, key: entry.key, files: record?.files ?? [], state: state,
            url: record?.request.url ?? store.url.appendingPathComponent(entry.fileName),
            added: record?.added ?? .distantPast, contentLength: entry.contentLength,
            sentAgain: record?.sentAgain ?? 0)
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
        try store.write(record)
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
        try store.write(made)
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
        let entry = Entry(record.summary, origin: Origin(record.request.url))
        if let key = record.key { keys[key] = entry.id }
        index[entry.id] = entries.count
        entries.append(entry)
        progress.totalUnitCount += Int64(clamping: record.contentLength)
        eventSink.yield(.added(entry.id))
        return entry.id
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
        let lock = try store.lock()
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
        guard let at = index[id], case .failed = entries[at].state, var record = try? store.read(entries[at].fileName)
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
        if changed {
            guard let length = try record.form.rebuilt()?.contentLength else {
                throw MultipartError(.stateUnwritable(store.url.appendingPathComponent(record.fileName), errno: EINVAL))
            }
            progress.totalUnitCount += Int64(clamping: length) - Int64(clamping: record.contentLength)
            let sent = min(entries[at].sent, length.subtractingSaturated(1))
            inFlightBytes -= min(inFlightBytes, entries[at].sent - sent)
            entries[at].sent = sent
            record.contentLength = length
        }
        record.outcome = nil
        try store.write(record)
        // The saved state is of the old form: the upload starts over.
        if changed { store.removeState(of: id.rawValue) }
        entries[at].contentLength = record.contentLength
        entries[at].state = record.paused == true ? .paused : .pending
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
        guard let at = index[id] else { return }
        switch entries[at].state {
        case .completed, .failed, .paused: return
        case .pending, .waiting, .running: break
        }
        try change(at) { $0.paused = true }
        waiting[id] = nil
        if entries[at].isInFlight {
            entries[at].pausing = true
            entries[at].cancel?.cancel()
        } else {
            entries[at].state = .paused
        }
    }

    /// Reads the record of the upload at `at`, changes it, and writes it.
    private func change(_ at: Int, _ change: (inout QueueRecord) -> Void) throws {
        var record: QueueRecord
        do {
            record = try store.read(entries[at].fileName)
        } catch {
            throw MultipartError(
                .stateUnwritable(store.url.appendingPathComponent(entries[at].fileName), errno: EINVAL),
                underlying: error)
        }
        change(&record)
        try store.write(record)
    }

    /// Resumes a paused upload: it goes again in its place in the queue, from where the server stands, at once if
    /// the queue runs.
    ///
    /// - Throws: ``MultipartError/Reason/stateUnwritable(_:errno:)`` when the record cannot be written.
    public func resume(_ id: ID) throws {
        // A pause that has not yet stopped the upload is taken back too, on disk as here.
        guard let at = index[id], entries[at].state == .paused || entries[at].pausing else { return }
        try change(at) { $0.paused = nil }
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
        guard let at = index[id], entries[at].sequence != nil else { return }
        let priority = topPriority + 1
        try change(at) { $0.priority = priority }
        topPriority = priority
        var entry = entries.remove(at: at)
        entry.priority = priority
        entries.insert(entry, at: 0)
        reindex()
        cursor = 0
        alarm?.ring()
    }

    /// Removes every completed upload from the queue, its record and saved state: what a backup that went through
    /// leaves behind. Uploads in any other state stay.
    public func removeCompleted() async {
        for entry in entries where entry.isCompleted {
            store.removeRecord(entry.fileName)
            store.removeState(of: entry.id.rawValue)
            if let key = entry.key, keys[key] == entry.id { keys[key] = nil }
        }
        // Once for all of them: a hundred thousand go in one pass.
        entries.removeAll { $0.isCompleted }
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
        var record: QueueRecord
        do throws(QueueRecord.Damage) {
            guard entries[index].sequence != nil else { throw QueueRecord.Damage(reason: "it has no record") }
            record = try store.read(entries[index].fileName)
        } catch {
            fail(index, because: "its record \(entries[index].fileName) cannot be read: \(error.reason)", record: nil)
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
            try store.write(record, syncing: false)
        } catch {
            fail(index, because: "its record cannot be written: \(error)", record: record)
            return nil
        }
        let form: MultipartFormData?
        do {
            form = try record.form.rebuilt()
        } catch {
            fail(index, because: "\(error)", record: record)
            return nil
        }
        guard let form else {
            fail(index, because: "its record does not make a form", record: record)
            return nil
        }
        // A file gone or changed while the upload waited fails it before it asks the server for anything. One a run
        // before started is left to its saved state, which deletes the server's upload of the old file.
        do {
            if !startedBefore { try form.checkFiles() }
        } catch {
            fail(index, because: "\(error)", record: record)
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
            stateDirectory: store.stateDirectory(of: id.rawValue),
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
        let length = entries[index].contentLength
        // Its last byte counts when the server's answer says it has the form: a form handed out whole and refused
        // keeps the queue short of done.
        let counted = min(bytes, length.subtractingSaturated(1))
        if counted > entries[index].sent {
            inFlightBytes += counted - entries[index].sent
            entries[index].sent = counted
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

    /// Records how an upload ended.
    private func finish(_ finished: Finished, session: URLSession, headers: MultipartHeaders?) async {
        guard let index = index[finished.id] else { return }
        entries[index].cancel = nil
        let origin = entries[index].origin
        if let origin { servers[origin]?.running -= 1 }
        if entries[index].removing {
            return await forget(entries[index], session: session, headers: headers, givingUp: true)
        }
        var record = finished.record
        if finished.sentWhole, let origin {
            plainOrigins.insert(origin)
        }
        if entries[index].pausing {
            entries[index].pausing = false
            switch finished.outcome {
            case .stopped, .waiting:
                // Paused where it stood, its saved state kept: the server's word, and its own, come at the resume.
                record.paused = true
                entries[index].state = .paused
                cursor = min(cursor, index)
                try? store.write(record)
                return
            case .completed, .failed:
                // It ended as the pause came: that stands.
                record.paused = nil
            }
        }
        switch finished.outcome {
        case .completed(let answer):
            // A server that speaks no draft says it is back this way.
            if let origin { servers[origin]?.gate.answered() }
            complete(index, with: answer, record: record, recorded: finished.completionRecorded)
        case .failed(let reason):
            fail(index, because: reason, record: record)
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
            try? store.write(record)
            eventSink.yield(.waiting(finished.id, until: until))
        case .stopped:
            entries[index].state = .pending
            cursor = min(cursor, index)
        }
    }

    /// The upload completed; `recorded` when its send wrote `record` so already.
    private func complete(_ index: Int, with answer: Answer, record: QueueRecord, recorded: Bool) {
        let id = entries[index].id
        inFlightBytes -= min(inFlightBytes, entries[index].sent)
        entries[index].state = .completed
        if !recorded {
            var record = record
            record.outcome = .completed(answer.stored)
            // The saved state goes only once the record says the upload completed (see `Job.recordCompleted`).
            if (try? store.write(record)) != nil { store.removeState(of: id.rawValue) }
        }
        endedBytes += entries[index].contentLength
        report()
        eventSink.yield(.completed(id, answer))
    }

    /// The upload failed; its `record` written so, read first where `nil` (none where it cannot be read).
    private func fail(_ index: Int, because reason: String, record: QueueRecord?) {
        let id = entries[index].id
        // What it handed out stays counted, and what it did not keeps the progress short of done.
        entries[index].state = .failed(reason: reason)
        if var record = record ?? (entries[index].sequence == nil ? nil : try? store.read(entries[index].fileName)) {
            record.outcome = .failed(reason: reason)
            try? store.write(record)
        }
        eventSink.yield(.failed(id, reason: reason))
    }

    /// Removes `entry`'s record and state; `givingUp` an upload that has not completed deletes its upload resource.
    private func forget(_ entry: Entry, session: URLSession, headers: MultipartHeaders?, givingUp: Bool) async {
        let record = givingUp ? try? store.read(entry.fileName) : nil
        entries.removeAll { $0.id == entry.id }
        waiting[entry.id] = nil
        if let key = entry.key, keys[key] == entry.id { keys[key] = nil }
        if !entry.isCompleted { inFlightBytes -= min(inFlightBytes, entry.sent) }
        store.removeRecord(entry.fileName)
        if let record, let form = try? record.form.rebuilt() {
            var policy = MultipartResumption()
            policy.stateDirectory = store.stateDirectory(of: entry.id.rawValue)
            _ = try? await session.abandonUpload(
                form, with: record.request.urlRequest, resumption: policy, headers: headers)
        }
        store.removeState(of: entry.id.rawValue)
        // A removed upload counts as done: the caller gave it up.
        if !entry.isCompleted { endedBytes += entry.contentLength }
        report()
    }
}
