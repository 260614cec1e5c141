import Foundation
import MultipartStream

extension QueueStore {
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
}
