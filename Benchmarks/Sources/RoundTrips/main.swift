import Foundation
import MultipartQueue
import MultipartStream
import MultipartStreamTestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// Round trips as a user feels them (#80): the same forms through a plain upload, a resumable one and a queue, to
// SwiftNIO's NIOResumableUpload (resumable-server, built beside this) behind a proxy that puts a link of --delay-ms
// each way between them (Peers/fault-proxy.py `delay:MS`: a connection's first byte passes a round trip after it
// opened, every chunk --delay-ms after it came). Loopback alone hides what a request or a connection costs.
//
// Each round, in turn (the order turns each round; the first round is a warm-up, printed, not counted):
//   small, upload     30 forms of 64 KiB through `upload`, 3 at a time
//   small, queue      the same 30 added to a new MultipartUploadQueue (maximumConcurrentUploads: 3) and run
//   64 KiB, plain     one form through `upload`          64 KiB, resumable  the same, `strategy: .resumable`
//   8 MiB, plain      one form through `upload`          8 MiB, resumable   the same, `strategy: .resumable`
// One session for all (the caller's, kept alive between rounds, as an app keeps URLSession.shared). Every answer is
// checked: the server recorded the form byte for byte. Prints each way's median seconds, requests (as the server saw
// them on the wire) and new connections per upload; then the ratios, failing past --max-queue-ratio (the queue over
// upload, small forms), --max-resumable-ratio (resumable over plain, 64 KiB) or --max-large-extra-ms (resumable's
// time over plain's, 8 MiB), each when given; with --one-request-each, where a small form, queued or `.resumable`, took
// more than one request or any new connection (medians of the counted rounds: the process's first upload to the server
// pays its refusal of a newer version once, in the warm-up).
// With --sizes, it measures instead what a form costs to send again, the trade of MultipartResumption's
// singleRequestLimit: a plain upload of each size from 64 KiB to 16 MiB, alternated, and each one's time over the
// 64 KiB form's, beside a round trip. A form whose extra time is under a round trip costs less to send again after a
// drop than creating the upload first costs every time.
// Usage: round-trips [--delay-ms MS] [--rounds R] [--max-queue-ratio X] [--max-resumable-ratio X]
//                    [--max-large-extra-ms MS] [--one-request-each] [--sizes]

var delayMs = 20
var rounds = 5
var maxQueueRatio: Double?
var maxResumableRatio: Double?
var maxLargeExtraMs: Double?
var sizesOnly = false
var oneRequestEach = false
var arguments = CommandLine.arguments.dropFirst()
while let option = arguments.popFirst() {
    if option == "--sizes" || option == "--one-request-each" {
        (sizesOnly, oneRequestEach) = (
            sizesOnly || option == "--sizes", oneRequestEach || option == "--one-request-each"
        )
        continue
    }
    switch (option, arguments.popFirst()) {
    case ("--delay-ms", let value?) where Int(value) != nil: delayMs = Int(value)!
    case ("--rounds", let value?) where (Int(value) ?? 0) > 0: rounds = Int(value)!
    case ("--max-queue-ratio", let value?) where Double(value) != nil: maxQueueRatio = Double(value)
    case ("--max-resumable-ratio", let value?) where Double(value) != nil: maxResumableRatio = Double(value)
    case ("--max-large-extra-ms", let value?) where Double(value) != nil: maxLargeExtraMs = Double(value)
    default:
        FileHandle.standardError.write(
            Data(
                ("usage: round-trips [--delay-ms MS] [--rounds R] [--max-queue-ratio X] [--max-resumable-ratio X] "
                    + "[--max-large-extra-ms MS] [--one-request-each] [--sizes]\n").utf8))
        exit(2)
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("FAIL: \(message)\n".utf8))
    exit(1)
}

let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("round-trips-\(getpid())")
let bodies = scratch.appendingPathComponent("bodies")
try FileManager.default.createDirectory(at: bodies, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: scratch) }

/// The server, a child process: it prints its port, writes a line for each request it reads to `requestLog`, and
/// exits when its standard input closes.
let requestLog = scratch.appendingPathComponent("requests.log")
let server = Process()
server.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    .appendingPathComponent("resumable-server")
server.arguments = [bodies.path, "--log", requestLog.path]
let serverInput = Pipe()
let serverOutput = Pipe()
server.standardInput = serverInput
server.standardOutput = serverOutput
try server.run()
var firstLine = Data()
while !firstLine.contains(UInt8(ascii: "\n")) {
    let chunk = serverOutput.fileHandleForReading.availableData
    guard !chunk.isEmpty else { fail("resumable-server printed no port") }
    firstLine.append(chunk)
}
guard let serverPort = Int(String(decoding: firstLine, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
else { fail("resumable-server printed no port") }
defer {
    try? serverInput.fileHandleForWriting.close()
    server.waitUntilExit()
}
let proxy = try await FaultProxy(to: serverPort, cuts: ["delay:\(delayMs)"])
let url = URL(string: "http://127.0.0.1:\(proxy.port)/upload")!
let session = URLSession(configuration: .ephemeral)

/// A form of a field and `bytes` of a file part, different for each `index`, and its encoding.
func form(_ index: Int, bytes: Int) throws -> (MultipartFormData, Data) {
    var form = MultipartFormData()
    form.append("photo \(index)", name: "title")
    form.append(
        Data((0..<bytes).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }), name: "photo", fileName: "p.jpg",
        mimeType: "image/jpeg")
    return (form, try form.encode())
}

/// Checks that `answer` is the server's record of `expected`, byte for byte, and removes the record.
func check(_ answer: Data, is expected: Data, _ what: String) {
    struct Recorded: Decodable {
        var bytes: Int
        var path: String
    }
    guard let recorded = try? JSONDecoder().decode(Recorded.self, from: answer) else {
        fail("\(what): the answer is no record: \(String(decoding: answer.prefix(200), as: UTF8.self))")
    }
    guard recorded.bytes == expected.count, (try? Data(contentsOf: URL(fileURLWithPath: recorded.path))) == expected
    else { fail("\(what): the server recorded \(recorded.bytes) bytes, not the form's \(expected.count)") }
    try? FileManager.default.removeItem(atPath: recorded.path)
}

if sizesOnly {
    let sizes = [64 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20]
    let forms = try sizes.enumerated().map { try form(300 + $0.offset, bytes: $0.element) }
    var times: [Int: [Double]] = [:]
    for round in 0...rounds {
        for offset in 0..<sizes.count {
            let index = (round + offset) % sizes.count
            let (form, encoded) = forms[index]
            let start = DispatchTime.now().uptimeNanoseconds
            let (answer, _) = try await session.upload(
                form, with: URLRequest(url: url), acceptableStatusCodes: 200..<300)
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            check(answer, is: encoded, "\(sizes[index]) bytes")
            if round > 0 { times[sizes[index], default: []].append(seconds) }
        }
    }
    session.finishTasksAndInvalidate()
    _ = try proxy.stop()
    let base = times[sizes[0]]!.sorted()[rounds / 2]
    print("\(rounds) rounds through a link of \(delayMs) ms each way (medians); a round trip is \(2 * delayMs) ms:")
    for size in sizes {
        let time = times[size]!.sorted()[rounds / 2]
        print(
            String(
                format: "  %6d KiB: %.3f s, %4.0f ms more than 64 KiB: %@", size >> 10, time, (time - base) * 1e3,
                (time - base) * 1e3 < Double(2 * delayMs) ? "cheaper to send again than a round trip" : "dearer"))
    }
    exit(0)
}

let small = try (0..<30).map { try form($0, bytes: 64 << 10) }
let one = try form(100, bytes: 64 << 10)
let large = try form(200, bytes: 8 << 20)

enum Way: String, CaseIterable {
    case smallUpload = "30 × 64 KiB, upload 3 at a time"
    case smallQueue = "30 × 64 KiB, queue 3 at a time"
    case onePlain = "64 KiB, plain"
    case oneResumable = "64 KiB, .resumable"
    case largePlain = "8 MiB, plain"
    case largeResumable = "8 MiB, .resumable"

    var uploads: Int { self == .smallUpload || self == .smallQueue ? 30 : 1 }
}

/// What one way took: seconds, and the requests and connections of the round per upload.
struct Measured {
    var seconds: Double
    var requests: Double
    var connections: Double
}

func requestsSoFar() -> Int {
    ((try? String(contentsOf: requestLog, encoding: .utf8)) ?? "").split(separator: "\n").count
}

func measure(_ way: Way, round: Int) async throws -> Measured {
    let requests = requestsSoFar()
    let connections = try proxy.seen().connections
    let start = DispatchTime.now().uptimeNanoseconds
    switch way {
    case .smallUpload:
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, (form, encoded)) in small.enumerated() {
                if index >= 3 { try await group.next() }
                group.addTask {
                    let (answer, _) = try await session.upload(
                        form, with: URLRequest(url: url), acceptableStatusCodes: 200..<300)
                    check(answer, is: encoded, "small form \(index), upload")
                }
            }
            try await group.waitForAll()
        }
    case .smallQueue:
        let queue = try MultipartUploadQueue(
            directory: scratch.appendingPathComponent("queue-\(round)"), maximumConcurrentUploads: 3)
        var ids: [MultipartUploadQueue.ID: Data] = [:]
        for (form, encoded) in small { ids[try await queue.add(form, with: URLRequest(url: url))] = encoded }
        try await queue.run(on: session)
        for upload in await queue.uploads {
            guard case .completed(let answer) = upload.state, let expected = ids[upload.id] else {
                fail("small form \(upload.id), queue: \(upload.state)")
            }
            check(answer.body, is: expected, "small form \(upload.id), queue")
        }
    case .onePlain, .oneResumable, .largePlain, .largeResumable:
        let (form, encoded) = way == .onePlain || way == .oneResumable ? one : large
        let strategy: MultipartUploadStrategy =
            way == .oneResumable || way == .largeResumable ? .resumable(MultipartResumption()) : .automatic
        let (answer, _) = try await session.upload(
            form, with: URLRequest(url: url), strategy: strategy, acceptableStatusCodes: 200..<300)
        check(answer, is: encoded, way.rawValue)
    }
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    return Measured(
        seconds: seconds, requests: Double(requestsSoFar() - requests) / Double(way.uploads),
        connections: Double(try proxy.seen().connections - connections) / Double(way.uploads))
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

func line(_ way: Way, _ measured: Measured) -> String {
    String(
        format: "%@: %.3f s, %.2f requests and %.2f new connections an upload", way.rawValue, measured.seconds,
        measured.requests, measured.connections)
}

var measured: [Way: [Measured]] = [:]
for round in 0...rounds {
    let ways = Way.allCases
    for offset in 0..<ways.count {
        let way = ways[(round + offset) % ways.count]
        let result = try await measure(way, round: round)
        if round == 0 {
            print("warm-up, \(line(way, result))")
        } else {
            measured[way, default: []].append(result)
        }
    }
}
session.finishTasksAndInvalidate()
_ = try proxy.stop()

print("\(rounds) rounds through a link of \(delayMs) ms each way (medians):")
var medians: [Way: Measured] = [:]
for way in Way.allCases {
    let all = measured[way]!
    let middle = Measured(
        seconds: median(all.map(\.seconds)), requests: median(all.map(\.requests)),
        connections: median(all.map(\.connections)))
    medians[way] = middle
    print("  \(line(way, middle))")
}
/// The median over the rounds of `compare` of `way`'s time and `base`'s in the same round.
let compared = { (way: Way, base: Way, compare: (Double, Double) -> Double) in
    median(zip(measured[way]!, measured[base]!).map { compare($0.seconds, $1.seconds) })
}
let queueRatio = compared(.smallQueue, .smallUpload, /)
let resumableRatio = compared(.oneResumable, .onePlain, /)
let largeExtra = compared(.largeResumable, .largePlain) { ($0 - $1) * 1e3 }
print(String(format: "the queue over upload, 30 small forms: %.2f", queueRatio))
print(String(format: ".resumable over plain, 64 KiB: %.2f", resumableRatio))
print(String(format: ".resumable's time over plain's, 8 MiB: %.0f ms (a round trip is %d ms)", largeExtra, 2 * delayMs))
var failed = false
for (value, limit, what) in [
    (queueRatio, maxQueueRatio, "the queue over upload"), (resumableRatio, maxResumableRatio, ".resumable over plain"),
    (largeExtra, maxLargeExtraMs, ".resumable's extra ms for 8 MiB"),
] {
    if let limit, value > limit {
        print(String(format: "FAIL: %@ %.2f is over %.2f", what, value, limit))
        failed = true
    }
}
for way in [Way.smallQueue, .oneResumable] where oneRequestEach {
    let (requests, connections) = (medians[way]!.requests, medians[way]!.connections)
    if requests > 1 || connections > 0 {
        print(
            String(
                format: "FAIL: %@: %.2f requests and %.2f new connections an upload", way.rawValue, requests,
                connections))
        failed = true
    }
}
exit(failed ? 1 : 0)
