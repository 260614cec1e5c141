import Foundation

/// The queue's directory on disk, and the one place that lists, reads, writes and removes the records of its uploads
/// and their saved state. A record is read as saved state is (``SavedUploadDirectory/readTrusted(_:atMost:prefix:)``):
/// a regular file of this user's that others may not write, opened without following a link, of a bounded size.
///
/// A record lives in a file of its own, or in the batch of the call that added it (``QueueBatch``) until it is first
/// written again.
struct QueueStore: Sendable {
    private let files: SavedUploadDirectory
    /// The batches of this process, shared by every copy of the store (the queue's jobs write records too).
    private let batches = LockedValue<[QueueBatch]>([])

    /// The most of a record's first line read to list it: its summary, whose key and reason are the caller's.
    private static let largestSummary = 1 << 20

    /// The directory, made `0700` if it does not exist; one that others may write, or another user's, is refused.
    init(_ url: URL) throws(MultipartError) {
        files = SavedUploadDirectory(url, interopVersions: [])
        directoryPath = url.path.hasSuffix("/") ? url.path : url.path + "/"
        try files.prepare()
    }

    var url: URL { files.url }

    /// The directory's path, ending with `/`.
    private let directoryPath: String

    /// One record as listing the directory finds it.
    enum Listed {
        case record(QueueRecord.Summary)
        /// A file that is not a record this version reads, named by its file, with why.
        case damaged(name: String, reason: String)
    }

    /// Calls `each` with every record's summary, in no order (the names' order is the queue's), reading no form: a
    /// record's first line, or the whole of one an earlier version wrote. One at a time, so that a queue of a hundred
    /// thousand is never held twice. A batch none of whose records lives only in it is removed.
    func forEachRecord(_ each: (Listed) -> Void) {
        var batchNames: [String] = []
        try? POSIX.forEachName(inDirectory: url.path) { name in
            if name.hasSuffix(QueueBatch.fileExtension), !name.hasPrefix(".") { batchNames.append(name) }
        }
        // A record in a file of its own was written since its batch was: that file wins.
        var own = Set<String>()
        try? POSIX.forEachName(inDirectory: url.path) { name in
            guard name.hasSuffix(".json"), !name.hasPrefix(".") else { return }
            if !batchNames.isEmpty { own.insert(name) }
            do throws(QueueRecord.Damage) {
                each(.record(try summary(of: name)))
            } catch {
                each(.damaged(name: name, reason: error.reason))
            }
        }
        var found: [QueueBatch] = []
        for name in batchNames {
            do throws(SavedUploadDirectory.Distrust) {
                let (descriptor, _) = try files.openTrusted(directoryPath + name, atMost: .max)
                defer { POSIX.close(descriptor) }
                do throws(QueueBatch.Damage) {
                    found.append(
                        try QueueBatch.read(descriptor, name: name, moved: own.contains) { each(.record($0)) })
                } catch {
                    each(.damaged(name: name, reason: error.reason))
                }
            } catch {
                if !error.missing { each(.damaged(name: name, reason: error.reason)) }
            }
        }
        let (live, spent) = (found.filter { $0.only > 0 }, found.filter { $0.only == 0 })
        batches.withLock { $0 = live }
        if !spent.isEmpty { retire(spent.map(\.name)) }
    }

    private func summary(of name: String) throws(QueueRecord.Damage) -> QueueRecord.Summary {
        // A path, not a URL: made a hundred thousand times as a queue opens.
        let file = directoryPath + name
        var head: Data
        do throws(SavedUploadDirectory.Distrust) {
            head = try files.readTrusted(file, atMost: Self.largestRecord, prefix: 4_096)
            if head.first != UInt8(ascii: "{"), !head.contains(UInt8(ascii: "\n")) {
                head = try files.readTrusted(file, atMost: Self.largestRecord, prefix: Self.largestSummary)
            }
        } catch {
            throw QueueRecord.Damage(reason: error.reason)
        }
        // An earlier version's record is JSON alone: read whole, once, until it is written again.
        if head.first == UInt8(ascii: "{") { return try read(name).summary }
        guard let end = head.firstIndex(of: UInt8(ascii: "\n")), let summary = QueueRecord.Summary(line: head[..<end])
        else { throw QueueRecord.Damage(reason: "its first line is not a record's summary") }
        guard summary.fileName == name else { throw QueueRecord.Damage(reason: "it is not under its own name") }
        return summary
    }

    /// The most a record file may hold: its form's fields and data parts (in base 64) and the start of an answer
    /// are far less.
    private static let largestRecord = 1 << 30

    /// The record in the file `name`, whole: its own file, or its lines in a batch.
    func read(_ name: String) throws(QueueRecord.Damage) -> QueueRecord {
        let data: Data
        do throws(SavedUploadDirectory.Distrust) {
            data = try files.readTrusted(directoryPath + name, atMost: Self.largestRecord)
        } catch {
            guard error.missing else { throw QueueRecord.Damage(reason: error.reason) }
            return try readBatched(name)
        }
        return try QueueRecord.decoded(data, name: name)
    }

    private func readBatched(_ name: String) throws(QueueRecord.Damage) -> QueueRecord {
        let found = batches.withLock { all in
            Self.find(name, in: all).flatMap { index, place in
                all[index].entry(at: place) == .only ? (all[index].name, all[index].range(at: place)) : nil
            }
        }
        guard let (batch, range) = found, range.count <= Self.largestRecord else {
            throw QueueRecord.Damage(reason: "it is gone")
        }
        var data: Data
        do throws(SavedUploadDirectory.Distrust) {
            data = try files.readTrusted(directoryPath + batch, range: range)
        } catch {
            throw QueueRecord.Damage(reason: "its batch \(batch) cannot be read: \(error.reason)")
        }
        if data.last == UInt8(ascii: "\n") { data.removeLast() }
        return try QueueRecord.decoded(data, name: name)
    }

    /// Writes `record` whole over its last version, in a file of its own, `syncing` it to disk (see
    /// ``SavedUploadDirectory/replace(_:with:syncing:)``).
    func write(_ record: QueueRecord, syncing: Bool = true) throws(MultipartError) {
        let name = record.fileName
        try files.replace(url.appendingPathComponent(name), with: record.encoded(), syncing: syncing)
        batches.withLock { all in
            guard let (index, place) = Self.find(name, in: all), all[index].entry(at: place) == .only else { return }
            all[index].mark(place, .moved)
            if all[index].only == 0 { retire([all.remove(at: index).name]) }
        }
    }

    /// Writes every record, in one batch file made durable at once; where it cannot be written, none of them stays.
    /// Their sequences follow one another.
    func write(_ records: [QueueRecord]) throws(MultipartError) {
        guard !records.isEmpty else { return }
        let (data, batch) = try QueueBatch.encoded(records)
        try files.replace(url.appendingPathComponent(batch.name), with: data)
        batches.withLock { $0.append(batch) }
    }

    /// Removes the records in the files `names`, where they are; a batch that holds one says it, first, so that
    /// the record does not come back from it.
    func removeRecords(_ names: [String]) {
        var lines: [String: Data] = [:]
        var spent: [String] = []
        batches.withLock { all in
            for name in names {
                guard let (index, place) = Self.find(name, in: all), all[index].entry(at: place) != .removed else {
                    continue
                }
                all[index].mark(place, .removed)
                lines[all[index].name, default: Data()] += QueueBatch.removal(of: name)
            }
            spent = all.filter { $0.only == 0 }.map(\.name)
            all.removeAll { $0.only == 0 }
        }
        for (batch, removals) in lines where !spent.contains(batch) { append(removals, to: batch) }
        for name in names { try? POSIX.unlink(directoryPath + name) }
        if !spent.isEmpty { retire(spent) }
    }

    /// Removes the record in the file `name`, if it is there.
    func removeRecord(_ name: String) {
        removeRecords([name])
    }

    /// The batch and place of the record in the file `name`, in `all`.
    private static func find(_ name: String, in all: [QueueBatch]) -> (Int, Int)? {
        guard let key = QueueBatch.Key(name) else { return nil }
        for (index, batch) in all.enumerated() {
            if let place = batch.place(of: key) { return (index, place) }
        }
        return nil
    }

    /// Adds `lines` to the end of the batch `name`, synced. One that cannot be written leaves the record to come back
    /// in the next process, as a removal whose unlink was lost would.
    private func append(_ lines: Data, to name: String) {
        guard
            let descriptor = try? POSIX.open(
                directoryPath + name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC)
        else { return }
        defer { POSIX.close(descriptor) }
        if (try? POSIX.writeAll(descriptor, lines)) != nil { try? POSIX.sync(descriptor) }
    }

    /// Removes the batches `names`, none of whose records lives only in them any more: once what was written since
    /// is on disk, since their records' own files, some written unsynced, now hold them.
    private func retire(_ names: [String]) {
        guard (try? files.syncEverything()) != nil else { return }
        for name in names { try? POSIX.unlink(directoryPath + name) }
    }

    /// Where an upload keeps its saved state: a directory of its own, so that two uploads of the same form never
    /// share one.
    func stateDirectory(of id: String) -> URL {
        url.appendingPathComponent("state", isDirectory: true).appendingPathComponent(id)
    }

    /// Removes an upload's saved state.
    func removeState(of id: String) {
        try? FileManager.default.removeItem(at: stateDirectory(of: id))
    }

    /// The queue's lock, which one process at a time holds while it runs the queue.
    func lock() throws(MultipartError) -> SavedUploadLock {
        do {
            return try files.lock("queue")
        } catch {
            if case .uploadInProgress = error.reason { throw MultipartError(.queueInUse(url)) }
            throw error
        }
    }
}
