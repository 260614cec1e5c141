import Foundation
import MultipartQueue
import MultipartStream
import MultipartStreamTestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// What a queue costs: the same small forms sent through a MultipartUploadQueue (records written whole and flushed,
// each upload's state) and through `upload` 3 at a time, alternated, to one byte-counting Node sink on 127.0.0.1
// (Peers/count-sink.mjs, which answers `Expect: 100-continue` and does no work of its own). Every answer's byte
// count is checked. Prints the median of the per-round time ratios; fails past --max-ratio. Then --queued uploads
// added to one queue a thousand a call (add(contentsOf:)), the queue opened anew on its directory (a relaunch),
// listed, and run (unless --no-run): each step's time, and the resident memory it added, per upload; fails past
// --max-kb per upload, where adding took more than --max-add-seconds, or where opening took more than
// --max-open-seconds or, at its height, --max-open-mib, or where the listing (every upload, held) took more than
// --max-list-seconds or, at its height, --max-list-mib.
// Usage: queue-cost [--uploads N] [--rounds R] [--queued N] [--no-run] [--max-ratio X] [--max-kb KB]
//                   [--max-add-seconds S] [--max-open-seconds S] [--max-open-mib M] [--max-list-seconds S]
//                   [--max-list-mib M]

var uploadsPerRound = 1_000
var rounds = 5
var queued = 10_000
var maxRatio: Double?
var maxKB: Double?
var maxAddSeconds: Double?
var maxOpenSeconds: Double?
var maxOpenMiB: Double?
var maxListSeconds: Double?
var maxListMiB: Double?
// The `multipart` command whose `--queue DIR --list` of the many is timed, with its bounds.
var listCommand: String?
var maxCommandSeconds: Double?
var maxCommandMiB: Double?
var runsMany = true
var arguments = CommandLine.arguments.dropFirst()
while let option = arguments.popFirst() {
    if option == "--no-run" {
        runsMany = false
        continue
    }
    switch (option, arguments.popFirst()) {
    case ("--uploads", let value?) where Int(value) != nil: uploadsPerRound = Int(value)!
    case ("--rounds", let value?) where Int(value) != nil: rounds = Int(value)!
    case ("--queued", let value?) where Int(value) != nil: queued = Int(value)!
    case ("--max-ratio", let value?) where Double(value) != nil: maxRatio = Double(value)
    case ("--max-kb", let value?) where Double(value) != nil: maxKB = Double(value)
    case ("--max-add-seconds", let value?) where Double(value) != nil: maxAddSeconds = Double(value)
    case ("--max-open-seconds", let value?) where Double(value) != nil: maxOpenSeconds = Double(value)
    case ("--max-open-mib", let value?) where Double(value) != nil: maxOpenMiB = Double(value)
    case ("--max-list-seconds", let value?) where Double(value) != nil: maxListSeconds = Double(value)
    case ("--max-list-mib", let value?) where Double(value) != nil: maxListMiB = Double(value)
    case ("--list-command", let value?): listCommand = value
    case ("--max-command-seconds", let value?) where Double(value) != nil: maxCommandSeconds = Double(value)
    case ("--max-command-mib", let value?) where Double(value) != nil: maxCommandMiB = Double(value)
    default:
        FileHandle.standardError.write(
            Data(
                ("usage: queue-cost [--uploads N] [--rounds R] [--queued N] [--no-run] [--max-ratio X] [--max-kb KB] "
                    + "[--max-add-seconds S] [--max-open-seconds S] [--max-open-mib M] [--max-list-seconds S] [--max-list-mib M] "
                    + "[--list-command MULTIPART [--max-command-seconds S] [--max-command-mib M]]\n").utf8))
        exit(2)
    }
}

let server = try await UploadServer(.countSink)
let request = URLRequest(url: server.url())
let session = URLSession(configuration: .ephemeral)
let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("queue-cost-\(getpid())")
defer { try? FileManager.default.removeItem(at: scratch) }

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("FAIL: \(message)\n".utf8))
    try? FileManager.default.removeItem(at: scratch)
    exit(1)
}

/// A small form: a field and 2,000 bytes.
func smallForm(_ index: Int) -> MultipartFormData {
    var form = MultipartFormData()
    form.append("log \(index)", name: "title")
    form.append(Data((0..<2_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }), name: "file", fileName: "a.log")
    return form
}

/// `count` forms through `upload`, 3 at a time; each answer's count checked.
func throughUpload(_ count: Int) async throws -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    try await withThrowingTaskGroup(of: Void.self) { group in
        var next = 0
        func add() {
            let form = smallForm(next)
            next += 1
            group.addTask {
                let (data, _) = try await session.upload(form, with: request)
                let counted = try JSONDecoder().decode(UploadServer.Counted.self, from: data)
                if counted.bytes != Int(form.contentLength!) { fail("the sink counted \(counted.bytes)") }
            }
        }
        for _ in 0..<min(3, count) { add() }
        while try await group.next() != nil, next < count { add() }
        try await group.waitForAll()
    }
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

/// `count` forms through a new queue (added one at a time, as a newcomer writes it, then run 3 at a time); each
/// answer's count checked. The seconds in all, and of the adds.
func throughQueue(_ count: Int, round: Int) async throws -> (seconds: Double, adding: Double) {
    let start = DispatchTime.now().uptimeNanoseconds
    let queue = try MultipartUploadQueue(directory: scratch.appendingPathComponent("round-\(round)"))
    for index in 0..<count { _ = try await queue.add(smallForm(index), with: request) }
    let adding = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    try await queue.run(on: session)
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    for (index, upload) in await queue.uploads.enumerated() {
        guard case .completed(let answer) = upload.state,
            let counted = try? JSONDecoder().decode(UploadServer.Counted.self, from: answer.body),
            counted.bytes == Int(smallForm(index).contentLength!)
        else { fail("upload \(index): \(upload.state)") }
    }
    return (seconds, adding)
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

// One of each first, so that neither pays for first use (the queue's probe of the sink included) in the rounds.
_ = try await throughUpload(50)
_ = try await throughQueue(50, round: -1)
var ratios: [Double] = []
var queueSeconds: [Double] = []
var addingSeconds: [Double] = []
var uploadSeconds: [Double] = []
for round in 0..<rounds {
    // Alternated, the order turning each round.
    let queueFirst = round % 2 == 0
    var queueTime = (seconds: 0.0, adding: 0.0)
    var uploadTime = 0.0
    if queueFirst { queueTime = try await throughQueue(uploadsPerRound, round: round) }
    uploadTime = try await throughUpload(uploadsPerRound)
    if !queueFirst { queueTime = try await throughQueue(uploadsPerRound, round: round) }
    queueSeconds.append(queueTime.seconds)
    addingSeconds.append(queueTime.adding)
    uploadSeconds.append(uploadTime)
    ratios.append(queueTime.seconds / uploadTime)
}
let ratio = rounds > 0 ? median(ratios) : 0
if rounds > 0 {
    print(
        "\(rounds) rounds of \(uploadsPerRound) small forms, 3 at a time: upload \(String(format: "%.3f", median(uploadSeconds))) s, "
            + "the queue \(String(format: "%.3f", median(queueSeconds))) s (added, recorded and run; the adds, "
            + "each committed before it returns, \(String(format: "%.3f", median(addingSeconds))) s of it)")
    print(String(format: "time, the queue over upload (median of rounds): %.3f", ratio))
    // What the adds' syncs leave: a floor no run can go under, one fdatasync an add.
    let runs = zip(zip(queueSeconds, addingSeconds), uploadSeconds).map { ($0.0 - $0.1) / $1 }
    let adds = zip(addingSeconds, uploadSeconds).map { $0 / $1 }
    print(
        String(
            format: "of which the adds over upload: %.3f; the run alone over upload: %.3f (medians of rounds)",
            median(adds), median(runs)))
}

// Many queued: added with add(contentsOf:), listed by a queue opened anew (a relaunch), and run.
let many = scratch.appendingPathComponent("many")
var memory = ProcessDescriptors.residentBytes()
let queue = try MultipartUploadQueue(directory: many)
let addStart = DispatchTime.now().uptimeNanoseconds
// A thousand a call, as a photo library is added.
for start in stride(from: 0, to: queued, by: 1_000) {
    let batch = (start..<min(start + 1_000, queued)).map {
        MultipartUploadQueue.NewUpload(form: smallForm($0), request: request, key: "form-\($0)")
    }
    _ = try await queue.add(contentsOf: batch)
}
let addSeconds = Double(DispatchTime.now().uptimeNanoseconds - addStart) / 1e9
let added = ProcessDescriptors.residentBytes() - memory
memory = ProcessDescriptors.residentBytes()
ProcessDescriptors.resetPeakResident()
let openStart = DispatchTime.now().uptimeNanoseconds
let reopened = try MultipartUploadQueue(directory: many)
let openSeconds = Double(DispatchTime.now().uptimeNanoseconds - openStart) / 1e9
let loaded = ProcessDescriptors.residentBytes() - memory
// What opening took at its height, above what the process held before: the names and summaries read at once.
let openPeak = ProcessDescriptors.peakResidentBytes() - memory
// Listing reads every upload's row: what a view of every upload costs, apart from opening.
// What a view holding every upload holds: the listing's resident memory while it is held.
memory = ProcessDescriptors.residentBytes()
ProcessDescriptors.resetPeakResident()
let listStart = DispatchTime.now().uptimeNanoseconds
let every = await reopened.uploads
let listSeconds = Double(DispatchTime.now().uptimeNanoseconds - listStart) / 1e9
let listMiB = Double(ProcessDescriptors.residentBytes() - memory) / 1_048_576
let listPeakMiB = Double(ProcessDescriptors.peakResidentBytes() - memory) / 1_048_576
let listed = withExtendedLifetime(every) { every.count }
// The command's `--list` of the same queue, in a process of its own: its time and its peak resident memory. GNU
// time forks the command and reports its peak: this process's own child would not do, as posix_spawn shares this
// process's memory until the exec, and Linux counts that memory's peak as the child's (`exec_mmap` keeps it in the
// child's maxrss), which made a --list of a few MiB read as the 220 MiB this benchmark holds.
var command: (seconds: Double, mib: Double)?
if let listCommand {
    let process = Process()
    let peakFile = scratch.appendingPathComponent("peak")
    process.executableURL = URL(fileURLWithPath: "/usr/bin/time")
    process.arguments = ["-f", "%M", "-o", peakFile.path, listCommand, "--queue", many.path, "--list"]
    process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
    let commandStart = DispatchTime.now().uptimeNanoseconds
    try process.run()
    process.waitUntilExit()
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - commandStart) / 1e9
    guard process.terminationStatus == 0 else { fail("the command's --list exited \(process.terminationStatus)") }
    let peak = (try? String(contentsOf: peakFile, encoding: .utf8)).flatMap {
        Double($0.split(separator: "\n").last.map(String.init) ?? "")
    }
    guard let peak else { fail("GNU time (apt time) said no peak for the command's --list") }
    command = (seconds, peak / 1024)
}
memory = ProcessDescriptors.residentBytes()
let runStart = DispatchTime.now().uptimeNanoseconds
if runsMany { try await reopened.run(on: session) }
let ran = ProcessDescriptors.residentBytes() - memory
let runSeconds = Double(DispatchTime.now().uptimeNanoseconds - runStart) / 1e9
let completed = await reopened.uploads.filter { if case .completed = $0.state { true } else { false } }.count
guard listed == queued, completed == (runsMany ? queued : 0) else {
    fail("\(listed) listed, \(completed) completed of \(queued)")
}
let perUpload = { (bytes: Int) in Double(bytes) / Double(queued) / 1024 }
print(
    String(
        format: "%d queued: added (%.1f s, 1,000 a call) +%.2f KB, opened anew (%.2f s) +%.2f KB (%.1f MiB, "
            + "%.1f MiB at its height), listed (%.1f s), run (%.1f s) +%.2f KB resident per upload; now %.0f MiB",
        queued, addSeconds, perUpload(added), openSeconds, perUpload(loaded), Double(loaded) / 1_048_576,
        Double(openPeak) / 1_048_576, listSeconds, runSeconds, perUpload(ran),
        Double(ProcessDescriptors.residentBytes()) / 1_048_576))
if let command {
    print(String(format: "the command's --list of %d: %.2f s, %.0f MiB resident", queued, command.seconds, command.mib))
}
var failed = false
print(
    String(format: "the listing of %d held: +%.1f MiB resident, %.1f MiB at its height", listed, listMiB, listPeakMiB))
if let maxListMiB, listPeakMiB > maxListMiB {
    print(String(format: "FAIL: the listing took %.1f MiB at its height, more than %.1f", listPeakMiB, maxListMiB))
    failed = true
}
if let maxListSeconds, listSeconds > maxListSeconds {
    print(String(format: "FAIL: listing took %.2f s, more than %.2f", listSeconds, maxListSeconds))
    failed = true
}
if let command, let maxCommandSeconds, command.seconds > maxCommandSeconds {
    print(String(format: "FAIL: the command's --list took %.2f s, more than %.2f", command.seconds, maxCommandSeconds))
    failed = true
}
if let command, let maxCommandMiB, command.mib > maxCommandMiB {
    print(String(format: "FAIL: the command's --list took %.0f MiB, more than %.0f", command.mib, maxCommandMiB))
    failed = true
}
if let maxRatio, ratio > maxRatio {
    print(String(format: "FAIL: %.3f is over %.2f", ratio, maxRatio))
    failed = true
}
if let maxAddSeconds, addSeconds > maxAddSeconds {
    print(String(format: "FAIL: adding took %.2f s, more than %.2f", addSeconds, maxAddSeconds))
    failed = true
}
if let maxOpenSeconds, openSeconds > maxOpenSeconds {
    print(String(format: "FAIL: opening took %.2f s, more than %.2f", openSeconds, maxOpenSeconds))
    failed = true
}
if let maxOpenMiB, Double(openPeak) / 1_048_576 > maxOpenMiB {
    print(
        String(
            format: "FAIL: opening took %.1f MiB at its height, more than %.1f", Double(openPeak) / 1_048_576,
            maxOpenMiB))
    failed = true
}
if let maxKB, [added, loaded, ran].contains(where: { perUpload($0) > maxKB }) {
    print(String(format: "FAIL: a step added more than %.2f KB per queued upload", maxKB))
    failed = true
}
// exit() runs no defer: the scratch directory goes first.
try? FileManager.default.removeItem(at: scratch)
exit(failed ? 1 : 0)
