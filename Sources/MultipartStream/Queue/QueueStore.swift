import Foundation

/// The queue's directory on disk, and the one place that lists, reads, writes and removes the records of its uploads
/// and their saved state. A record is read as saved state is (``SavedUploadDirectory/readTrusted(_:atMost:prefix:)``):
/// a regular file of this user's that others may not write, opened without following a link, of a bounded size.
struct QueueStore: Sendable {
    private let files: SavedUploadDirectory

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
    /// thousand is never held twice.
    func forEachRecord(_ each: (Listed) -> Void) {
        try? POSIX.forEachName(inDirectory: url.path) { name in
            guard name.hasSuffix(".json"), !name.hasPrefix(".") else { return }
            do throws(QueueRecord.Damage) {
                each(.record(try summary(of: name)))
            } catch {
                each(.damaged(name: name, reason: error.reason))
            }
        }
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

    /// The record in the file `name`, whole.
    func read(_ name: String) throws(QueueRecord.Damage) -> QueueRecord {
        let data: Data
        do throws(SavedUploadDirectory.Distrust) {
            data = try files.readTrusted(directoryPath + name, atMost: Self.largestRecord)
        } catch {
            throw QueueRecord.Damage(reason: error.missing ? "it is gone" : error.reason)
        }
        return try QueueRecord.decoded(data, name: name)
    }

    /// Writes `record` whole over its last version, `syncing` it to disk (see
    /// ``SavedUploadDirectory/replace(_:with:syncing:)``).
    func write(_ record: QueueRecord, syncing: Bool = true) throws(MultipartError) {
        try files.replace(url.appendingPathComponent(record.fileName), with: record.encoded(), syncing: syncing)
    }

    /// Writes every record, then makes them durable in one flush of the file system; where one cannot be written,
    /// none of them stays.
    func write(_ records: [QueueRecord]) throws(MultipartError) {
        var written = 0
        do throws(MultipartError) {
            for record in records {
                try write(record, syncing: false)
                written += 1
            }
            try files.syncEverything()
        } catch {
            for record in records.prefix(written) {
                try? POSIX.unlink(url.appendingPathComponent(record.fileName).path)
            }
            throw error
        }
    }

    /// Removes the record file `name`, if it is there.
    func removeRecord(_ name: String) {
        try? POSIX.unlink(url.appendingPathComponent(name).path)
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
