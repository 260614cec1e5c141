import Foundation
import MultipartStream
import MultipartStreamTestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// What one small upload costs: many small forms in a row through one session, alternated with plain URLSession
// sending the same bytes as `Data` on the same session, to one byte-counting Node sink on 127.0.0.1
// (Peers/count-sink.mjs, which answers `Expect: 100-continue` and does no work of its own). Every answer's byte
// count is checked. Prints the median of the per-round time ratios, and the resident memory each path added over
// all its rounds per upload; fails past --max-ratio (over plain), past --max-share (over plain with a delegate,
// below) or when ours grows memory faster than plain's with a delegate (plus --memory-slack KB per upload). A third
// path, alternated with the two, measures the platform's share: plain URLSession sending the same `Data` through a
// data task of a session that has a delegate, as every MultipartStream upload's private session has (Linux
// URLSession then queues an operation on the delegate queue for each event of the task). A fourth, ours keeping a
// Foundation `Progress`, is reported beside ours, not gated: its difference is within the rounds' noise here.
// Usage: upload-cost [--uploads N] [--rounds R] [--size BYTES] [--session shared|ephemeral]
//                    [--max-ratio X] [--max-share X] [--memory-slack KB]

var uploadsPerRound = 300
var rounds = 11
var size = 20_000
var useShared = true
var maxRatio: Double?
var maxShare: Double?
var memorySlackKB = 0.25
var arguments = CommandLine.arguments.dropFirst()
while let option = arguments.popFirst() {
    switch (option, arguments.popFirst()) {
    case ("--uploads", let value?) where Int(value) != nil: uploadsPerRound = Int(value)!
    case ("--rounds", let value?) where Int(value) != nil: rounds = Int(value)!
    case ("--size", let value?) where Int(value) != nil: size = Int(value)!
    case ("--session", "shared"): useShared = true
    case ("--session", "ephemeral"): useShared = false
    case ("--max-ratio", let value?) where Double(value) != nil: maxRatio = Double(value)
    case ("--max-share", let value?) where Double(value) != nil: maxShare = Double(value)
    case ("--memory-slack", let value?) where Double(value) != nil: memorySlackKB = Double(value)!
    default:
        FileHandle.standardError.write(
            Data(
                ("usage: upload-cost [--uploads N] [--rounds R] [--size BYTES] [--session shared|ephemeral] "
                    + "[--max-ratio X] [--max-share X] [--memory-slack KB]\n").utf8))
        exit(2)
    }
}

let server = try await UploadServer(.countSink)
var form = MultipartFormData()
form.append("a small form", name: "title")
form.append(Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }), name: "file", fileName: "small.bin")
let encoded = try form.encode()
var request = URLRequest(url: server.url())
request.httpMethod = "POST"
request.setValue(form.contentType, forHTTPHeaderField: "Content-Type")
let session = useShared ? URLSession.shared : URLSession(configuration: .ephemeral)

/// A data delegate that keeps each task's answer and hands it over when the task ends: the least a session with a
/// delegate does.
final class Collector: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: `pending` is touched only on the session's serial delegate queue, and before the task resumes.
    var pending: [Int: (Data, CheckedContinuation<Data, any Error>)] = [:]

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        pending[dataTask.taskIdentifier]?.0.append(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let (data, continuation) = pending.removeValue(forKey: task.taskIdentifier) else { return }
        if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: data) }
    }
}
let collector = Collector()
let delegateQueue = OperationQueue()
delegateQueue.maxConcurrentOperationCount = 1
let delegateSession = URLSession(configuration: .default, delegate: collector, delegateQueue: delegateQueue)

/// Plain URLSession through a delegate: `encoded` as the body of a data task of `delegateSession`.
@MainActor func uploadThroughDelegate() async throws -> Data {
    var withBody = request
    withBody.httpBody = encoded
    let task = delegateSession.dataTask(with: withBody)
    return try await withCheckedThrowingContinuation { continuation in
        delegateQueue.addOperation {
            collector.pending[task.taskIdentifier] = (Data(), continuation)
            task.resume()
        }
    }
}

enum Path {
    case plain, plainWithDelegate, ours, oursWithProgress
}

/// `uploadsPerRound` uploads; the seconds they took and the memory they added.
@MainActor func round(_ path: Path) async throws -> (seconds: Double, memory: Int) {
    let memory = ProcessDescriptors.residentBytes()
    let start = DispatchTime.now().uptimeNanoseconds
    for _ in 0..<uploadsPerRound {
        let data =
            switch path {
            case .plain: try await session.upload(for: request, from: encoded).0
            case .plainWithDelegate: try await uploadThroughDelegate()
            case .ours: try await session.upload(form, with: request).0
            // A Foundation Progress kept up to date, as an app shows it.
            case .oursWithProgress:
                try await session.upload(form, with: request, progress: Progress(totalUnitCount: 0)).0
            }
        let counted = try JSONDecoder().decode(UploadServer.Counted.self, from: data)
        guard counted.bytes == encoded.count else {
            FileHandle.standardError.write(Data("the sink counted \(counted.bytes) of \(encoded.count) bytes\n".utf8))
            exit(1)
        }
    }
    return (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9, ProcessDescriptors.residentBytes() - memory)
}

// One round of each first, so that neither path pays for first-use allocations in the measured rounds.
for path in [Path.plain, .plainWithDelegate, .ours, .oursWithProgress] { _ = try await round(path) }
var ratios: [Double] = []
var platformRatios: [Double] = []
var oursOverDelegate: [Double] = []
var progressOverDelegate: [Double] = []
var plainSeconds: [Double] = []
var oursSeconds: [Double] = []
var plainMemory = 0
var oursMemory = 0
var delegateMemory = 0
for index in 0..<rounds {
    // Alternated, and the order turns each round.
    var measured: [Path: (seconds: Double, memory: Int)] = [:]
    let order: [Path] = [.plain, .plainWithDelegate, .ours, .oursWithProgress]
    for offset in 0..<order.count {
        let path = order[(index + offset) % order.count]
        measured[path] = try await round(path)
    }
    let plain = measured[.plain]!
    let ours = measured[.ours]!
    let withDelegate = measured[.plainWithDelegate]!
    ratios.append(ours.seconds / plain.seconds)
    platformRatios.append(withDelegate.seconds / plain.seconds)
    oursOverDelegate.append(ours.seconds / withDelegate.seconds)
    progressOverDelegate.append(measured[.oursWithProgress]!.seconds / withDelegate.seconds)
    plainSeconds.append(plain.seconds)
    oursSeconds.append(ours.seconds)
    plainMemory += plain.memory
    oursMemory += ours.memory
    delegateMemory += withDelegate.memory
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

let uploads = Double(rounds * uploadsPerRound)
let ratio = median(ratios)
let plainKB = Double(plainMemory) / uploads / 1024
let oursKB = Double(oursMemory) / uploads / 1024
let delegateKB = Double(delegateMemory) / uploads / 1024
let perUpload = { (seconds: [Double]) in String(format: "%.3f ms", median(seconds) / Double(uploadsPerRound) * 1e3) }
print(
    "\(rounds) rounds of \(uploadsPerRound) \(encoded.count)-byte uploads on "
        + "\(useShared ? "URLSession.shared" : "one ephemeral session"): plain \(perUpload(plainSeconds)), "
        + "MultipartStream \(perUpload(oursSeconds)) per upload")
print(String(format: "time, MultipartStream over plain (median of rounds): %.3f", ratio))
print(String(format: "  the platform's share, plain with a delegate over plain: %.3f", median(platformRatios)))
print(String(format: "  MultipartStream's share, over plain with a delegate: %.3f", median(oursOverDelegate)))
print(
    String(
        format: "  MultipartStream with a Foundation Progress, over plain with a delegate: %.3f",
        median(progressOverDelegate)))
print(
    String(
        format: "memory added per upload: plain %.3f KB, plain with a delegate %.3f KB, MultipartStream %.3f KB",
        plainKB, delegateKB, oursKB))
var failed = false
if let maxRatio, ratio > maxRatio {
    print(String(format: "FAIL: %.3f is over %.2f", ratio, maxRatio))
    failed = true
}
let share = median(oursOverDelegate)
if let maxShare, share > maxShare {
    print(String(format: "FAIL: MultipartStream's share %.3f is over %.2f", share, maxShare))
    failed = true
}
// Against the delegate path, as the time share is: plain's own growth moves by a few tenths of a KB between runs.
if oursKB > delegateKB + memorySlackKB {
    print(
        String(format: "FAIL: memory grew %.3f KB per upload faster than plain's with a delegate", oursKB - delegateKB))
    failed = true
}
exit(failed ? 1 : 0)
