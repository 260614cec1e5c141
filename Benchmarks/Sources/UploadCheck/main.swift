import Foundation
import MultipartStream
import MultipartStreamTestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// Uploads a large file (2 GiB by default) through URLSession to a Node sink on 127.0.0.1 and checks that every
// byte arrived: the byte count, and the SHA-256 of the file part against `sha256sum` of the file. Reports the time
// and this process's peak resident memory, so run one strategy per process.
// Usage: upload-check [--size BYTES] [--strategy stream|file]

var size: UInt64 = 2 << 30
var strategy = MultipartUploadStrategy.stream
var arguments = CommandLine.arguments.dropFirst()
while let option = arguments.popFirst() {
    switch (option, arguments.popFirst()) {
    case ("--size", let value?) where UInt64(value) != nil: size = UInt64(value)!
    case ("--strategy", "stream"): strategy = .stream
    case ("--strategy", "file"): strategy = .file
    default:
        FileHandle.standardError.write(Data("usage: upload-check [--size BYTES] [--strategy stream|file]\n".utf8))
        exit(2)
    }
}

struct SinkAnswer: Decodable {
    struct Part: Decodable {
        var headers: String
        var bytes: UInt64
        var sha256: String
    }
    var transferEncoding: String?
    var contentLength: String?
    var bytes: UInt64?
    var parts: [Part]?
    var error: String?
}

let directory = try TemporaryDirectory()
let fileURL = directory.path("large.bin")
var generator = SeededGenerator(seed: size)
try generator.writeFile(at: fileURL, size: size)
let expectedSHA = try sha256sum(fileURL)

var form = MultipartFormData()
form.append("upload-check", name: "note")
try form.append(fileURL: fileURL, name: "file")
let server = try UploadServer(.sink)
let clock = ContinuousClock()
let start = clock.now
let (data, _) = try await URLSession(configuration: .ephemeral).upload(
    form, with: URLRequest(url: server.url()), strategy: strategy)
let elapsed = clock.now - start
let answer = try JSONDecoder().decode(SinkAnswer.self, from: data)

let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
var problems: [String] = []
if let error = answer.error { problems.append("the sink failed: \(error)") }
if answer.bytes != form.contentLength {
    problems.append("\(answer.bytes ?? 0) bytes arrived, sent \(form.contentLength)")
}
if answer.parts?.count != 2 { problems.append("\(answer.parts?.count ?? 0) parts arrived, sent 2") }
if let file = answer.parts?.last {
    if file.bytes != size { problems.append("the file part has \(file.bytes) bytes, sent \(size)") }
    if file.sha256 != expectedSHA { problems.append("the file part's SHA-256 is \(file.sha256), sent \(expectedSHA)") }
}
let framing =
    answer.contentLength.map { "Content-Length \($0)" } ?? "Transfer-Encoding \(answer.transferEncoding ?? "none")"
print(
    "upload-check: \(strategy) \(size) bytes in \(String(format: "%.2f", seconds)) s "
        + "(\(String(format: "%.0f", Double(form.contentLength) / seconds / 1e6)) MB/s), \(framing), "
        + "SHA-256 \(problems.isEmpty ? "matches" : "differs"), peak RSS \(peakResidentMiB()) MiB")
for problem in problems { print("FAIL \(problem)") }
print("\(problems.isEmpty ? 1 : 0) passed, \(problems.isEmpty ? 0 : 1) failed")
exit(problems.isEmpty ? 0 : 1)

/// `sha256sum` of the file: an implementation independent of everything under test.
func sha256sum(_ url: URL) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["sha256sum", url.path]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: output, as: UTF8.self).split(separator: " ").first.map(String.init) ?? ""
}

/// VmHWM from /proc/self/status: the most resident memory this process has had.
func peakResidentMiB() -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
    let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    return kilobytes / 1024
}
