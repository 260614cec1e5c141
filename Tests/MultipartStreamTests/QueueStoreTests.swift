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
        keyed.priority = -2
        keyed.outcome = .failed(reason: "the server answered 400\r\nX-Injected: 1")
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

    @Test func aWriteAndARemovalReachAnotherConnectionAsChanges() throws {
        let records = try (0..<5).map { try record(sequence: $0, key: "k\($0)") }
        let other = try QueueStore(directory.path("queue"))
        let before = other.version
        try store.write(records)
        let added = try #require(other.changes(since: before))
        #expect(added.version == before + 1, "one transaction for the call")
        #expect(added.written.count == 5 && added.removed.isEmpty)
        var paused = records[2]
        paused.paused = true
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
        try store.write([good, bad, worse])
        // Another writer, as another process or a hand with the sqlite3 command would be.
        let other = try SQLiteDatabase(path: directory.path("queue/\(QueueStore.databaseName)").path)
        try other.withConnection { connection throws(SQLiteDatabase.Failure) in
            try connection.run("UPDATE uploads SET standing = 'lost' WHERE id = ?", [.text(bad.id)])
            try connection.run("UPDATE records SET record = x'7b00' WHERE id = ?", [.text(worse.id)])
        }
        let listed = store.list()
        #expect(listed.count == 3)
        for case .damaged(let id, let reason) in listed {
            #expect(id == bad.id && reason.contains("not a record"), "\(reason)")
        }
        #expect(store.summaries().map(\.id) == [good.id, worse.id])
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
