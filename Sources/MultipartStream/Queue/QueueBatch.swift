import Foundation

/// The records one ``MultipartUploadQueue/add(contentsOf:)`` call adds, in one file: each record's summary line and
/// its JSON line, in the call's order, then a line for each of them removed since.
///
/// A file of its own costs a record about 120 µs to create on ext4, most of what adding a hundred thousand took; a
/// batch of a thousand costs about as much as one. The file is made whole, as a record is, and only appended to
/// after. A record written again goes to a file of its own, which wins over its lines here; the batch is removed
/// once none of its records lives only in it.
struct QueueBatch: Sendable {
    static let fileExtension = ".records"

    /// The file's name.
    let name: String
    /// Each record's sequence, in order.
    private var sequences: [Int]
    /// The hash of each record's file name, which tells two records of one sequence apart (two processes that added
    /// at once).
    private var nameHashes: [Int]
    /// Where each record's lines begin, and one more: where the last ends.
    private var offsets: [Int]
    private var entries: [Entry]
    /// How many records live only here.
    private(set) var only: Int

    /// Where a record of the batch is.
    enum Entry: UInt8, Sendable {
        /// Here alone.
        case only
        /// In a file of its own, written since.
        case moved
        /// Removed from the queue.
        case removed
    }

    /// A new batch's name, which starts with its first sequence.
    static func name(first: Int) -> String {
        "batch-" + String(format: "%012d-", first) + UUID().uuidString.lowercased() + fileExtension
    }

    /// The file of `records` and the batch it is.
    static func encoded(_ records: [QueueRecord]) throws(MultipartError) -> (data: Data, batch: QueueBatch) {
        let records = records.sorted { $0.sequence < $1.sequence }
        var batch = QueueBatch(name: name(first: records.first?.sequence ?? 0))
        var data = Data()
        for record in records {
            batch.append(record.sequence, nameHash: record.fileName.hashValue, at: data.count)
            let encoded = try record.encoded()
            // Two lines, or the batch could not be read back: JSON escapes a line end in a string.
            guard Self.lineEnds(in: encoded) == 1 else {
                throw MultipartError(.stateUnwritable(URL(fileURLWithPath: record.fileName), errno: EINVAL))
            }
            data += encoded
            data.append(UInt8(ascii: "\n"))
        }
        batch.offsets.append(data.count)
        return (data, batch)
    }

    /// How many line ends `data` holds (memchr: a record is read byte by byte a hundred thousand times otherwise).
    private static func lineEnds(in data: Data) -> Int {
        data.withUnsafeBytes { buffer in
            guard var rest = buffer.baseAddress.map(UnsafeRawPointer.init) else { return 0 }
            var (left, count) = (buffer.count, 0)
            while left > 0, let found = memchr(rest, 0x0A, left) {
                count += 1
                left -= UnsafeRawPointer(found) - rest + 1
                rest = UnsafeRawPointer(found) + 1
            }
            return count
        }
    }

    private init(name: String) {
        self.name = name
        (sequences, nameHashes, offsets, entries, only) = ([], [], [], [], 0)
    }

    private mutating func append(_ sequence: Int, nameHash: Int, at offset: Int) {
        sequences.append(sequence)
        nameHashes.append(nameHash)
        offsets.append(offset)
        entries.append(.only)
        only += 1
    }

    /// What finds a record's place in any batch, worked out once from its file name.
    struct Key {
        let sequence: Int
        let nameHash: Int

        /// The key of the record in the file `fileName`; `nil` for a name that is no record's.
        init?(_ fileName: String) {
            guard let sequence = Int(fileName.prefix(12)) else { return nil }
            (self.sequence, nameHash) = (sequence, fileName.hashValue)
        }
    }

    /// The place of the record `key`; `nil` for one not in the batch.
    func place(of key: Key) -> Int? {
        var (low, high) = (0, sequences.count)
        while low < high {
            let middle = (low + high) / 2
            if sequences[middle] < key.sequence { low = middle + 1 } else { high = middle }
        }
        return sequences[low...].prefix { $0 == key.sequence }.indices.first { nameHashes[$0] == key.nameHash }
    }

    func entry(at place: Int) -> Entry { entries[place] }

    /// The bytes of the record at `place`: its summary line and its JSON.
    func range(at place: Int) -> Range<Int> { offsets[place]..<offsets[place + 1] }

    /// Marks the record at `place` as `entry` from now on.
    mutating func mark(_ place: Int, _ entry: Entry) {
        if entries[place] == .only, entry != .only { only -= 1 }
        entries[place] = entry
    }

    /// The line that says the record in the file `fileName` was removed.
    static func removal(of fileName: String) -> Data {
        Data((removalMagic + "\t" + QueueRecord.Summary.escaped(fileName) + "\n").utf8)
    }

    private static let removalMagic = "multipart-queue-removed/1"

    /// Why a batch file cannot be read.
    struct Damage: Error {
        var reason: String
    }

    /// Reads the batch whose file `descriptor` is open: calls `each` with the summary of every record not removed,
    /// and returns the batch, each record marked `moved` where `moved` says its own file exists. One pass that keeps
    /// the batch's summaries, never its forms (however large), until the removals at its end have been read.
    static func read(
        _ descriptor: Int32, name: String, moved: (String) -> Bool, each: (QueueRecord.Summary) -> Void
    ) throws(Damage) -> QueueBatch {
        var removed = Set<String>()
        var summaries: [(summary: QueueRecord.Summary, offset: Int)] = []
        var last = 0
        // Lines alternate: a summary, its record's JSON, and so on; then removals.
        var expectingJSON = false
        var sawRemoval = false
        try forEachLine(descriptor) { (line: Data?, offset: Int, end: Int) throws(Damage) in
            if expectingJSON {
                expectingJSON = false
                last = end
                return
            }
            guard let line else { throw Damage(reason: "a line at byte \(offset) is too long for a summary") }
            if line.starts(with: Data(removalMagic.utf8)) {
                let fields = line.split(separator: UInt8(ascii: "\t"), omittingEmptySubsequences: false)
                guard fields.count == 2,
                    let fileName = QueueRecord.Summary.unescaped(String(decoding: fields[1], as: UTF8.self))
                else { throw Damage(reason: "the line at byte \(offset) is not a removal") }
                removed.insert(fileName)
                sawRemoval = true
                return
            }
            guard !sawRemoval, let summary = QueueRecord.Summary(line: line) else {
                throw Damage(reason: "the line at byte \(offset) is not a record's summary")
            }
            guard summary.sequence >= summaries.last?.summary.sequence ?? 0 else {
                throw Damage(reason: "the record at byte \(offset) is out of its batch's order")
            }
            summaries.append((summary, offset))
            expectingJSON = true
        }
        guard !expectingJSON else { throw Damage(reason: "its last record has no JSON line") }
        var batch = QueueBatch(name: name)
        for (summary, offset) in summaries {
            let fileName = summary.fileName
            batch.append(summary.sequence, nameHash: fileName.hashValue, at: offset)
            if removed.contains(fileName) {
                batch.mark(batch.entries.count - 1, .removed)
            } else if moved(fileName) {
                batch.mark(batch.entries.count - 1, .moved)
            } else {
                each(summary)
            }
        }
        batch.offsets.append(last)
        return batch
    }

    /// The longest summary line read.
    private static let largestSummary = 1 << 20

    /// Calls `body` with each whole line of the file: its bytes (`nil` past ``largestSummary``, which is not kept),
    /// where it starts, and where the next starts. A last line without its end (an append cut short) is not one.
    private static func forEachLine(
        _ descriptor: Int32, _ body: (Data?, Int, Int) throws(Damage) -> Void
    ) throws(Damage) {
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var line = Data()
        var tooLong = false
        var (start, position) = (0, 0)
        while true {
            let read = chunk.withUnsafeMutableBytes { try? POSIX.read(descriptor, into: $0) }
            guard let count = read else { throw Damage(reason: "it cannot be read") }
            if count == 0 { return }
            var from = 0
            while from < count {
                guard let newline = chunk[from..<count].firstIndex(of: UInt8(ascii: "\n")) else {
                    if !tooLong { line.append(contentsOf: chunk[from..<count]) }
                    break
                }
                if !tooLong { line.append(contentsOf: chunk[from..<newline]) }
                let end = position + newline + 1
                try body(tooLong || line.count > largestSummary ? nil : line, start, end)
                (line, tooLong, start, from) = (Data(), false, end, newline + 1)
            }
            if line.count > largestSummary { (line, tooLong) = (Data(), true) }
            position += count
        }
    }
}
