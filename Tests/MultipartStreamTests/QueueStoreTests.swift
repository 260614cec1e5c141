import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartQueue
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The queue's database: what a row keeps and lists, what another connection (another process) sees of a write,
/// and the files and layouts it refuses.
@Suite struct QueueStoreTests {
    let directory: TemporaryDirectory
    let store: QueueStore

    init() throws {
        directory = try TemporaryDirectory()
        store = try QueueStore(directory.path("queue"))
    }

    private func record(sequence: Int = 7, key: String? = "photos/IMG_0001.HEIC") throws -> QueueRecord {
        var form = try MultipartFormData(boundary: "b")
        form.append("a title", name: "title")
        form.append(Data([0, 13, 10]), name: "raw", fileName: "raw.bin")
        return QueueRecord(
            id: UUID().uuidString.lowercased(), key: key, sequence: sequence, added: Date(timeIntervalSince1970: 1e9),
            request: try QueueRecord.Request(URLRequest(url: URL(string: "http://127.0.0.1:9/up?x=%25")!)),
            form: try QueueRecord.Form(form), contentLength: try #require(form.contentLength))
    }

    @Test func aRecordIsListedFromItsColumnsAndReadWhole() throws {
        var keyed = try record(sequence: 3, key: "a\tb\r\nc%41 \u{0}d")
        keyed.state.priority = -2
        keyed.state.outcome = .failed(.init(reason: "the server answered 400\r\nX-Injected: 1"))
        let plain = try record(sequence: 1, key: nil)
        try store.write([keyed, plain])
        #expect(store.summaries() == [plain.summary, keyed.summary], "in the queue's order, every string as it was")
        let read = try store.read(keyed.id)
        #expect(read.key == keyed.key)
        #expect(read.form.parts.map(\.bytes) == keyed.form.parts.map(\.bytes) && read.form.boundary == "b")
        #expect(read.request.url.absoluteString == "http://127.0.0.1:9/up?x=%25")
        #expect(try mode(directory.path("queue")) == 0o700)
        #expect(try mode(directory.path("queue/\(QueueStore.databaseName)")) == 0o600)
        #expect(throws: QueueRecord.Damage.self) { try store.read("no-such-upload") }
    }

    /// Every field of a record's state goes to its columns and comes back as it was, through a whole write, a change
    /// of the state alone, and a change of several uploads in one transaction; the form is left as the add wrote it.
    @Test func everyFieldOfTheStateComesBackAsItWasWritten() throws {
        var record = try record()
        let answer = QueueRecord.Answer(
            statusCode: 201, headers: ["Location": "/u/1", "X-Odd": "a\r\nb"], body: Data([0, 1, 2]))
        var states = [
            QueueRecord.State(
                paused: true, runner: 4_242, removing: true, priority: -3, outcome: .completed(answer), starts: 2,
                sentAgain: 1, sentWhole: Date(timeIntervalSince1970: 1_700_000_000.25), generation: 4),
            QueueRecord.State(outcome: .failed(.init(reason: "the server answered 400\r\nX-Injected: 1"))),
            // A refusal keeps its kind and its answer, and is never read back as a completion.
            QueueRecord.State(
                outcome: .failed(
                    .init(
                        reason: "the server answered 413", category: .status,
                        answer: .init(
                            statusCode: 413, headers: ["Content-Type": "application/json"], body: Data("{}".utf8))
                    ))),
            QueueRecord.State(outcome: .failed(.init(reason: "photo.jpg changed", category: .file))),
            QueueRecord.State(outcome: .completed(QueueRecord.Answer(statusCode: nil, headers: [:], body: Data()))),
            QueueRecord.State(),
        ]
        for state in states {
            record.state = state
            try store.write(record)
            #expect(try store.read(record.id).state == state, "written whole")
        }
        for state in states.reversed() {
            #expect(try store.update(record.id) { $0 = state } == state)
            let read = try store.read(record.id)
            #expect(read.state == state, "changed alone")
            #expect(read.form.parts.map(\.bytes) == record.form.parts.map(\.bytes) && read.sequence == 7)
        }
        // Two uploads in one transaction: one declined, left as it stands; another gone, nothing made of it.
        let other = try self.record(sequence: 8, key: nil)
        try store.write(other)
        let version = store.version
        states = [QueueRecord.State(runner: 1), QueueRecord.State(starts: 9)]
        let written = try store.update([
            QueueStore.StateChange(id: record.id, change: { $0 = states[0] }),
            QueueStore.StateChange(id: other.id, declines: { $0.starts == 0 }, change: { $0 = states[1] }),
            QueueStore.StateChange(id: "no-such-upload", change: { $0.paused = true }),
        ])
        #expect(written == [states[0], QueueRecord.State(), nil])
        #expect(store.version == version + 1, "one transaction")
        #expect(try store.read(record.id).state == states[0] && store.read(other.id).state == QueueRecord.State())
    }

    /// A database of another layout (an earlier build's, whose records held their state in JSON) is refused, naming
    /// it, and left as it is.
    @Test func aDatabaseOfAnotherLayoutIsRefusedAndLeftAsItIs() throws {
        let earlier = directory.path("earlier")
        try FileManager.default.createDirectory(at: earlier, withIntermediateDirectories: false)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: earlier.path)
        let path = earlier.appendingPathComponent(QueueStore.databaseName).path
        do {
            let database = try SQLiteDatabase(path: path)
            try database.withConnection { connection throws(SQLiteDatabase.Failure) in
                try connection.execute("CREATE TABLE records (id TEXT PRIMARY KEY NOT NULL, record BLOB NOT NULL)")
            }
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        do {
            _ = try QueueStore(earlier)
            Issue.record("a database of another layout was opened")
        } catch {
            guard case .queueUnreadable(let url, let reason) = error.reason else { throw error }
            #expect(url == earlier && reason.contains(path) && reason.contains("layout 0"), "\(reason)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    @Test func aWriteAndARemovalReachAnotherConnectionAsChanges() throws {
        let records = try (0..<5).map { try record(sequence: $0, key: "k\($0)") }
        let other = try QueueStore(directory.path("queue"))
        let before = other.version
        try store.write(records)
        let added = try #require(other.changes(since: before))
        #expect(added.version == before + 1, "one transaction for the call")
        #expect(added.written.count == 5 && added.removed.isEmpty)
        var paused = records[2]
        paused.state.paused = true
        try store.write(paused, syncing: false)
        store.removeRecords([records[0].id, records[4].id])
        let steered = try #require(other.changes(since: added.version))
        #expect(steered.version == added.version + 2)
        #expect(steered.written.count == 1 && steered.removed.sorted() == [records[0].id, records[4].id].sorted())
        guard case .record(let summary)? = steered.written.first else {
            Issue.record("\(steered.written)")
            return
        }
        #expect(summary.standing == .paused && summary.id == records[2].id)
        #expect(other.summaries().map(\.id) == [records[1].id, records[2].id, records[3].id])
        #expect(other.changes(since: steered.version).map { $0.written.isEmpty && $0.removed.isEmpty } == true)
        // Written again, a removed upload is no longer removed.
        try store.write(records[0])
        #expect(other.changes(since: steered.version)?.removed == [])
    }

    /// Two processes change one record at once: a send counts what it sent again while another process pauses and
    /// moves the upload. Each changes the record as it stands on disk, in a transaction of its own, so that neither
    /// writes its earlier copy over the other's change.
    @Test func twoConnectionsChangingOneRecordAtOnceLoseNeitherChange() async throws {
        let written = try record()
        try store.write(written)
        let other = try QueueStore(directory.path("queue"))
        let rounds = 200
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [store] in
                for _ in 0..<rounds { _ = try? store.update(written.id, syncing: false) { $0.sentAgain += 1 } }
            }
            group.addTask {
                for round in 0..<rounds {
                    _ = try? other.update(written.id, syncing: false) {
                        $0.priority = round
                        $0.paused = true
                    }
                }
            }
        }
        let read = try store.read(written.id)
        #expect(read.state.sentAgain == rounds, "every count of the send, against \(rounds)")
        #expect(
            read.state.priority == rounds - 1 && read.state.paused == true,
            "the other connection's last move and its pause")
        #expect(try store.update("no-such-upload") { $0.paused = true } == nil, "nothing made of an upload gone")
        #expect(store.summaries().count == 1)
    }

    /// IDs made one after another sort in that order, so that adds go to the ends of the database's indexes: UUIDs
    /// of version 7, their first 48 bits the time in milliseconds, then a count within it, the rest random. The same
    /// millisecond, and a clock that goes back, count on.
    @Test func newIDsAreVersion7UUIDsInTheOrderMade() throws {
        let start = Date(timeIntervalSince1970: 4_000_000_000.123)
        // Three a millisecond, then twice the first time again, then 5,000 in one millisecond: more than its count.
        let times =
            (0..<2_000).map { start.addingTimeInterval(Double($0 / 3) / 1_000) } + [start, start]
            + Array(repeating: start, count: 5_000)
        var clock = MultipartUploadQueue.IDClock()
        let ids = times.map { MultipartUploadQueue.newID(at: $0, after: &clock) }
        for (one, next) in zip(ids, ids.dropFirst()) { #expect(one < next, "\(one) before \(next)") }
        for id in ids {
            let uuid = try #require(UUID(uuidString: id), "\(id)")
            #expect(id == id.lowercased() && uuid.uuid.6 >> 4 == 7 && uuid.uuid.8 >> 6 == 0b10, "\(id)")
        }
        #expect(ids[0].hasPrefix("03a35294-407b-7000-"), "\(ids[0]): 4,000,000,000,123 ms, count 0")
        #expect(MultipartUploadQueue.newID() != MultipartUploadQueue.newID())
    }

    @Test func anEarlierLayoutIsRefusedAndLeftAsItIs() throws {
        let earlier = directory.path("earlier")
        try FileManager.default.createDirectory(at: earlier, withIntermediateDirectories: false)
        let record = earlier.appendingPathComponent("000000000001-3f2a.json")
        try Data("{}".utf8).write(to: record)
        do {
            _ = try QueueStore(earlier)
            Issue.record("an earlier layout was opened")
        } catch {
            guard case .queueUnreadable(let url, let reason) = error.reason else { throw error }
            #expect(url == earlier && reason.contains("000000000001-3f2a.json"), "\(reason)")
            #expect(error.description.contains(earlier.path), "\(error)")
        }
        #expect(FileManager.default.fileExists(atPath: record.path))
        #expect(!FileManager.default.fileExists(atPath: earlier.appendingPathComponent(QueueStore.databaseName).path))
    }

    @Test func aDatabaseOthersMayReadOrThatIsALinkIsRefused() throws {
        let database = directory.path("queue/\(QueueStore.databaseName)")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: database.path)
        #expect(throws: MultipartError.self) { try QueueStore(directory.path("queue")) }
        let linked = directory.path("linked")
        try FileManager.default.createDirectory(at: linked, withIntermediateDirectories: false)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: linked.path)
        try FileManager.default.createSymbolicLink(
            at: linked.appendingPathComponent(QueueStore.databaseName), withDestinationURL: database)
        #expect(throws: MultipartError.self) { try QueueStore(linked) }
    }

    @Test func aDamagedRowIsListedSoAndItsRecordFailsToRead() throws {
        let (good, bad, worse) = (try record(sequence: 1), try record(sequence: 2), try record(sequence: 3))
        let (short, long) = (try record(sequence: 4, key: nil), try record(sequence: 5, key: nil))
        try store.write([good, bad, worse, short, long])
        // Another writer, as another process or a hand with the sqlite3 command would be.
        let other = try SQLiteDatabase(path: directory.path("queue/\(QueueStore.databaseName)").path)
        try other.withConnection { connection throws(SQLiteDatabase.Failure) in
            try connection.run("UPDATE uploads SET standing = 'lost' WHERE id = ?", [.text(bad.id)])
            try connection.run("UPDATE records SET record = x'7b00' WHERE id = ?", [.text(worse.id)])
            // The parts' bytes, kept beside the JSON: one byte short of what the parts say, and one over.
            try connection.run("UPDATE records SET bytes = substr(bytes, 2) WHERE id = ?", [.text(short.id)])
            try connection.run("UPDATE records SET bytes = bytes || x'00' WHERE id = ?", [.text(long.id)])
        }
        for broken in [short, long] {
            #expect {
                try store.read(broken.id)
            } throws: { error in
                let reason = (error as? QueueRecord.Damage)?.reason ?? ""
                return reason.contains("bytes")
            }
            // A change of its state reads and writes no form: it is made, and the form stays as damaged as it was.
            #expect(try store.update(broken.id) { $0.paused = true }?.paused == true)
            #expect(throws: QueueRecord.Damage.self) { try store.read(broken.id) }
            let version = store.version
            #expect(throws: MultipartError.self, "a change of the whole record reads it first") {
                try store.rewrite(broken.id) { $0.state.paused = nil }
            }
            #expect(store.version == version, "rolled back: no other process hears of a change")
            #expect(try store.update(broken.id) { _ in }?.paused == true, "the pause as it was")
        }
        let listed = store.list()
        #expect(listed.count == 5)
        for case .damaged(let id, let reason) in listed {
            #expect(id == bad.id && reason.contains("not a record"), "\(reason)")
        }
        #expect(store.summaries().map(\.id) == [good.id, worse.id, short.id, long.id])
        #expect(throws: QueueRecord.Damage.self) { try store.read(worse.id) }
        #expect(try store.read(good.id).id == good.id)
    }

    private func mode(_ url: URL) throws -> Int {
        try (FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int) ?? -1
    }
}

extension QueueStore {
    /// Every record as listing finds it, in the queue's order.
    func list() -> [Listed] {
        var all: [Listed] = []
        forEachRecord { all.append($0) }
        return all
    }

    /// The summary of every record listing finds, in the queue's order.
    func summaries() -> [QueueRecord.Summary] {
        list().compactMap { listed in
            if case .record(let summary) = listed { return summary }
            return nil
        }
    }
}

// The trials' shorthands: one record, and one upload's state changed by a closure, as the queue's typed writes make
// them.
extension QueueStore {
    fileprivate func write(_ record: QueueRecord, syncing: Bool = true) throws(MultipartError) {
        try write([record], syncing: syncing)
    }

    @discardableResult
    fileprivate func update(
        _ id: String, syncing: Bool = true, _ change: (inout QueueRecord.State) -> Void
    ) throws(MultipartError) -> QueueRecord.State? {
        try withoutActuallyEscaping(change) { change throws(MultipartError) in
            try update([StateChange(id: id, change: change)], syncing: syncing)[0]
        }
    }
}
