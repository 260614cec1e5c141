import Foundation
import MultipartStream

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension QueueStore {
    /// Writes `changes` of uploads' states, each one of ``QueueRecord/Change``, in one transaction, synced where one
    /// of them is: the queue's one way to change a state, its run's and its sends' alike. A start is left undone
    /// where the state declines it (``QueueRecord/Change/declines(_:)``). The state each wrote, or found and left, in
    /// order; `nil` for an upload gone.
    func update(_ changes: [(id: String, change: QueueRecord.Change)]) throws(MultipartError) -> [QueueRecord.State?] {
        try update(
            changes.map { StateChange(id: $0.id, declines: $0.change.declines, change: $0.change.apply) },
            syncing: changes.contains { $0.change.isSynced })
    }

    /// One change of an upload's state, among others written together.
    struct StateChange {
        var id: String
        /// Says where the state is left as it stands.
        var declines: (QueueRecord.State) -> Bool = { _ in false }
        var change: (inout QueueRecord.State) -> Void
    }

    /// Makes `changes` in one transaction, in order: the end of one send and the start of the next are one commit.
    /// Each changes the state of its upload as it stands on disk (``QueueRecord/State``), in a transaction that no
    /// other process's write can come between: each writer changes only the fields it owns (a send what it counted,
    /// another process a pause), and none writes a copy it read earlier over what changed since. Only the columns
    /// that changed are written; the form is neither read nor written. Each state as written, or as it stands where
    /// its `declines` says to leave it, in order; `nil` for an upload that is gone, where nothing is written. Where
    /// one cannot be written, none of them is.
    func update(_ changes: [StateChange], syncing: Bool = true) throws(MultipartError) -> [QueueRecord.State?] {
        var written: [QueueRecord.State?] = []
        do throws(SQLiteDatabase.Failure) {
            try changing(syncing: syncing) { connection, version throws(SQLiteDatabase.Failure) in
                written = []
                for change in changes {
                    var found: QueueRecord.State?
                    try connection.run("SELECT \(Self.states.sql) FROM uploads WHERE id = ?", [.text(change.id)]) {
                        found = Self.state(Self.states($0))
                    }
                    guard var state = found, !change.declines(state) else {
                        written.append(found)
                        continue
                    }
                    var values = Values()
                    values.set(state)
                    let before = values
                    change.change(&state)
                    values.set(state)
                    try Self.set(Self.stateColumns, from: before, to: values, of: change.id, version, on: connection)
                    written.append(state)
                }
                return .commit
            }
        } catch {
            throw unwritable
        }
        return written
    }

    /// Changes the record of the upload `id` whole as it stands on disk, its form too (a retry with a file as it is
    /// now), in one transaction, as ``update(_:syncing:)`` changes its state. The record as written; `nil`
    /// for one that is gone, where nothing is written.
    @discardableResult
    func rewrite(_ id: String, _ change: (inout QueueRecord) -> Void) throws(MultipartError) -> QueueRecord? {
        var failure: MultipartError?
        var written: QueueRecord?
        do throws(SQLiteDatabase.Failure) {
            try changing(syncing: true) { connection, version throws(SQLiteDatabase.Failure) in
                guard let found = try Self.record(id, on: connection) else { return .commit }
                let (old, record, data): (QueueRecord, QueueRecord, (json: Data, bytes: Data))
                do throws(MultipartError) {
                    do throws(QueueRecord.Damage) {
                        old = try found.get()
                    } catch {
                        throw MultipartError(
                            .queueUnreadable(url, reason: "the record of \(id) cannot be read: \(error.reason)"))
                    }
                    var changed = old
                    change(&changed)
                    (record, data) = (changed, try changed.encoded())
                } catch {
                    // Nothing of a record that cannot be read or written changes.
                    failure = error
                    return .rollBack
                }
                try Self.put(record, data, version: version, on: connection, over: old)
                written = record
                return .commit
            }
        } catch {
            throw unwritable
        }
        if let failure { throw failure }
        return written
    }

    /// Writes every record in one transaction, synced once: where it cannot be written, none of them is. The
    /// records are encoded on every core first, outside the transaction.
    func write(_ records: [QueueRecord], syncing: Bool = true) throws(MultipartError) {
        guard !records.isEmpty else { return }
        let encoded = try inParallel(records) { record throws(MultipartError) in try record.encoded() }
        do throws(SQLiteDatabase.Failure) {
            try changing(syncing: syncing) { connection, version throws(SQLiteDatabase.Failure) in
                for (record, data) in zip(records, encoded) {
                    try Self.put(record, data, version: version, on: connection)
                }
                return .commit
            }
        } catch {
            throw unwritable
        }
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
            return .commit
        }
    }

    /// Removes the record of the upload `id`, if it is there.
    func removeRecord(_ id: String) {
        removeRecords([id])
    }

    /// A row whose answer is a completion's: a failed upload's answer (a refusal) goes with its reason.
    private static let holdsCompletion = "answer_body IS NOT NULL AND reason IS NULL"

    private var unwritable: MultipartError {
        MultipartError(.stateUnwritable(url.appendingPathComponent(Self.databaseName), errno: EIO))
    }

    // MARK: Rows

    /// The columns of an upload's row: what the add fixed, then its state's (``stateColumns``).
    private static let columns: [Column] = [.id, .sequence, .key, .contentLength, .url, .added, .files] + stateColumns

    /// The columns of an upload's state: where it stands, as listings and indexes take it, then each field.
    static let stateColumns: [Column] = [
        .standing, .reason, .priority, .sentAgain, .answerStatus, .answerHeaders, .answerBody, .runner, .paused,
        .removing, .starts, .sentWhole, .generation, .category,
    ]
    private static let states = Selection(stateColumns)

    private static let insertion =
        "INSERT OR REPLACE INTO uploads (\(columns.map(\.name).joined(separator: ", ")), version) VALUES ("
        + Array(repeating: "?", count: columns.count + 1).joined(separator: ", ") + ")"

    /// A row's values, by column.
    private struct Values {
        private var values = [SQLiteDatabase.Value](repeating: .null, count: Column.allCases.count)

        subscript(column: Column) -> SQLiteDatabase.Value {
            get { values[column.rawValue] }
            set { values[column.rawValue] = newValue }
        }

        /// The values of `record`'s row.
        init(_ record: QueueRecord) {
            self[.id] = .text(record.id)
            self[.sequence] = .integer(Int64(record.sequence))
            self[.key] = .optional(record.key)
            self[.contentLength] = .integer(Int64(clamping: record.contentLength))
            self[.url] = .text(record.request.url.absoluteString)
            self[.added] = .real(record.added.timeIntervalSince1970)
            self[.files] = .blob(Listing.joined(record.files.map(\.path)))
            set(record.state)
        }

        init() {}

        /// The state's columns, as `state` has them.
        mutating func set(_ state: QueueRecord.State) {
            var answer: QueueRecord.Answer?
            var (reason, category): (String?, String?)
            switch state.outcome {
            case .completed(let completed)?: answer = completed
            case .failed(let failure)?:
                (reason, category, answer) = (
                    failure.reason, failure.category.map(QueueStore.name), failure.answer?.stored
                )
            case nil: break
            }
            let flag = { (set: Bool?) -> SQLiteDatabase.Value in set == true ? .integer(1) : .null }
            self[.standing] = .text(UploadStanding(state).column)
            self[.reason] = .optional(reason)
            self[.priority] = .optional(state.priority)
            self[.sentAgain] = .integer(Int64(state.sentAgain))
            self[.answerStatus] = .optional(answer?.statusCode)
            self[.answerHeaders] =
                answer.map {
                    .blob(Listing.joined($0.headers.sorted { $0.key < $1.key }.flatMap { [$0.key, $0.value] }))
                }
                ?? .null
            self[.answerBody] = answer.map { .blob($0.body) } ?? .null
            self[.runner] = state.runner.map { .integer(Int64($0)) } ?? .null
            self[.paused] = flag(state.paused)
            self[.removing] = flag(state.removing)
            self[.starts] = .integer(Int64(state.starts))
            self[.sentWhole] = state.sentWhole.map { .real($0.timeIntervalSince1970) } ?? .null
            self[.generation] = .optional(state.generation)
            self[.category] = .optional(category)
        }
    }

    /// Writes the row of `record` and the record, encoded as `data`, in the transaction of `version`; over the row
    /// of `old`, where the upload has one, only the columns that changed (``set(_:from:to:of:_:on:)``).
    private static func put(
        _ record: QueueRecord, _ data: (json: Data, bytes: Data), version: Int64,
        on connection: SQLiteDatabase.Connection, over old: QueueRecord? = nil
    ) throws(SQLiteDatabase.Failure) {
        let row = Values(record)
        if let old {
            try set(columns, from: Values(old), to: row, of: record.id, version, on: connection)
            try connection.run(
                "UPDATE records SET record = ?, bytes = ? WHERE id = ?",
                [.blob(data.json), .blob(data.bytes), .text(record.id)])
            return
        }
        try connection.run(Self.insertion, columns.map { row[$0] } + [.integer(version)])
        try connection.run(
            "INSERT OR REPLACE INTO records (id, record, bytes) VALUES (?, ?, ?)",
            [.text(record.id), .blob(data.json), .blob(data.bytes)])
        try connection.run("DELETE FROM removals WHERE id = ?", [.text(record.id)])
    }

    /// Writes the row `id`'s `columns` whose value differs `from` one row `to` the other, and its `version`: an index
    /// none of them is in is left as it is (a send's start or end changes a few, and four indexes' pages each
    /// rewritten would be most of its commit).
    private static func set(
        _ columns: [Column], from before: Values, to after: Values, of id: String, _ version: Int64,
        on connection: SQLiteDatabase.Connection
    ) throws(SQLiteDatabase.Failure) {
        var assignments = ["version = ?"]
        var values: [SQLiteDatabase.Value] = [.integer(version)]
        for column in columns where after[column] != before[column] && column != .id {
            assignments.append("\(column.name) = ?")
            values.append(after[column])
        }
        try connection.run(
            "UPDATE uploads SET \(assignments.joined(separator: ", ")) WHERE id = ?", values + [.text(id)])
    }
}
