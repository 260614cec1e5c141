import AsyncHTTPClient
import Foundation
import MultipartStream
import MultipartStreamTestSupport
import NIOCore
import OpenAPIRuntime

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// Uploads a large file (2 GiB by default) through URLSession to a Node server on 127.0.0.1 and checks that every
// byte arrived. Reports the time and this process's peak resident memory, so run one upload per process.
// Usage: upload-check [--size BYTES] [--strategy stream|file|floor|floor-delegate|async-http-client|httpbody|
//                     async-http-client-file] [--file PATH]
//                     [--url URL] [--max-rss MIB]
//   --strategy floor  URLSession's own floor: the file itself as a plain InputStream(fileAtPath:) body with its
//                     Content-Length, no multipart, no MultipartStream
//   --strategy floor-delegate  the same, on a session with a delegate (as every MultipartStream upload has): what
//                     URLSession costs a task whose session has one, with no MultipartStream
//   --strategy async-http-client  AsyncHTTPClient sends the README's recipe: form.bodyChunks(makeChunk:) filling
//                     ByteBuffers, with the known length
//   --strategy httpbody  swift-openapi-runtime's HTTPBody over form.bodyChunks() with its known length, sent by
//                     AsyncHTTPClient as swift-openapi-async-http-client sends an HTTPBody
//   --strategy async-http-client-file  AsyncHTTPClient's own floor: the file itself, read into 1 MiB ByteBuffers
//                     with read(2), with its length; no multipart, no MultipartStream
//   --max-rss MIB     fail if this process's peak resident memory passed MIB
//   --file PATH       upload this file (its size wins over --size) instead of writing a random one
//   --url URL         a byte-counting sink that is already running (Peers/count-sink.mjs): only the byte count is
//                     checked. Without it, the upload goes to a sink of its own that hashes every part, and the file
//                     part's SHA-256 is checked against sha256sum's.

enum Strategy: String {
    case stream, file, floor
    case floorWithDelegate = "floor-delegate"
    case asyncHTTPClient = "async-http-client"
    case httpBody = "httpbody"
    case asyncHTTPClientFile = "async-http-client-file"
}

var size: UInt64 = 2 << 30
var strategy = Strategy.stream
var givenFile: URL?
var sinkURL: URL?
var maxResidentMiB: Int?
/// `--chunk-size`: bodyChunks(maximumSize:) for the AsyncHTTPClient strategies; the default's when absent.
var chunkSize: Int?
var arguments = CommandLine.arguments.dropFirst()
while let option = arguments.popFirst() {
    switch (option, arguments.popFirst()) {
    case ("--size", let value?) where UInt64(value) != nil: size = UInt64(value)!
    case ("--strategy", let value?) where Strategy(rawValue: value) != nil: strategy = Strategy(rawValue: value)!
    case ("--file", let value?): givenFile = URL(fileURLWithPath: value)
    case ("--url", let value?) where URL(string: value) != nil: sinkURL = URL(string: value)
    case ("--max-rss", let value?) where Int(value) != nil: maxResidentMiB = Int(value)
    case ("--chunk-size", let value?) where Int(value) != nil: chunkSize = Int(value)
    default:
        let strategies = "stream|file|floor|floor-delegate|async-http-client|httpbody|async-http-client-file"
        FileHandle.standardError.write(
            Data(
                ("usage: upload-check [--size BYTES] [--strategy \(strategies)] [--file PATH] [--url URL] "
                    + "[--max-rss MIB] [--chunk-size BYTES]\n").utf8))
        exit(2)
    }
}

/// What either sink answers; the hashing sink also lists the parts.
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

/// Uploads the file (generated in `directory` unless one was given) and checks what the sink got; prints the
/// figures and every problem, and returns whether there were none.
@MainActor func check(in directory: TemporaryDirectory) async throws -> Bool {
    let fileURL: URL
    if let givenFile {
        fileURL = givenFile
        size = UInt64(try FileManager.default.attributesOfItem(atPath: givenFile.path)[.size] as! Int)
    } else {
        fileURL = directory.path("large.bin")
        var generator = SeededGenerator(seed: size)
        try generator.writeFile(at: fileURL, size: size)
    }
    let expectedSHA = sinkURL == nil ? try sha256sum(fileURL) : nil

    var form = MultipartFormData()
    form.append("upload-check", name: "note")
    try form.append(fileURL: fileURL, name: "file")
    let server = sinkURL == nil ? try await UploadServer(.sink) : nil
    let url = sinkURL ?? server!.url()
    let session = URLSession(configuration: .ephemeral)
    let bodyLength = [.floor, .floorWithDelegate, .asyncHTTPClientFile].contains(strategy) ? size : form.contentLength!

    let clock = ContinuousClock()
    let start = clock.now
    let data: Data
    switch strategy {
    case .stream, .file:
        (data, _) = try await session.upload(
            form, with: URLRequest(url: url), strategy: strategy == .stream ? .stream : .file)
    case .floor, .floorWithDelegate:
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.httpBodyStream = InputStream(fileAtPath: fileURL.path)
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        request.setValue(String(size), forHTTPHeaderField: "Content-Length")
        #if !canImport(Darwin)
            // As MultipartStream does: no chunked framing, no Expect (see URLRequest.setMultipartFormData).
            request.setValue(" ", forHTTPHeaderField: "Transfer-Encoding")
            request.setValue(" ", forHTTPHeaderField: "Expect")
        #endif
        if strategy == .floor {
            (data, _) = try await session.data(for: request)
        } else {
            data = try await CollectingDelegate().send(request)
        }
    case .asyncHTTPClient, .httpBody:
        data = try await sendWithAsyncHTTPClient(form, to: url, asHTTPBody: strategy == .httpBody, chunkSize: chunkSize)
    case .asyncHTTPClientFile:
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/octet-stream")
        request.body = .stream(FileChunks(url: fileURL), length: .known(Int64(size)))
        data = try await execute(request)
    }
    let elapsed = clock.now - start
    let answer = try JSONDecoder().decode(SinkAnswer.self, from: data)

    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    var problems: [String] = []
    if let error = answer.error { problems.append("the sink failed: \(error)") }
    if answer.bytes != bodyLength { problems.append("\(answer.bytes ?? 0) bytes arrived, sent \(bodyLength)") }
    if answer.contentLength != String(bodyLength) || answer.transferEncoding != nil {
        problems.append("sent with \(answer.contentLength.map { "Content-Length \($0)" } ?? "no Content-Length")")
    }
    if let expectedSHA {
        if answer.parts?.count != 2 { problems.append("\(answer.parts?.count ?? 0) parts arrived, sent 2") }
        if let file = answer.parts?.last {
            if file.bytes != size { problems.append("the file part has \(file.bytes) bytes, sent \(size)") }
            if file.sha256 != expectedSHA {
                problems.append("the file part's SHA-256 is \(file.sha256), sent \(expectedSHA)")
            }
        }
    }
    let framing =
        answer.contentLength.map { "Content-Length \($0)" } ?? "Transfer-Encoding \(answer.transferEncoding ?? "none")"
    let verdict = expectedSHA == nil ? "byte count" : "SHA-256"
    print(
        "upload-check: \(strategy) \(size) bytes in \(String(format: "%.3f", seconds)) s "
            + "(\(String(format: "%.0f", Double(bodyLength) / seconds / 1e6)) MB/s), \(framing), "
            + "\(verdict) \(problems.isEmpty ? "matches" : "differs"), peak RSS \(peakResidentMiB()) MiB")
    if let maxResidentMiB, peakResidentMiB() > maxResidentMiB {
        problems.append("peak RSS \(peakResidentMiB()) MiB is over the \(maxResidentMiB) MiB allowed")
    }
    for problem in problems { print("FAIL \(problem)") }
    print("\(problems.isEmpty ? 1 : 0) passed, \(problems.isEmpty ? 0 : 1) failed")
    return problems.isEmpty
}

/// Sends the form with AsyncHTTPClient, its body the form's chunks with their known length: directly, or wrapped
/// in an OpenAPI `HTTPBody` first (the README's two recipes). Returns the answer's body.
func sendWithAsyncHTTPClient(
    _ form: MultipartFormData, to url: URL, asHTTPBody: Bool, chunkSize: Int?
) async throws -> Data {
    var request = HTTPClientRequest(url: url.absoluteString)
    request.method = .POST
    request.headers.add(name: "Content-Type", value: form.contentType)
    if asHTTPBody {
        let chunks = chunkSize.map { form.bodyChunks(maximumSize: $0) } ?? form.bodyChunks()
        let body = HTTPBody(chunks, length: .known(Int64(form.contentLength!)), iterationBehavior: .multiple)
        request.body = .stream(body.map { ByteBuffer(bytes: $0) }, length: .known(Int64(form.contentLength!)))
    } else {
        let chunks = form.bodyChunks(maximumSize: chunkSize ?? 1 << 20) { size, fill in
            var buffer = ByteBuffer()
            try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size, fill)
            return buffer
        }
        request.body = .stream(chunks, length: .known(Int64(form.contentLength!)))
    }
    return try await execute(request)
}

/// Sends `request` with AsyncHTTPClient; returns the answer's body, which must come with 200.
func execute(_ request: HTTPClientRequest) async throws -> Data {
    let client = HTTPClient(eventLoopGroupProvider: .singleton)
    do {
        let response = try await client.execute(request, timeout: .minutes(30))
        let answer = try await response.body.collect(upTo: 1 << 20)
        try await client.shutdown()
        guard response.status == .ok else { throw ClientFailure(status: Int(response.status.code)) }
        return Data(answer.readableBytesView)
    } catch {
        try? await client.shutdown()
        throw error
    }
}

struct ClientFailure: Error {
    var status: Int
}

/// A file as 1 MiB `ByteBuffer`s, each filled by one read(2) straight into its storage: AsyncHTTPClient's own
/// floor for a body of that length.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let url: URL

    func makeAsyncIterator() -> Iterator {
        Iterator(descriptor: open(url.path, O_RDONLY))
    }

    struct Iterator: AsyncIteratorProtocol {
        let descriptor: Int32
        var isDone = false

        mutating func next() async throws -> ByteBuffer? {
            guard !isDone else { return nil }
            var buffer = ByteBufferAllocator().buffer(capacity: 1 << 20)
            let count = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 1 << 20) { bytes in
                Swift.max(0, read(descriptor, bytes.baseAddress, 1 << 20))
            }
            guard count > 0 else {
                isDone = true
                close(descriptor)
                return nil
            }
            return buffer
        }
    }
}

/// A session delegate that only collects the answer: the least a task whose session has a delegate can cost.
final class CollectingDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var answer = Data()
    private var continuation: CheckedContinuation<Data, any Error>?

    /// Sends `request` with its body stream as a data task of a session whose delegate is this object.
    func send(_ request: URLRequest) async throws -> Data {
        let session = URLSession(configuration: .ephemeral, delegate: self, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        return try await withCheckedThrowingContinuation { continuation in
            lock.withLock { self.continuation = continuation }
            session.dataTask(with: request).resume()
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.withLock { answer.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (continuation, answer) = lock.withLock { (self.continuation.take(), self.answer) }
        if let error { continuation?.resume(throwing: error) } else { continuation?.resume(returning: answer) }
    }
}

/// VmHWM from /proc/self/status: the most resident memory this process has had.
func peakResidentMiB() -> Int { ProcessDescriptors.peakResidentBytes() >> 20 }

// The generated file is gigabytes: removed however the check ends, since `exit` runs no deinit.
let directory = try TemporaryDirectory()
var passed = false
do {
    passed = try await check(in: directory)
} catch {
    print("FAIL \(error)")
    print("0 passed, 1 failed")
}
directory.remove()
exit(passed ? 0 : 1)
