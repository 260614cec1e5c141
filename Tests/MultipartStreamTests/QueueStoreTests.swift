import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The queue's records on disk: the summary line a queue opens with, the layout an earlier version wrote, and the
/// files it does not trust.
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

    @Test func aSummaryLineKeepsEveryStringWhateverItHolds() {
        let odd = [
            "", "%", "%41", "a\tb", "line\r\nnext", "\n", "é✓", "=", "%%0A\t", String(repeating: "k", count: 5_000),
        ]
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ab%\t\r\n=0Aé")
        let random = (0..<300).map { _ in
            String(
                (0..<Int.random(in: 0...12, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
        }
        for text in odd + random {
            for standing in [QueueRecord.Summary.Standing.pending, .paused, .completed, .failed(reason: text)] {
                let summary = QueueRecord.Summary(
                    id: text, sequence: 12, key: text, priority: -3, contentLength: .max, url: text, standing: standing)
                let line = summary.line
                #expect(!line.contains("\n") && !line.contains("\r"), "one line: \(line.debugDescription)")
                #expect(QueueRecord.Summary(line: Data(line.utf8)) == summary, "\(text.debugDescription)")
            }
        }
        // No key and an empty key are two things.
        var summary = QueueRecord.Summary(
            id: "i", sequence: 0, key: nil, priority: nil, contentLength: 0, url: "u", standing: .pending)
        #expect(QueueRecord.Summary(line: Data(summary.line.utf8)) == summary)
        summary.key = ""
        #expect(QueueRecord.Summary(line: Data(summary.line.utf8))?.key == "")
        for broken in [
            "", "multipart-queue-record/2", "x\t1\ti\tpending\t\t0\tu\t",
            "multipart-queue-record/2\t1\ti\tgone\t\t0\tu\t",
            "multipart-queue-record/2\t-1\ti\tpending\t\t0\tu\t", "multipart-queue-record/2\t1\t%4\tpending\t\t0\tu\t",
            "multipart-queue-record/2\t1\ti\tpending\t\t0\tu\tkey",
        ] {
            #expect(QueueRecord.Summary(line: Data(broken.utf8)) == nil, "\(broken.debugDescription)")
        }
    }

    @Test func aRecordIsListedByItsFirstLineAndReadWhole() throws {
        let records = [try record(sequence: 2), try record(sequence: 1, key: nil)]
        try store.write(records)
        let listed = store.list().map { listed -> QueueRecord.Summary? in
            if case .record(let summary) = listed { return summary }
            return nil
        }
        #expect(listed == [records[1].summary, records[0].summary], "in the queue's order")
        let read = try store.read(records[0].fileName)
        #expect(read.summary == records[0].summary && read.added == records[0].added)
        #expect(try read.form.rebuilt()?.encode() == records[0].form.rebuilt()?.encode())
        let batches = try batchFiles()
        #expect(batches.count == 1, "the call's records in one file: \(batches)")
        #expect(try mode(store.url.appendingPathComponent(batches[0])) == 0o600)
    }

    /// A batch holds its records until each is written again (then its own file wins) or removed (then a line says
    /// so, and it does not come back in the next process); it goes once none lives only in it.
    @Test func aBatchHoldsItsRecordsUntilEachIsWrittenAgainOrRemoved() throws {
        let records = try (10..<14).map { try record(sequence: $0, key: "k\($0)") }
        try store.write(records)
        #expect(store.summaries() == records.map(\.summary))
        for record in records { #expect(try store.read(record.fileName).summary == record.summary) }

        var paused = records[1]
        paused.paused = true
        try store.write(paused)
        #expect(store.summaries() == [records[0].summary, paused.summary, records[2].summary, records[3].summary])
        #expect(try QueueStore(store.url).summaries() == store.summaries(), "in the next process too")
        #expect(try store.read(paused.fileName).paused == true)

        store.removeRecord(records[2].fileName)
        #expect(throws: QueueRecord.Damage.self) { try store.read(records[2].fileName) }
        store.removeRecord(paused.fileName)
        let next = try QueueStore(store.url)
        #expect(next.summaries() == [records[0].summary, records[3].summary], "removed ones stay removed")
        #expect(try batchFiles().count == 1)

        // The last two written again: no record lives only in the batch, which goes, in this process and the next.
        try next.write(records[0])
        #expect(try batchFiles().count == 1)
        try next.write(records[3])
        #expect(try batchFiles().isEmpty)
        #expect(try QueueStore(store.url).summaries() == [records[0].summary, records[3].summary])
        #expect(try store.read(records[3].fileName).key == "k13", "another copy of the store reads the own file")
    }

    /// A batch that is cut, reordered or not trusted is listed as damaged, by its name; a removal cut short by a
    /// kill is no removal.
    @Test func aBatchThatIsDamagedOrNotTrustedIsListedSo() throws {
        let records = try (0..<3).map { try record(sequence: $0) }
        try store.write(records)
        let name = try #require(try batchFiles().first)
        let file = store.url.appendingPathComponent(name)
        let whole = try Data(contentsOf: file)
        try (whole + Data("multipart-queue-removed/1\t\(records[0].fileName)".utf8)).write(to: file)
        #expect(try QueueStore(store.url).summaries() == records.map(\.summary), "a removal without its line end")
        let lines: [Data] = whole.split(separator: UInt8(ascii: "\n")).map { Data($0) + Data("\n".utf8) }
        let cut = lines.dropLast().concatenated()
        let reordered = [lines[2], lines[3], lines[0], lines[1], lines[4], lines[5]].concatenated()
        let prefixed: Data = Data("garbage\n".utf8) + whole
        let cases: [(Data, String)] = [
            (cut, "its last record has no JSON line"), (reordered, "out of its batch's order"),
            (prefixed, "is not a record's summary"),
        ]
        for (damaged, why) in cases {
            try damaged.write(to: file)
            #expect(try QueueStore(store.url).damage(of: name)?.contains(why) == true, "\(why)")
        }
        try whole.write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o666], ofItemAtPath: file.path)
        #expect(try QueueStore(store.url).damage(of: name)?.contains("others may write") == true)
        // Removing what is listed removes the file.
        store.removeRecord(name)
        #expect(try batchFiles().isEmpty)
    }

    private func batchFiles() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: store.url.path).filter { $0.hasSuffix(".records") }
    }

    @Test func aRecordAnEarlierVersionWroteIsListedAndRead() throws {
        let old = try record()
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        // The layout before the summary line: the record alone, in JSON.
        let file = store.url.appendingPathComponent(old.fileName)
        try encoder.encode(old).write(to: file)
        guard case .record(let summary) = store.list().first else {
            Issue.record("\(store.list())")
            return
        }
        #expect(summary == old.summary)
        #expect(try store.read(old.fileName).key == old.key)
        // Written again, it has the summary line.
        try store.write(try store.read(old.fileName))
        #expect(try Data(contentsOf: file).starts(with: Data("multipart-queue-record/2\t".utf8)))
    }

    @Test func aRecordWhosePartsDisagreeOrThatIsNotTrustedIsDamaged() throws {
        let good = try record()
        try store.write(good)
        let file = store.url.appendingPathComponent(good.fileName)
        // The summary says completed, the record does not.
        let text = try #require(String(data: try Data(contentsOf: file), encoding: .utf8))
        try Data(text.replacingOccurrences(of: "\tpending\t", with: "\tcompleted\t").utf8).write(to: file)
        #expect(throws: QueueRecord.Damage.self) { try store.read(good.fileName) }
        // Under another's name.
        try store.write(good)
        let renamed = QueueRecord.fileName(sequence: 8, id: good.id)
        try FileManager.default.moveItem(at: file, to: store.url.appendingPathComponent(renamed))
        #expect(damage(of: renamed)?.contains("its own name") == true)
        // Checked as saved state is: a link is not followed, nor a file others may write read.
        let elsewhere = directory.path("elsewhere.json")
        try FileManager.default.moveItem(at: store.url.appendingPathComponent(renamed), to: elsewhere)
        try FileManager.default.createSymbolicLink(at: file, withDestinationURL: elsewhere)
        #expect(damage(of: good.fileName)?.contains("cannot be opened") == true)
        try FileManager.default.removeItem(at: file)
        try store.write(good)
        try FileManager.default.setAttributes([.posixPermissions: 0o666], ofItemAtPath: file.path)
        #expect(damage(of: good.fileName)?.contains("others may write") == true)
        #expect(throws: QueueRecord.Damage.self) { try store.read(good.fileName) }
    }

    private func damage(of name: String) -> String? { store.damage(of: name) }

    private func mode(_ url: URL) throws -> Int {
        try (FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int) ?? -1
    }
}

extension QueueStore {
    /// Every record as listing finds it, in the order of their names.
    func list() -> [Listed] {
        var all: [(name: String, listed: Listed)] = []
        forEachRecord { listed in
            switch listed {
            case .record(let summary): all.append((summary.fileName, listed))
            case .damaged(let name, _): all.append((name, listed))
            }
        }
        return all.sorted { $0.name < $1.name }.map(\.listed)
    }

    /// The summary of every record listing finds, in the queue's order.
    func summaries() -> [QueueRecord.Summary] {
        list().compactMap { listed in
            if case .record(let summary) = listed { return summary }
            return nil
        }
    }

    /// Why listing finds the file `name` damaged; `nil` where it is a record.
    func damage(of name: String) -> String? {
        for case .damaged(name, let reason) in list() { return reason }
        return nil
    }
}
