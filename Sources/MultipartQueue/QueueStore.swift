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
    let database: SQLiteDatabase

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

    /// How a transaction ends.
    enum Ending {
        case commit
        /// Nothing it wrote stays.
        case rollBack
    }

    /// Runs `body` in a transaction that bumps the database's version, with that version, ending it as `body` says;
    /// a failure rolls it back.
    func changing(
        syncing: Bool, _ body: (SQLiteDatabase.Connection, Int64) throws(SQLiteDatabase.Failure) -> Ending
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
                switch try body(connection, version) {
                case .commit: try connection.execute("COMMIT")
                case .rollBack: try connection.execute("ROLLBACK")
                }
            } catch {
                try? connection.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// Where an upload keeps its saved state: a directory of its own, so that two uploads of the same form never
    /// share one.
    func stateDirectory(of id: String) -> URL {
        url.appendingPathComponent("state", isDirectory: true).appendingPathComponent(id)
    }

    /// Removes an upload's saved state.
    func removeState(of id: String) {
        let directory = stateDirectory(of: id)
        // Most uploads make none (a form sent whole in one request), and a missing one is an error built for nothing.
        guard FileManager.default.fileExists(atPath: directory.path) else { return }
        try? FileManager.default.removeItem(at: directory)
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
