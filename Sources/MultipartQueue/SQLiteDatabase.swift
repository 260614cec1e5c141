import Foundation
import MultipartStream

#if canImport(SQLite3)
    import SQLite3
#else
    import CSQLite
#endif

/// One connection to an SQLite database, used from any thread: every call holds the connection's lock, so that a
/// statement's steps and a transaction's statements are never interleaved with another thread's.
final class SQLiteDatabase: @unchecked Sendable {
    // @unchecked: `handle` and the statements are used under `lock` only.
    private let handle: OpaquePointer
    private let lock = NSLock()
    private var statements: [String: OpaquePointer] = [:]

    /// Why a call failed: SQLite's message and code.
    struct Failure: Error, CustomStringConvertible {
        var code: Int32
        var message: String
        var description: String { "\(message) (SQLite \(code))" }
    }

    /// Opens the database file at `path`, made where it does not exist, without following a link in its last
    /// component.
    init(path: String) throws(Failure) {
        var opened: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW
        let code = sqlite3_open_v2(path, &opened, flags, nil)
        guard code == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(opened)
            throw Failure(code: code, message: message)
        }
        handle = opened
        // Another process's write holds the database for a moment: wait for it rather than fail.
        sqlite3_busy_timeout(handle, 10_000)
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    /// Runs `body` alone on the connection.
    func withConnection<Result>(_ body: (Connection) throws(Failure) -> Result) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(Connection(database: self))
    }

    /// The connection, for the calls of one `withConnection`.
    struct Connection {
        fileprivate let database: SQLiteDatabase

        /// Runs `sql`, one or more statements with no parameters and no rows.
        func execute(_ sql: String) throws(Failure) {
            var message: UnsafeMutablePointer<CChar>?
            let code = sqlite3_exec(database.handle, sql, nil, nil, &message)
            defer { sqlite3_free(message) }
            guard code == SQLITE_OK else {
                throw Failure(code: code, message: message.map { String(cString: $0) } ?? "\(sql) failed")
            }
        }

        /// Runs the statement `sql` with `values` bound in order, calling `row` with each row it gives.
        func run(_ sql: String, _ values: [Value] = [], row: (Row) throws(Failure) -> Void = { _ in }) throws(Failure) {
            let statement = try database.prepared(sql)
            defer {
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
            }
            for (index, value) in values.enumerated() {
                let place = Int32(index + 1)
                let code: Int32
                switch value {
                case .null: code = sqlite3_bind_null(statement, place)
                case .integer(let number): code = sqlite3_bind_int64(statement, place, number)
                case .real(let number): code = sqlite3_bind_double(statement, place, number)
                case .text(let text):
                    // By its length: a NUL inside is kept, not an end.
                    var text = text
                    code = text.withUTF8 { bytes in
                        bytes.withMemoryRebound(to: CChar.self) { characters in
                            guard let start = characters.baseAddress else {
                                return sqlite3_bind_text64(statement, place, "", 0, Self.transient, UInt8(SQLITE_UTF8))
                            }
                            return sqlite3_bind_text64(
                                statement, place, start, UInt64(characters.count), Self.transient, UInt8(SQLITE_UTF8))
                        }
                    }
                case .blob(let data):
                    code = data.withUnsafeBytes { bytes in
                        sqlite3_bind_blob64(
                            statement, place, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), UInt64(bytes.count),
                            Self.transient)
                    }
                }
                guard code == SQLITE_OK else { throw database.failure(code) }
            }
            while true {
                let code = sqlite3_step(statement)
                if code == SQLITE_DONE { return }
                guard code == SQLITE_ROW else { throw database.failure(code) }
                try row(Row(statement: statement))
            }
        }

        /// The rows changed by the last statement.
        var changes: Int { Int(sqlite3_changes(database.handle)) }

        /// SQLite copies a bound value before the call returns.
        private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
    }

    /// A value bound to a statement.
    enum Value: Equatable {
        case null
        case integer(Int64)
        case real(Double)
        case text(String)
        case blob(Data)

        static func optional(_ text: String?) -> Value { text.map(Value.text) ?? .null }
        static func optional(_ number: Int?) -> Value { number.map { .integer(Int64($0)) } ?? .null }
    }

    /// One row of a statement's result, read while its step is current.
    struct Row {
        fileprivate let statement: OpaquePointer

        func integer(_ column: Int32) -> Int64? {
            sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, column)
        }

        func real(_ column: Int32) -> Double? {
            sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : sqlite3_column_double(statement, column)
        }

        func text(_ column: Int32) -> String? {
            guard let bytes = sqlite3_column_text(statement, column) else { return nil }
            let count = Int(sqlite3_column_bytes(statement, column))
            return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
        }

        func blob(_ column: Int32) -> Data? {
            guard sqlite3_column_type(statement, column) != SQLITE_NULL else { return nil }
            let count = Int(sqlite3_column_bytes(statement, column))
            guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return Data() }
            return Data(bytes: bytes, count: count)
        }
    }

    /// The statement `sql`, prepared once for the connection's life: a queue runs the same few thousands of times.
    private func prepared(_ sql: String) throws(Failure) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else { throw failure(code) }
        statements[sql] = statement
        return statement
    }

    private func failure(_ code: Int32) -> Failure {
        Failure(code: code, message: String(cString: sqlite3_errmsg(handle)))
    }
}
