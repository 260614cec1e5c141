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
    nonisolated let pacer = MultipartPacer(nil, catchUp: 0.1)

    let eventSink = EventBroadcast<Event>()

    /// How each upload retries before it waits in the queue.
    let resumption: MultipartResumption

    let store: QueueStore

    /// Which upload goes next, and when.
    var schedule: QueueSchedule

    /// The cancel of each send under way.
    var cancels: [ID: CancelHandle] = [:]

    /// The removes that wait for an upload's send to end, by its ID.
    var removers: [ID: [CheckedContinuation<Removal, Never>]] = [:]

    /// The uploads that completed since the last write, with their answers: the next start writes them.
    var completing: [(id: ID, answer: Answer)] = []

    /// Where the uploads to each server wait out an outage together: their own retries, as the queue's probes.
    var gates: [Origin: OutageGate] = [:]

    /// Where the uploads to each server wait for the one that asks what it speaks.
    var discoveries: [Origin: DiscoveryGate] = [:]

    /// What each server was found to speak, by its origin, kept in the database for later runs: only the first
    /// upload to a server asks it (`OPTIONS` in each version down to the one it speaks).
    var knownServers: [String: ResumableUpload.KnownServer]

    var isRunning: Bool { running != nil }

    /// The session and headers of the run under way.
    var running: (URLSession, MultipartHeaders?)?

    /// Whether a remove of this process holds the queue's lock, while no run does, and who waits for it: a run or
    /// another remove that starts meanwhile waits, rather than take the held lock for another process's run.
    var removeHolds: (held: Bool, waiting: [CheckedContinuation<Void, Never>]) = (false, [])

    /// The run's sleep, which ends early when its alarm rings (a server is back, the caller moved an upload, an upload
    /// waits), and until when it sleeps.
    var sleep: (alarm: Alarm, until: Date)?

    /// How many times the run slept: a few for each wait, never a loop.
    var sleeps = 0
    /// The store's version this queue has seen: what other processes wrote since is looked for while it runs.
    var seenVersion: Int64

    /// How often a run looks for what other processes changed, in nanoseconds: `Task.sleep(nanoseconds:)` is there
    /// from the package's floor (iOS 13), where `Duration` and `sleep(for:)` wait for iOS 16.
    static let lookAgain: UInt64 = 500_000_000

    /// Where the queue's times come from.
    let clock: QueueClock

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
        schedule.reserve(store.count)
        var origin = ParsedOnce.origins
        store.forEachRecord { listed in
            let upload: QueueSchedule.Upload
            switch listed {
            case .record(let summary):
                upload =
                    schedule.uploads[ID(rawValue: summary.id)] == nil
                    ? QueueSchedule.Upload(summary, origin: origin(summary.url))
                    : Self.damaged(summary.id, reason: "another record has its ID")
            case .damaged(let id, let reason):
                upload = Self.damaged(id, reason: reason)
            }
            // A damaged record's name may be another's ID: the first keeps it.
            guard schedule.uploads[upload.id] == nil else { return }
            schedule.add(upload)
        }
        self.schedule = schedule
        knownServers = store.knownServers()
        progress = Progress(totalUnitCount: Int64(clamping: schedule.counts.total))
        progress.completedUnitCount = Int64(clamping: schedule.counts.completed)
    }

    deinit {
        // Readers' loops end with the queue.
        eventSink.finish()
    }

    /// The row `id` that is no record, listed as failed.
    static func damaged(_ id: String, reason: String) -> QueueSchedule.Upload {
        QueueSchedule.Upload(
            id: ID(rawValue: id), sequence: nil, key: nil, origin: nil,
            state: .failed(reason: "its record is damaged: \(reason)"), contentLength: 0)
    }

    /// The record of `upload`, whole; a damaged one has none.
    func record(of upload: QueueSchedule.Upload) throws(QueueRecord.Damage) -> QueueRecord {
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

    func eachUpload(_ body: (Upload) -> Void) {
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
    func listed(_ upload: QueueSchedule.Upload, listing: QueueStore.Listing?) -> Upload {
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
}
