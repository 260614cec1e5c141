import Foundation
import MultipartStream
import MultipartStreamTestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The library's memory for large answers (#49), each case's peak resident memory (VmHWM, reset between cases through
// /proc/self/clear_refs) measured in this process, which does nothing else: an answer past the default bound, a
// refused status's 2 GiB and endless bodies, and 1 GiB taken to a file and in chunks. Each case also checks what it
// got against what the server sent.
// Usage: answer-check [--max-rss MIB]

var maxResidentMiB: Int?
var arguments = CommandLine.arguments.dropFirst()
while let option = arguments.popFirst() {
    switch (option, arguments.popFirst()) {
    case ("--max-rss", let value?) where Int(value) != nil: maxResidentMiB = Int(value)
    default:
        FileHandle.standardError.write(Data("usage: answer-check [--max-rss MIB]\n".utf8))
        exit(2)
    }
}

/// VmHWM from /proc/self/status, in MiB.
func peakResidentMiB() -> Int { ProcessDescriptors.peakResidentBytes() >> 20 }

/// Bytes seen by a chunk handler.
final class Counter: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = NSLock()
    private var count = 0

    func add(_ piece: Data) {
        lock.lock()
        count += piece.count
        lock.unlock()
    }

    var total: Int {
        lock.lock()
        defer { lock.unlock() }
        return count
    }
}

let gib = 1 << 30
let server = try await LargeAnswerServer()
var form = MultipartFormData()
form.append("value", name: "field")
let directory = try TemporaryDirectory()
var failures: [String] = []

/// Runs `upload`, which returns a problem or `nil`, and reports its time and peak.
@MainActor func check(_ name: String, _ upload: () async throws -> String?) async {
    ProcessDescriptors.resetPeakResident()
    let started = Date()
    let problem: String?
    do {
        problem = try await upload()
    } catch {
        problem = "unexpected \(error)"
    }
    let peak = peakResidentMiB()
    let seconds = String(format: "%.2f", Date().timeIntervalSince(started))
    var line = "\(name): \(seconds) s, peak RSS \(peak) MiB"
    if let problem { line += ", " + problem }
    if let maxResidentMiB, peak > maxResidentMiB { line += ", over the \(maxResidentMiB) MiB allowed" }
    print(line)
    if problem != nil || maxResidentMiB.map({ peak > $0 }) == true { failures.append(name) }
}

/// The error `upload` throws, as a `MultipartError`.
@MainActor func failure(of upload: () async throws -> Void) async -> MultipartError? {
    do {
        try await upload()
        return nil
    } catch {
        return error as? MultipartError
    }
}

await check("1 GiB 200, default bound") {
    let error = await failure {
        _ = try await URLSession.shared.upload(form, with: URLRequest(url: server.url(bytes: gib)))
    }
    guard case .responseTooLarge(200, MultipartResponseBody.defaultLimit)? = error?.reason else {
        return "got \(String(describing: error))"
    }
    return nil
}

for (name, url) in [
    ("2 GiB 500", server.url(status: 500, bytes: 2 * gib)), ("endless 500", server.url(status: 500, bytes: nil)),
] {
    await check("\(name), acceptableStatusCodes 200..<300") {
        let error = await failure {
            _ = try await URLSession.shared.upload(form, with: URLRequest(url: url), acceptableStatusCodes: 200..<300)
        }
        guard case .unacceptableStatus(500, let body)? = error?.reason,
            body == LargeAnswerServer.body(MultipartResponseBody.refusedBodyLimit)
        else { return "got \(String(describing: error))" }
        return nil
    }
}

await check("1 GiB 200 to .file") {
    let destination = directory.path("answer.bin")
    _ = try await URLSession.shared.upload(
        form, with: URLRequest(url: server.url(bytes: gib)), responseBody: .file(destination))
    let sent = try server.sent()
    let hash = try sha256sum(destination)
    try FileManager.default.removeItem(at: destination)
    return hash == sent.sha256 && sent.bytes == gib ? nil : "the file differs from what the server sent"
}

await check("1 GiB 200 as .chunks") {
    let counter = Counter()
    _ = try await URLSession.shared.upload(
        form, with: URLRequest(url: server.url(bytes: gib)), responseBody: .chunks { _, piece in counter.add(piece) })
    return counter.total == gib ? nil : "the chunks added up to \(counter.total) bytes"
}

if !failures.isEmpty {
    print("answer-check failed: \(failures.joined(separator: "; "))")
    exit(1)
}
