import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// Adding: a new upload's record, its ID and key, and its place at the queue's end.
extension MultipartUploadQueue {
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
        try enter([record])
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
            new.append((upload, id.rawValue, schedule.nextSequence + new.count))
            ids.append(id)
        }
        let made = try inParallel(new) { new throws(MultipartError) in
            try Self.newRecord(new.upload, id: new.id, sequence: new.sequence, at: now)
        }
        // One transaction: none of the call stays where a write failed.
        try enter(made)
        return ids
    }

    /// The upload `key` names: the one in the queue; else, unless `again`, the last one with it that completed or
    /// was removed, and left, as `removal` finds it in the database (read only when needed).
    func upload(
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
    func newRecord(_ upload: NewUpload) throws -> QueueRecord {
        let now = clock.now()
        return try Self.newRecord(upload, id: Self.newID(at: now), sequence: schedule.nextSequence, at: now)
    }

    /// The record of `upload` as `id` at `sequence`, added `now`, checked as ``add(_:with:key:again:)`` says.
    static func newRecord(
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
    static let lastID = LockedValue(IDClock())

    /// Writes `records` in one transaction, then puts them at the queue's end in their order: each URL's origin found
    /// once, and the progress, which tells its observers each time it changes, changed once.
    func enter(_ records: [QueueRecord]) throws {
        try writeAdded(records)
        var origin = ParsedOnce.origins
        let uploads = records.map { record in
            let summary = record.summary
            return QueueSchedule.Upload(summary, origin: origin(summary.url))
        }
        performNow(schedule.added(uploads))
    }
}
