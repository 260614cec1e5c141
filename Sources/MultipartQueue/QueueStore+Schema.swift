import Foundation

extension QueueStore {
    /// The database's layout, in its `user_version`: another is refused, not misread, but for ``fromEarlierLayouts``.
    static let layout: Int64 = 4

    /// The layouts before this one that a first open brings to this one, in the transaction that checks it, with the
    /// statements that do: 3 gained a failed upload's kind of failure (``MultipartUploadQueue/Failure/category``), 4
    /// the key of a removed upload, so that adding the key again adds nothing (``MultipartUploadQueue/end(ofKey:)``;
    /// a removal made before has none).
    static let fromEarlierLayouts: [Int64: String] = [
        2: "ALTER TABLE uploads ADD COLUMN category TEXT; " + toLayout4,
        3: toLayout4,
    ]
    private static let toLayout4 = """
        ALTER TABLE removals ADD COLUMN key TEXT;
        CREATE INDEX removals_by_key ON removals (key, version) WHERE key IS NOT NULL;
        PRAGMA user_version = 4;
        """

    /// The tables of a new database. A row of `uploads` holds what the schedule needs and what changes as the upload
    /// goes, a row of `records` what the add fixed; `removals` keeps the end of each upload removed, for the other
    /// processes and for its key; `servers` what each origin was found to speak; `meta` the version every write bumps.
    static let schema = """
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

    /// A column of the tables above, by the name the code reads it with. A table's columns of one name hold one thing
    /// (`answer_status` of `uploads` and of `removals`), so that one reading of them serves both.
    enum Column: Int, CaseIterable {
        case id, sequence, key, priority, contentLength, url, standing, reason, added, sentAgain, files
        case answerStatus, answerHeaders, answerBody, runner, paused, removing, starts, sentWhole, generation
        case version, category
        /// `records`' columns: the record's JSON and its parts' bytes.
        case record, bytes
        /// `removals`': whether the upload had completed.
        case completed

        /// Its name in SQL.
        var name: String {
            switch self {
            case .contentLength: "content_length"
            case .sentAgain: "sent_again"
            case .answerStatus: "answer_status"
            case .answerHeaders: "answer_headers"
            case .answerBody: "answer_body"
            case .sentWhole: "sent_whole"
            default: String(describing: self)
            }
        }
    }

    /// The columns one statement selects, in its order: a row of it is read by column, never by a counted place.
    struct Selection {
        let columns: [Column]
        /// The list for the `SELECT`.
        let sql: String
        /// Each column's place in the row, by ``Column/rawValue``; -1 for one not selected.
        private let places: [Int32]

        init(_ columns: [Column]) {
            self.columns = columns
            sql = columns.map(\.name).joined(separator: ", ")
            var places = [Int32](repeating: -1, count: Column.allCases.count)
            for (place, column) in columns.enumerated() { places[column.rawValue] = Int32(place) }
            self.places = places
        }

        /// `row` read by this selection's columns.
        func callAsFunction(_ row: SQLiteDatabase.Row) -> Row {
            Row(row: row, places: places)
        }

        /// One row of the selection.
        struct Row {
            fileprivate let row: SQLiteDatabase.Row
            fileprivate let places: [Int32]

            /// Whether `column` is in the selection: a row type read by several selections reads what each has.
            func has(_ column: Column) -> Bool { places[column.rawValue] >= 0 }

            // A column the selection lacks reads as NULL, never as another column's value.
            func integer(_ column: Column) -> Int64? { has(column) ? row.integer(places[column.rawValue]) : nil }
            func real(_ column: Column) -> Double? { has(column) ? row.real(places[column.rawValue]) : nil }
            func text(_ column: Column) -> String? { has(column) ? row.text(places[column.rawValue]) : nil }
            func blob(_ column: Column) -> Data? { has(column) ? row.blob(places[column.rawValue]) : nil }
        }
    }
}
