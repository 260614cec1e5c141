import Foundation
import MultipartStream

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The queue's directory on disk, and the one place that lists, reads, writes and removes the records of its uploads:
/// one SQLite database, `queue.sqlite`, in write-ahead-log mode, that every process of the queue shares. The
/// directory is this user's and `0700`, the database `0600`, opened without following a link; an upload's saved state
/// is a directory of its own beside it.
///
/// A row of `uploads` holds what the schedule needs (its place, key, priority, length, URL and standing), which the
/// queue lists by index without reading a form, and what changes as the upload goes (``QueueRecord/State``);
/// `records` holds what the add fixed, in JSON, apart, written once: a send's start and end change a few columns of
/// one row, and read and write no form. A write is one transaction, synced to disk unless it says otherwise; the
/// changes of several uploads go in one (``update(_:syncing:)``), as the run writes the ends of the sends that came
/// together with the starts that follow them. Every transaction bumps the database's `version`, which each row it
/// wrote, and each removal, carries, so that a process finds what the others changed since it last looked.
struct QueueStore: Sendable {
    let url: URL
    private let files: SavedUploadDirectory
    private let database: SQLiteDatabase

    /// The database's file name in the queue's directory.
    static let databaseName = "queue.sqlite"

    /// The directory, made `0700` if it does not exist, and its database, made if it does not exist. A directory
    /// that others may write, or another user's, is refused, and so are a database file that is not this user's
    /// regular file with no permission for others, and a directory that holds an earlier layout of the queue (a file
    /// a record): this version does not read it.
    init(_ url: URL) throws(MultipartError) {
        self.url = url
        files = SavedUploadDirectory(url, interopVersions: [])
        try files.prepare()
        let path = url.appendingPathComponent(Self.databaseName).path
        var earlier: String?
        try? POSIX.forEachName(inDirectory: url.path) { name in
            if earlier == nil, !name.hasPrefix("."), name.hasSuffix(".json") || name.hasSuffix(".records") {
                earlier = name
            }
        }
        if let earlier {
            throw MultipartError(
                .queueUnreadable(
                    url,
                    reason:
                        "it holds \(earlier), a record of an earlier layout of files, which this version does not read")
            )
        }
        try Self.checkFile(path, in: url)
        var found: Int64?
        do throws(SQLiteDatabase.Failure) {
            database = try SQLiteDatabase(path: path)
            try database.withConnection { connection throws(SQLiteDatabase.Failure) in
                // Another layout is refused before anything is written to it.
                found = try Self.otherLayout(on: connection)
                guard found.map({ Self.fromEarlierLayouts[$0] != nil }) ?? true else { return }
                // A commit is on disk when it returns (FULL); the log lets readers in other processes go on while
                // one writes. A record of a few kilobytes takes a 4 KiB page of its own, and splits one at every
                // add: 16 KiB pages (set before the first table, and kept) hold several, and took a hundred
                // thousand adds from 4.7 s of SQLite's to 2.9.
                try connection.execute("PRAGMA page_size = 16384; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL")
                // Made, and its layout said, in one transaction: another process opening it at once sees both or
                // neither.
                try connection.execute("BEGIN IMMEDIATE")
                do throws(SQLiteDatabase.Failure) {
                    found = try Self.otherLayout(on: connection)
                    if let earlier = found, let steps = Self.fromEarlierLayouts[earlier] {
                        try connection.execute(steps)
                        found = nil
                    } else if found == nil, try Self.isEmpty(connection) {
                        try connection.execute(Self.schema + "PRAGMA user_version = \(Self.layout);")
                    }
                    try connection.execute("COMMIT")
                } catch {
                    try? connection.execute("ROLLBACK")
                    throw error
                }
            }
        } catch {
            throw MultipartError(.queueUnreadable(url, reason: "its database \(path) cannot be opened: \(error)"))
        }
        if let found {
            throw MultipartError(
                .queueUnreadable(
                    url,
                    reason: "its database \(path) is of layout \(found), which this version (layout \(Self.layout)) "
                        + "does not read"))
        }
    }

    /// The database's layout, in its `user_version`: another is refused, not misread, but for ``fromEarlierLayouts``.
    private static let layout: Int64 = 4

    /// The layouts before this one that a first open brings to this one, in the transaction that checks it, with the
    /// statements that do: 3 gained a failed upload's kind of failure (``MultipartUploadQueue/Failure/category``), 4
    /// the key of a removed upload, so that adding the key again adds nothing (``MultipartUploadQueue/end(ofKey:)``;
    /// a removal made before has none).
    private static let fromEarlierLayouts: [Int64: String] = [
        2: "ALTER TABLE uploads ADD COLUMN category TEXT; " + toLayout4,
        3: toLayout4,
    ]
    private static let toLayout4 = """
        ALTER TABLE removals ADD COLUMN key TEXT;
        CREATE INDEX removals_by_key ON removals (key, version) WHERE key IS NOT NULL;
        PRAGMA user_version = 4;
        """

    /// The layout of a database that holds tables of another; `nil` for this one's, or none yet.
    private static func otherLayout(on connection: SQLiteDatabase.Connection) throws(SQLiteDatabase.Failure) -> Int64? {
        var layout: Int64 = 0
        try connection.run("PRAGMA user_version") { layout = $0.integer(0) ?? 0 }
        if layout == Self.layout { return nil }
        return try isEmpty(connection) ? nil : layout
    }

    private static func isEmpty(_ connection: SQLiteDatabase.Connection) throws(SQLiteDatabase.Failure) -> Bool {
        var tables: Int64 = 0
        try connection.run("SELECT count(*) FROM sqlite_master") { tables = $0.integer(0) ?? 0 }
        return tables == 0
    }

    private static let schema = """
        CREATE TABLE uploads (
            id TEXT PRIMARY KEY NOT NULL,
            sequence INTEGER NOT NULL,
            key TEXT,
            priority INTEGER,
            content_length INTEGER NOT NULL,
            url TEXT NOT NULL,
            standing TEXT NOT NULL,
            reason TEXT,
            added REAL NOT NULL,
            sent_again INTEGER NOT NULL,
            files BLOB NOT NULL,
            answer_status INTEGER,
            answer_headers BLOB,
            answer_body BLOB,
            runner INTEGER,
            paused INTEGER,
            removing INTEGER,
            starts INTEGER NOT NULL,
            sent_whole REAL,
            generation INTEGER,
            version INTEGER NOT NULL,
            category TEXT
        ) WITHOUT ROWID;
        CREATE TABLE records (id TEXT PRIMARY KEY NOT NULL, record BLOB NOT NULL, bytes BLOB NOT NULL);
        CREATE INDEX uploads_by_order ON uploads (coalesce(priority, 0) DESC, sequence, id);
        CREATE INDEX uploads_by_key ON uploads (key) WHERE key IS NOT NULL;
        CREATE INDEX uploads_by_version ON uploads (version);
        CREATE TABLE removals (
            id TEXT PRIMARY KEY NOT NULL,
            version INTEGER NOT NULL,
            completed INTEGER NOT NULL DEFAULT 0,
            answer_status INTEGER,
            answer_headers BLOB,
            answer_body BLOB,
            key TEXT
        ) WITHOUT ROWID;
        CREATE INDEX removals_by_version ON removals (version);
        CREATE INDEX removals_by_key ON removals (key, version) WHERE key IS NOT NULL;
        CREATE TABLE servers (origin TEXT PRIMARY KEY NOT NULL, known BLOB NOT NULL) WITHOUT ROWID;
        CREATE TABLE meta (name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO meta (name, value) VALUES ('version', 0);
        """

    /// Makes the database file `0600` where it does not exist, and refuses one that is a link, not a regular file,
    /// another user's, or open to others: the queue's records name its files and its server.
    private static func checkFile(_ path: String, in url: URL) throws(MultipartError) {
        let descriptor: Int32
        do throws(POSIX.Failure) {
            descriptor = try POSIX.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode: 0o600)
        } catch {
            throw MultipartError(.stateUnwritable(URL(fileURLWithPath: path), errno: error.code))
        }
        defer { POSIX.close(descriptor) }
        guard let info = try? POSIX.status(of: descriptor), info.st_mode & S_IFMT == S_IFREG,
            info.st_uid == geteuid(), info.st_mode & 0o077 == 0
        else {
            throw MultipartError(
                .queueUnreadable(url, reason: "its database \(path) is not this user's file alone (0600)"))
        }
    }

    /// One upload as listing the database finds it.
    enum Listed {
        case record(QueueRecord.Summary)
        /// A row that is not a record this version reads, named by its ID, with why.
        case damaged(id: String, reason: String)
    }

    /// Calls `each` with every record's summary in the queue's order, reading no form: a queue of a hundred thousand
    /// is never held twice.
    func forEachRecord(_ each: (Listed) -> Void) {
        try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            try connection.run("SELECT \(Self.summaryColumns) FROM uploads \(Self.order)") { row in
                each(Self.listed(row))
            }
        }
    }

    /// Calls `each` with every upload's summary and listing in the queue's order, in one pass of its index.
    func forEachListing(_ each: (Listed, Listing) -> Void) {
        try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            try connection.run("SELECT \(Self.summaryColumns), \(Self.listingColumns) FROM uploads \(Self.order)") {
                row in each(Self.listed(row), Self.listing(row, from: 8))
            }
        }
    }

    /// The queue's order: the caller's latest move first, then the order added (``QueueSchedule/Rank``).
    private static let order = "ORDER BY coalesce(priority, 0) DESC, sequence, id"
    private static let summaryColumns = "id, sequence, key, priority, content_length, url, standing, reason"
    private static let listingColumns =
        "url, added, sent_again, files, answer_status, answer_headers, answer_body, runner, category"

    /// What changed since `version`, as another process or this one wrote it: each upload written since, and the IDs
    /// of those removed since, with the database's version now.
    func changes(since version: Int64) -> (version: Int64, written: [Listed], removed: [String])? {
        try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            var now: Int64 = 0
            try connection.run("SELECT value FROM meta WHERE name = 'version'") { now = $0.integer(0) ?? 0 }
            guard now != version else { return (now, [], []) }
            var written: [Listed] = []
            try connection.run(
                "SELECT \(Self.summaryColumns) FROM uploads WHERE version > ? ORDER BY sequence, id",
                [.integer(version)]
            ) { written.append(Self.listed($0)) }
            var removed: [String] = []
            try connection.run("SELECT id FROM removals WHERE version > ?", [.integer(version)]) { row in
                if let id = row.text(0) { removed.append(id) }
            }
            return (now, written, removed)
        }
    }

    /// The database's version: every transaction that writes adds one.
    var version: Int64 {
        (try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            var now: Int64 = 0
            try connection.run("SELECT value FROM meta WHERE name = 'version'") { now = $0.integer(0) ?? 0 }
            return now
        }) ?? 0
    }

    private static func listed(_ row: SQLiteDatabase.Row) -> Listed {
        let id = row.text(0) ?? ""
        let standing: QueueRecord.Summary.Standing? =
            switch row.text(6) {
            case "pending": .pending
            case "paused": .paused
            case "completed": .completed
            case "removing": .removing
            case "failed": .failed(reason: row.text(7) ?? "")
            default: nil
            }
        guard let sequence = row.integer(1), sequence >= 0, let length = row.integer(4), length >= 0,
            let url = row.text(5), let standing
        else { return .damaged(id: id, reason: "its row is not a record this version reads") }
        return .record(
            QueueRecord.Summary(
                id: id, sequence: Int(sequence), key: row.text(2), priority: row.integer(3).map { Int($0) },
                contentLength: UInt64(length), url: url, standing: standing))
    }

    /// What a listing says of an upload beside the schedule's state, read without its form: `nil` for none.
    func listing(of id: String) -> Listing? {
        try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            var found: Listing?
            try connection.run("SELECT \(Self.listingColumns) FROM uploads WHERE id = ?", [.text(id)]) { row in
                found = Self.listing(row, from: 0)
            }
            return found
        }
    }

    /// The listing in `row`'s columns from `first` on (``listingColumns``).
    private static func listing(_ row: SQLiteDatabase.Row, from first: Int32) -> Listing {
        Listing(
            url: URL(string: row.text(first) ?? ""), added: Date(timeIntervalSince1970: row.real(first + 1) ?? 0),
            sentAgain: Int(row.integer(first + 2) ?? 0), files: Listing.split(row.blob(first + 3) ?? Data()),
            answer: answer(row, from: first + 4), runner: row.integer(first + 7).flatMap { Int32(exactly: $0) },
            category: row.text(first + 8).flatMap(category(named:)))
    }

    /// A completed upload's answer in `row`'s columns from `first` on: status, headers, body; `nil` for none.
    private static func answer(_ row: SQLiteDatabase.Row, from first: Int32) -> QueueRecord.Answer? {
        guard let body = row.blob(first + 2) else { return nil }
        let fields = Listing.split(row.blob(first + 1) ?? Data())
        var headers: [String: String] = [:]
        for pair in stride(from: 0, to: fields.count - 1, by: 2) { headers[fields[pair]] = fields[pair + 1] }
        return QueueRecord.Answer(statusCode: row.integer(first).map { Int($0) }, headers: headers, body: body)
    }

    /// What a listing shows of an upload.
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

    /// The record of the upload `id`, whole.
    func read(_ id: String) throws(QueueRecord.Damage) -> QueueRecord {
        let found: Stored?
        do throws(SQLiteDatabase.Failure) {
            found = try database.withConnection { connection throws(SQLiteDatabase.Failure) in
                try Self.stored(id, on: connection)
            }
        } catch {
            throw QueueRecord.Damage(reason: "it cannot be read: \(error)")
        }
        guard let found else { throw QueueRecord.Damage(reason: "it is gone", gone: true) }
        return try found.record(id)
    }

    /// Changes the state of the upload `id` as it stands on disk (``QueueRecord/State``), in one transaction that no
    /// other process's write can come between: each writer changes only the fields it owns (a send what it counted,
    /// another process a pause), and none writes a copy it read earlier over what changed since. Only the columns that
    /// changed are written; the form is neither read nor written. The state as written, or as it stands where
    /// `declines` says to leave it; `nil` for an upload that is gone, where nothing is written.
    @discardableResult
    func update(
        _ id: String, syncing: Bool = true, unless declines: (QueueRecord.State) -> Bool = { _ in false },
        _ change: (inout QueueRecord.State) -> Void
    ) throws(MultipartError) -> QueueRecord.State? {
        try withoutActuallyEscaping(declines) { declines throws(MultipartError) in
            try withoutActuallyEscaping(change) { change throws(MultipartError) in
                try update([StateChange(id: id, declines: declines, change: change)], syncing: syncing)[0]
            }
        }
    }

    /// One change of an upload's state, among others written together.
    struct StateChange {
        var id: String
        /// Says where the state is left as it stands.
        var declines: (QueueRecord.State) -> Bool = { _ in false }
        var change: (inout QueueRecord.State) -> Void
    }

    /// Makes `changes` in one transaction, in order, each as ``update(_:syncing:unless:_:)`` makes one: the end of
    /// one send and the start of the next are one commit. Each state as written, in order; where one cannot be
    /// written, none of them is.
    func update(_ changes: [StateChange], syncing: Bool = true) throws(MultipartError) -> [QueueRecord.State?] {
        var written: [QueueRecord.State?] = []
        do throws(SQLiteDatabase.Failure) {
            try changing(syncing: syncing) { connection, version throws(SQLiteDatabase.Failure) in
                written = []
                for change in changes {
                    var found: QueueRecord.State?
                    try connection.run("SELECT \(Self.stateSelection) FROM uploads WHERE id = ?", [.text(change.id)]) {
                        found = Self.state($0, from: 0)
                    }
                    guard var state = found, !change.declines(state) else {
                        written.append(found)
                        continue
                    }
                    let before = Self.stateRow(state)
                    change.change(&state)
                    try Self.set(
                        Self.stateColumns, from: before, to: Self.stateRow(state), of: change.id, version,
                        on: connection)
                    written.append(state)
                }
            }
        } catch {
            throw MultipartError(.stateUnwritable(url.appendingPathComponent(Self.databaseName), errno: EIO))
        }
        return written
    }

    /// Changes the record of the upload `id` whole as it stands on disk, its form too (a retry with a file as it is
    /// now), in one transaction, as ``update(_:syncing:unless:_:)`` changes its state. The record as written; `nil`
    /// for one that is gone, where nothing is written.
    @discardableResult
    func rewrite(_ id: String, _ change: (inout QueueRecord) -> Void) throws(MultipartError) -> QueueRecord? {
        var failure: MultipartError?
        var written: QueueRecord?
        do throws(SQLiteDatabase.Failure) {
            try changing(syncing: true) { connection, version throws(SQLiteDatabase.Failure) in
                guard let found = try Self.stored(id, on: connection) else { return }
                let changed: (QueueRecord, (json: Data, bytes: Data))
                var old: QueueRecord?
                do throws(MultipartError) {
                    var record: QueueRecord
                    do throws(QueueRecord.Damage) {
                        record = try found.record(id)
                    } catch {
                        throw MultipartError(
                            .queueUnreadable(url, reason: "the record of \(id) cannot be read: \(error.reason)"))
                    }
                    old = record
                    change(&record)
                    changed = (record, try record.encoded())
                } catch {
                    // The transaction rolls back: nothing of a record that cannot be read or written changes.
                    failure = error
                    throw SQLiteDatabase.Failure(code: 4, message: "the record is left as it was")
                }
                try Self.put(changed.0, changed.1, version: version, on: connection, over: old)
                written = changed.0
            }
        } catch {
            throw failure ?? MultipartError(.stateUnwritable(url.appendingPathComponent(Self.databaseName), errno: EIO))
        }
        return written
    }

    /// Writes `record` whole over its last version, in one transaction, `syncing` it to disk before it returns (else
    /// it outlives a kill of the process, not of the system).
    func write(_ record: QueueRecord, syncing: Bool = true) throws(MultipartError) {
        try write([record], syncing: syncing)
    }

    /// Writes every record in one transaction, synced once: where it cannot be written, none of them is. The
    /// records are encoded on every core first, outside the transaction.
    func write(_ records: [QueueRecord], syncing: Bool = true) throws(MultipartError) {
        guard !records.isEmpty else { return }
        let encoded = try Self.inParallel(records) { record throws(MultipartError) in try record.encoded() }
        do throws(SQLiteDatabase.Failure) {
            try changing(syncing: syncing) { connection, version throws(SQLiteDatabase.Failure) in
                for (record, data) in zip(records, encoded) {
                    try Self.put(record, data, version: version, on: connection)
                }
            }
        } catch {
            throw MultipartError(.stateUnwritable(url.appendingPathComponent(Self.databaseName), errno: EIO))
        }
    }

    /// `transform` of each element, in order, the elements shared among the cores in slices (a thousand records
    /// take 28 µs each to encode alone); the first error, in order, is thrown.
    static func inParallel<Element: Sendable, Value: Sendable>(
        _ elements: [Element], _ transform: @Sendable (Element) throws(MultipartError) -> Value
    ) throws(MultipartError) -> [Value] {
        guard elements.count >= 64 else {
            var values: [Value] = []
            values.reserveCapacity(elements.count)
            for element in elements { values.append(try transform(element)) }
            return values
        }
        let slices = min(elements.count / 32, ProcessInfo.processInfo.activeProcessorCount * 4)
        let places = Places<Result<Value, MultipartError>>(count: elements.count)
        defer { places.deallocate() }
        DispatchQueue.concurrentPerform(iterations: slices) { slice in
            for place in (elements.count * slice / slices)..<(elements.count * (slice + 1) / slices) {
                do throws(MultipartError) {
                    places.set(place, .success(try transform(elements[place])))
                } catch {
                    places.set(place, .failure(error))
                }
            }
        }
        // Every place taken before any error is thrown: none is left behind.
        let results = (0..<elements.count).map { places.take($0) }
        var values: [Value] = []
        values.reserveCapacity(elements.count)
        for result in results { values.append(try result.get()) }
        return values
    }

    /// Memory for one value a place, each place written by one thread alone and read once they all are.
    private struct Places<Value>: @unchecked Sendable {
        // @unchecked: every place is written by one slice alone, and read after `concurrentPerform` returned.
        private let pointer: UnsafeMutablePointer<Value>

        init(count: Int) {
            pointer = .allocate(capacity: count)
        }

        func set(_ place: Int, _ value: Value) {
            (pointer + place).initialize(to: value)
        }

        /// The value of `place`, moved out: each place is taken once.
        func take(_ place: Int) -> Value {
            (pointer + place).move()
        }

        func deallocate() {
            pointer.deallocate()
        }
    }

    /// A record as the database holds it: what the add fixed, as ``QueueRecord/encoded()`` made it, and the state.
    private struct Stored {
        var json: Data
        var bytes: Data
        var state: QueueRecord.State

        func record(_ id: String) throws(QueueRecord.Damage) -> QueueRecord {
            var record = try QueueRecord.decoded(json, bytes: bytes, id: id)
            record.state = state
            return record
        }
    }

    /// The record of `id`; `nil` for none.
    private static func stored(_ id: String, on connection: SQLiteDatabase.Connection) throws(SQLiteDatabase.Failure)
        -> Stored?
    {
        var found: Stored?
        try connection.run(
            "SELECT records.record, records.bytes, \(stateSelection) FROM records JOIN uploads USING (id) WHERE id = ?",
            [.text(id)]
        ) { row in
            if let json = row.blob(0) {
                found = Stored(json: json, bytes: row.blob(1) ?? Data(), state: state(row, from: 2))
            }
        }
        return found
    }

    /// Writes the row of `record` and the record, encoded as `data`, in the transaction of `version`; over the row
    /// of `old`, where the upload has one, only the columns that changed (``set(_:from:to:of:_:on:)``).
    private static func put(
        _ record: QueueRecord, _ data: (json: Data, bytes: Data), version: Int64,
        on connection: SQLiteDatabase.Connection, over old: QueueRecord? = nil
    ) throws(SQLiteDatabase.Failure) {
        let row = Self.row(record)
        if let old {
            try set(columns, from: Self.row(old), to: row, of: record.id, version, on: connection)
            try connection.run(
                "UPDATE records SET record = ?, bytes = ? WHERE id = ?", [.blob(data.json), .blob(data.bytes), row[0]])
            return
        }
        try connection.run(Self.insertion, row + [.integer(version)])
        try connection.run(
            "INSERT OR REPLACE INTO records (id, record, bytes) VALUES (?, ?, ?)",
            [row[0], .blob(data.json), .blob(data.bytes)])
        try connection.run("DELETE FROM removals WHERE id = ?", [row[0]])
    }

    private static let insertion =
        "INSERT OR REPLACE INTO uploads (\(columns.joined(separator: ", ")), version) VALUES ("
        + Array(repeating: "?", count: columns.count + 1).joined(separator: ", ") + ")"

    /// Writes the row `id`'s `columns` whose value differs `from` one row `to` the other, and its `version`: an index
    /// none of them is in is left as it is (a send's start or end changes a few, and four indexes' pages each
    /// rewritten would be most of its commit).
    private static func set(
        _ columns: [String], from before: [SQLiteDatabase.Value], to after: [SQLiteDatabase.Value], of id: String,
        _ version: Int64, on connection: SQLiteDatabase.Connection
    ) throws(SQLiteDatabase.Failure) {
        var assignments = ["version = ?"]
        var values: [SQLiteDatabase.Value] = [.integer(version)]
        for (place, column) in columns.enumerated() where after[place] != before[place] && column != "id" {
            assignments.append("\(column) = ?")
            values.append(after[place])
        }
        try connection.run(
            "UPDATE uploads SET \(assignments.joined(separator: ", ")) WHERE id = ?", values + [.text(id)])
    }

    /// Removes the records of the uploads `ids`, in one transaction, leaving each ID's removal for other processes
    /// to find.
    func removeRecords(_ ids: [String]) {
        guard !ids.isEmpty else { return }
        try? changing(syncing: true) { connection, version throws(SQLiteDatabase.Failure) in
            for id in ids {
                // A completed upload's answer stays with its removal: a process that asked for the removal says the
                // server has the form.
                // Its key stays with it too: adding the key again adds nothing (`end(ofKey:)`).
                try connection.run(
                    "INSERT OR REPLACE INTO removals (id, version, completed, answer_status, answer_headers,"
                        + " answer_body, key) SELECT ?1, ?2, 1, answer_status, answer_headers,"
                        + " coalesce(answer_body, x''), key FROM uploads WHERE id = ?1 AND \(Self.holdsCompletion)"
                        + " UNION ALL SELECT ?1, ?2, 0, NULL, NULL, NULL, (SELECT key FROM uploads WHERE id = ?1)"
                        + " WHERE NOT EXISTS (SELECT 1 FROM uploads WHERE id = ?1 AND \(Self.holdsCompletion))",
                    [.text(id), .integer(version)])
                try connection.run("DELETE FROM uploads WHERE id = ?", [.text(id)])
                try connection.run("DELETE FROM records WHERE id = ?", [.text(id)])
            }
        }
    }

    /// A row whose answer is a completion's: a failed upload's answer (a refusal) goes with its reason.
    private static let holdsCompletion = "answer_body IS NOT NULL AND reason IS NULL"

    /// How the upload `id` was removed: `nil` while it has not been; else its answer where it had completed.
    func removal(of id: String) -> Removed? {
        try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            var found: Removed?
            try connection.run(
                "SELECT completed, answer_status, answer_headers, answer_body FROM removals WHERE id = ?", [.text(id)]
            ) { row in
                found = row.integer(0) == 1 ? .completed(Self.answer(row, from: 1)) : .removed
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
                    if let key = row.text(0), let id = row.text(1) {
                        found[key] = (id, row.integer(2) == 1 ? .completed(nil) : .removed)
                    }
                }
            }
        }
        return found
    }

    private static let keysAQuery = 256
    private static let removalsOfKeys =
        "SELECT key, id, completed FROM removals WHERE key IN ("
        + Array(repeating: "?", count: keysAQuery).joined(separator: ", ") + ") ORDER BY version"

    /// How an upload was removed.
    enum Removed: Equatable {
        /// Before it completed.
        case removed
        /// Once the server had the form, with its answer (`nil`: a row that holds none).
        case completed(QueueRecord.Answer?)
    }

    /// Removes the record of the upload `id`, if it is there.
    func removeRecord(_ id: String) {
        removeRecords([id])
    }

    /// Runs `body` in a transaction that bumps the database's version, with that version.
    private func changing(
        syncing: Bool, _ body: (SQLiteDatabase.Connection, Int64) throws(SQLiteDatabase.Failure) -> Void
    ) throws(SQLiteDatabase.Failure) {
        try database.withConnection { connection throws(SQLiteDatabase.Failure) in
            // A write that may be lost with the system (not with the process) skips the sync of its commit.
            if !syncing { try connection.execute("PRAGMA synchronous = NORMAL") }
            defer { if !syncing { try? connection.execute("PRAGMA synchronous = FULL") } }
            try connection.execute("BEGIN IMMEDIATE")
            do throws(SQLiteDatabase.Failure) {
                var version: Int64 = 0
                try connection.run("UPDATE meta SET value = value + 1 WHERE name = 'version' RETURNING value") {
                    version = $0.integer(0) ?? 0
                }
                try body(connection, version)
                try connection.execute("COMMIT")
            } catch {
                try? connection.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// The columns of ``row(_:)``, in its order: what the add fixed, then the state's (``stateColumns``).
    private static let columns = ["id", "sequence", "key", "content_length", "url", "added", "files"] + stateColumns

    /// The row of `record`.
    private static func row(_ record: QueueRecord) -> [SQLiteDatabase.Value] {
        [
            .text(record.id), .integer(Int64(record.sequence)), .optional(record.key),
            .integer(Int64(clamping: record.contentLength)), .text(record.request.url.absoluteString),
            .real(record.added.timeIntervalSince1970), .blob(Listing.joined(record.files.map(\.path))),
        ] + stateRow(record.state)
    }

    /// The columns of ``stateRow(_:)``, in its order.
    private static let stateColumns = [
        "standing", "reason", "priority", "sent_again", "answer_status", "answer_headers", "answer_body", "runner",
        "paused", "removing", "starts", "sent_whole", "generation", "category",
    ]

    /// The columns of a state, for ``state(_:from:)`` to read.
    private static let stateSelection = stateColumns.joined(separator: ", ")

    /// The columns of `state`: where the upload stands, as listings and indexes take it, then each field.
    private static func stateRow(_ state: QueueRecord.State) -> [SQLiteDatabase.Value] {
        var answer: QueueRecord.Answer?
        var (reason, category): (String?, String?)
        switch state.outcome {
        case .completed(let completed)?: answer = completed
        case .failed(let failure)?:
            (reason, category, answer) = (failure.reason, failure.category.map(Self.name), failure.answer?.stored)
        case nil: break
        }
        let standing =
            switch QueueRecord.Summary.Standing(state) {
            case .pending: "pending"
            case .paused: "paused"
            case .completed: "completed"
            case .removing: "removing"
            case .failed: "failed"
            }
        let flag = { (set: Bool?) -> SQLiteDatabase.Value in set == true ? .integer(1) : .null }
        return [
            .text(standing), .optional(reason), .optional(state.priority), .integer(Int64(state.sentAgain)),
            .optional(answer?.statusCode),
            answer.map { .blob(Listing.joined($0.headers.sorted { $0.key < $1.key }.flatMap { [$0.key, $0.value] })) }
                ?? .null,
            answer.map { .blob($0.body) } ?? .null, state.runner.map { .integer(Int64($0)) } ?? .null,
            flag(state.paused), flag(state.removing), .integer(Int64(state.starts)),
            state.sentWhole.map { .real($0.timeIntervalSince1970) } ?? .null, .optional(state.generation),
            .optional(category),
        ]
    }

    /// The state in `row`'s columns from `first` on, in ``stateColumns``' order (``stateSelection``): each field
    /// from its own column; the standing, which they make, is not read back.
    private static func state(_ row: SQLiteDatabase.Row, from first: Int32) -> QueueRecord.State {
        var outcome: QueueRecord.Outcome?
        let answer = answer(row, from: first + 4)
        if let reason = row.text(first + 1) {
            let failure = MultipartUploadQueue.Failure(
                reason: reason, category: row.text(first + 13).flatMap(Self.category(named:)),
                answer: answer.map(MultipartUploadQueue.Answer.init))
            outcome = .failed(failure)
        } else if let answer {
            outcome = .completed(answer)
        }
        let flag = { (column: Int32) -> Bool? in row.integer(first + column) == 1 ? true : nil }
        return QueueRecord.State(
            paused: flag(8), runner: row.integer(first + 7).flatMap { Int32(exactly: $0) }, removing: flag(9),
            priority: row.integer(first + 2).map { Int($0) }, outcome: outcome,
            starts: Int(row.integer(first + 10) ?? 0), sentAgain: Int(row.integer(first + 3) ?? 0),
            sentWhole: row.real(first + 11).map(Date.init(timeIntervalSince1970:)),
            generation: row.integer(first + 12).map { Int($0) })
    }

    /// A failure's ``MultipartError/Category`` as its column holds it.
    static func name(_ category: MultipartError.Category) -> String {
        String(describing: category)
    }

    /// The category a column names; `nil` for one this version does not know.
    static func category(named name: String) -> MultipartError.Category? {
        let known: [MultipartError.Category] = [.file, .form, .stream, .upload, .resumable, .status, .output]
        return known.first { Self.name($0) == name }
    }

    /// What each origin's server was found to speak (``MultipartStream/ResumableUpload/KnownServer``), by its
    /// serialized origin; a row that does not decode is left out, and asked again.
    func knownServers() -> [String: ResumableUpload.KnownServer] {
        var known: [String: ResumableUpload.KnownServer] = [:]
        try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            try connection.run("SELECT origin, known FROM servers") { row in
                guard let origin = row.text(0), let data = row.blob(1),
                    let server = try? JSONDecoder().decode(ResumableUpload.KnownServer.self, from: data)
                else { return }
                known[origin] = server
            }
        }
        return known
    }

    /// Keeps what `origin`'s server was found to speak, for every later run. Not synced: one lost is asked again.
    func keep(_ server: ResumableUpload.KnownServer, for origin: String) {
        guard let data = try? JSONEncoder().encode(server) else { return }
        try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            try connection.execute("PRAGMA synchronous = NORMAL")
            defer { try? connection.execute("PRAGMA synchronous = FULL") }
            try connection.run(
                "INSERT OR REPLACE INTO servers (origin, known) VALUES (?, ?)", [.text(origin), .blob(data)])
        }
    }

    /// Forgets what `origin`'s server was found to speak: it speaks no draft now.
    func forgetServer(_ origin: String) {
        try? database.withConnection { connection throws(SQLiteDatabase.Failure) in
            try connection.run("DELETE FROM servers WHERE origin = ?", [.text(origin)])
        }
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
