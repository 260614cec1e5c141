import Foundation
import MultipartStream

extension QueueStore {
    /// One upload as listing the database finds it.
    enum Listed {
        case record(QueueRecord.Summary)
        /// A row that is not a record this version reads, named by its ID, with why.
        case damaged(id: String, reason: String)
    }

    /// What a listing shows of an upload beside the schedule's state, read from its row without its form.
    struct Listing {
        var url: URL?
        var added: Date
        var sentAgain: Int
        var files: [String]
        /// A completed upload's answer, or the answer that refused a failed upload's form.
        var answer: QueueRecord.Answer?
        /// The process sending it, as its record says.
        var runner: Int32?
        /// A failed upload's kind of failure.
        var category: MultipartError.Category?

        /// Strings one after another, each ended by a NUL, which no path or header holds.
        static func joined(_ strings: [String]) -> Data {
            var data = Data()
            for string in strings {
                data.append(contentsOf: string.utf8)
                data.append(0)
            }
            return data
        }

        static func split(_ data: Data) -> [String] {
            data.split(separator: 0, omittingEmptySubsequences: false).dropLast().map {
                String(decoding: $0, as: UTF8.self)
            }
        }
    }

    /// How an upload was removed.
    enum Removed: Equatable {
        /// Before it completed.
        case removed
        /// Once the server had the form, with its answer (`nil`: a row that holds none).
        case completed(QueueRecord.Answer?)
    }

    /// Calls `each` with every record's summary in the queue's order, reading no form: a queue of a hundred thousand
    /// is never held twice.
    func forEachRecord(_ each: (Listed) -> Void) {
        try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            try connection.run("SELECT \(Self.summaries.sql) FROM uploads \(Self.order)") { row in
                each(Self.listed(Self.summaries(row)))
            }
        }
    }

    /// Calls `each` with every upload's summary and listing in the queue's order, in one pass of its index.
    func forEachListing(_ each: (Listed, Listing) -> Void) {
        var url = ParsedOnce.urls
        try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            try connection.run("SELECT \(Self.listings.sql) FROM uploads \(Self.order)") { row in
                let row = Self.listings(row)
                each(Self.listed(row), Self.listing(row, url: &url))
            }
        }
    }

    /// What a listing says of an upload beside the schedule's state, read without its form: `nil` for none.
    func listing(of id: String) -> Listing? {
        try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            var found: Listing?
            try connection.run("SELECT \(Self.listings.sql) FROM uploads WHERE id = ?", [.text(id)]) { row in
                var url = ParsedOnce.urls
                found = Self.listing(Self.listings(row), url: &url)
            }
            return found
        }
    }

    /// What changed since `version`, as another process or this one wrote it: each upload written since, and the IDs
    /// of those removed since, with the database's version now.
    func changes(since version: Int64) -> (version: Int64, written: [Listed], removed: [String])? {
        try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            let now = try Self.version(on: connection)
            guard now != version else { return (now, [], []) }
            var written: [Listed] = []
            try connection.run(
                "SELECT \(Self.summaries.sql) FROM uploads WHERE version > ? ORDER BY sequence, id",
                [.integer(version)]
            ) { written.append(Self.listed(Self.summaries($0))) }
            var removed: [String] = []
            try connection.run("SELECT id FROM removals WHERE version > ?", [.integer(version)]) { row in
                if let id = row.text(0) { removed.append(id) }
            }
            return (now, written, removed)
        }
    }

    /// How many uploads the database holds.
    var count: Int {
        (try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            var count: Int64 = 0
            try connection.run("SELECT count(*) FROM uploads") { count = $0.integer(0) ?? 0 }
            return Int(count)
        }) ?? 0
    }

    /// The database's version: every transaction that writes adds one.
    var version: Int64 {
        (try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            try Self.version(on: connection)
        }) ?? 0
    }

    static func version(on connection: SQLiteDatabase.Connection) throws(SQLiteDatabase.Failure) -> Int64 {
        var now: Int64 = 0
        try connection.run("SELECT value FROM meta WHERE name = 'version'") { now = $0.integer(0) ?? 0 }
        return now
    }

    /// The record of the upload `id`, whole.
    func read(_ id: String) throws(QueueRecord.Damage) -> QueueRecord {
        let found: Result<QueueRecord, QueueRecord.Damage>?
        do throws(SQLiteDatabase.Failure) {
            found = try database.withConnection { connection throws(SQLiteDatabase.Failure) in
                try Self.record(id, on: connection)
            }
        } catch {
            throw QueueRecord.Damage(reason: "it cannot be read: \(error)")
        }
        guard let found else { throw QueueRecord.Damage(reason: "it is gone", gone: true) }
        return try found.get()
    }

    /// The record of `id`, or why it cannot be read; `nil` for none.
    static func record(_ id: String, on connection: SQLiteDatabase.Connection) throws(SQLiteDatabase.Failure)
        -> Result<QueueRecord, QueueRecord.Damage>?
    {
        var found: Result<QueueRecord, QueueRecord.Damage>?
        try connection.run(
            "SELECT \(records.sql) FROM records JOIN uploads USING (id) WHERE id = ?", [.text(id)]
        ) { row in
            let row = records(row)
            guard let json = row.blob(.record) else { return }
            do throws(QueueRecord.Damage) {
                var record = try QueueRecord.decoded(json, bytes: row.blob(.bytes) ?? Data(), id: id)
                record.state = state(row)
                found = .success(record)
            } catch {
                found = .failure(error)
            }
        }
        return found
    }

    /// How the upload `id` was removed: `nil` while it has not been; else its answer where it had completed.
    func removal(of id: String) -> Removed? {
        try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            var found: Removed?
            try connection.run("SELECT \(Self.removals.sql) FROM removals WHERE id = ?", [.text(id)]) { row in
                let row = Self.removals(row)
                found = row.integer(.completed) == 1 ? .completed(Self.answer(row)) : .removed
            }
            return found
        }
    }

    /// How the last upload removed with `key` was, with its ID: `nil` for a key no removed upload had.
    func removal(ofKey key: String) -> (id: String, removed: Removed)? {
        removals(ofKeys: [key])[key]
    }

    /// ``removal(ofKey:)`` for each of `keys` that a removed upload had, by key: a query for each 256 keys (a
    /// thousand photos are added at once), each the same statement, prepared once.
    func removals(ofKeys keys: [String]) -> [String: (id: String, removed: Removed)] {
        var found: [String: (id: String, removed: Removed)] = [:]
        guard let first = keys.first else { return found }
        try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            for start in stride(from: 0, to: keys.count, by: Self.keysAQuery) {
                let chunk = keys[start..<min(start + Self.keysAQuery, keys.count)].map(SQLiteDatabase.Value.text)
                let padded = chunk + Array(repeating: .text(first), count: Self.keysAQuery - chunk.count)
                // The latest removal of a key comes last, and stays.
                try connection.run(Self.removalsOfKeys, padded) { row in
                    let row = Self.keyedRemovals(row)
                    if let key = row.text(.key), let id = row.text(.id) {
                        found[key] = (id, row.integer(.completed) == 1 ? .completed(nil) : .removed)
                    }
                }
            }
        }
        return found
    }

    // MARK: Rows

    /// The queue's order: the caller's latest move first, then the order added (``QueueSchedule/Rank``).
    private static let order = "ORDER BY coalesce(priority, 0) DESC, sequence, id"

    /// What the schedule needs of an upload (``QueueRecord/Summary``).
    private static let summaries = Selection([
        .id, .sequence, .key, .priority, .contentLength, .url, .standing, .reason,
    ])
    /// A summary and a listing, in one row.
    private static let listings = Selection(
        summaries.columns + [
            .added, .sentAgain, .files, .answerStatus, .answerHeaders, .answerBody, .runner, .category,
        ])
    /// What the add fixed, and the state.
    private static let records = Selection([.record, .bytes] + stateColumns)
    private static let removals = Selection([.completed, .answerStatus, .answerHeaders, .answerBody])
    private static let keyedRemovals = Selection([.key, .id, .completed])

    private static let keysAQuery = 256
    private static let removalsOfKeys =
        "SELECT \(keyedRemovals.sql) FROM removals WHERE key IN ("
        + Array(repeating: "?", count: keysAQuery).joined(separator: ", ") + ") ORDER BY version"

    private static func listed(_ row: Selection.Row) -> Listed {
        let id = row.text(.id) ?? ""
        guard let sequence = row.integer(.sequence), sequence >= 0, let length = row.integer(.contentLength),
            length >= 0, let url = row.text(.url),
            let standing = row.text(.standing).flatMap({ UploadStanding(column: $0, reason: row.text(.reason)) })
        else { return .damaged(id: id, reason: "its row is not a record this version reads") }
        return .record(
            QueueRecord.Summary(
                id: id, sequence: Int(sequence), key: row.text(.key), priority: row.integer(.priority).map { Int($0) },
                contentLength: UInt64(length), url: url, standing: standing))
    }

    /// The listing in `row`, its URL parsed by `url`.
    private static func listing(_ row: Selection.Row, url: inout ParsedOnce<URL?>) -> Listing {
        Listing(
            url: url(row.text(.url) ?? ""), added: Date(timeIntervalSince1970: row.real(.added) ?? 0),
            sentAgain: Int(row.integer(.sentAgain) ?? 0), files: Listing.split(row.blob(.files) ?? Data()),
            answer: answer(row), runner: row.integer(.runner).flatMap { Int32(exactly: $0) },
            category: row.text(.category).flatMap(category(named:)))
    }

    /// A completed upload's answer, or a refusal's: status, headers, body; `nil` for none.
    static func answer(_ row: Selection.Row) -> QueueRecord.Answer? {
        guard let body = row.blob(.answerBody) else { return nil }
        let fields = Listing.split(row.blob(.answerHeaders) ?? Data())
        var headers: [String: String] = [:]
        for pair in stride(from: 0, to: fields.count - 1, by: 2) { headers[fields[pair]] = fields[pair + 1] }
        return QueueRecord.Answer(statusCode: row.integer(.answerStatus).map { Int($0) }, headers: headers, body: body)
    }

    /// The state in `row`: each field from its own column; the standing, which they make, is not read back.
    static func state(_ row: Selection.Row) -> QueueRecord.State {
        var outcome: QueueRecord.Outcome?
        let answer = answer(row)
        if let reason = row.text(.reason) {
            let failure = MultipartUploadQueue.Failure(
                reason: reason, category: row.text(.category).flatMap(category(named:)),
                answer: answer.map(MultipartUploadQueue.Answer.init))
            outcome = .failed(failure)
        } else if let answer {
            outcome = .completed(answer)
        }
        let flag = { (column: Column) -> Bool? in row.integer(column) == 1 ? true : nil }
        return QueueRecord.State(
            paused: flag(.paused), runner: row.integer(.runner).flatMap { Int32(exactly: $0) },
            removing: flag(.removing), priority: row.integer(.priority).map { Int($0) }, outcome: outcome,
            starts: Int(row.integer(.starts) ?? 0), sentAgain: Int(row.integer(.sentAgain) ?? 0),
            sentWhole: row.real(.sentWhole).map(Date.init(timeIntervalSince1970:)),
            generation: row.integer(.generation).map { Int($0) })
    }

    /// The category a column names; `nil` for one this version does not know.
    static func category(named name: String) -> MultipartError.Category? {
        let known: [MultipartError.Category] = [.file, .form, .stream, .upload, .resumable, .status, .output]
        return known.first { Self.name($0) == name }
    }

    /// A failure's ``MultipartError/Category`` as its column holds it.
    static func name(_ category: MultipartError.Category) -> String {
        String(describing: category)
    }
}
