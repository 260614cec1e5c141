import Foundation

// libFuzzer target: builds a form from the input (names, file names, types, custom headers, bodies, read size),
// streams it through MultipartBodyStream, and checks the bytes with a reader written here, independently of the
// library: every part comes back as appended, delimiters are where they belong, and contentLength is exact.
// Compiled together with the library's sources (see run.sh), so a mismatch traps with a message.

private struct Input {
    let bytes: [UInt8]
    var offset = 0

    mutating func byte() -> UInt8 {
        defer { offset += 1 }
        return offset < bytes.count ? bytes[offset] : 0
    }

    mutating func take(_ count: Int) -> [UInt8] {
        let end = min(bytes.count, offset + count)
        defer { offset = end }
        return offset < end ? Array(bytes[offset..<end]) : []
    }

    mutating func text() -> String {
        String(decoding: take(Int(byte() % 24)), as: UTF8.self)
    }
}

private enum Sent {
    case field(name: String, fileName: String?, type: String?, body: [UInt8])
    case custom(headers: [(String, String)], body: [UInt8])
}

private let boundary = "FuzzB0undary-7d1e"

/// libFuzzer calls this with each input; it traps on any mismatch.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = Input(bytes: Array(UnsafeBufferPointer(start: data, count: size)))
    var form = try! MultipartFormData(boundary: boundary)
    var sent: [Sent] = []
    // Streams are not read before they are sent, so the form cannot see a boundary in them (the docs say so):
    // those occurrences are allowed.
    var boundariesInStreams = 0
    for _ in 0..<Int(input.byte() % 8) {
        let kind = input.byte() % 4
        let name = input.text()
        let fileName = input.byte() % 2 == 0 ? input.text() : nil
        let type = input.byte() % 3 == 0 ? input.text() : nil
        let body = input.take(Int(input.byte()) * 3)
        let before = form.count
        switch kind {
        case 0:
            form.append(String(decoding: body, as: UTF8.self), name: name)
            if form.count > before {
                sent.append(
                    .field(
                        name: name, fileName: nil, type: nil, body: Array(String(decoding: body, as: UTF8.self).utf8)))
            }
        case 1:
            form.append(Data(body), name: name, fileName: fileName, mimeType: type)
            if form.count > before { sent.append(.field(name: name, fileName: fileName, type: type, body: body)) }
        case 2:
            let copy = Data(body)
            form.append(length: UInt64(body.count), name: name, fileName: fileName, mimeType: type) {
                InputStream(data: copy)
            }
            if form.count > before {
                sent.append(.field(name: name, fileName: fileName, type: type, body: body))
                boundariesInStreams += occurrences(of: Array("--\(boundary)".utf8), in: body)
            }
        default:
            let headers = [(name, input.text()), ("Content-Disposition", "form-data; name=\"\(input.text())\"")]
            do {
                try form.append(headers: headers, body: Data(body))
                sent.append(.custom(headers: headers, body: body))
            } catch {
                check(
                    !isValidHeaderList(headers) || holdsBoundary(headers, body),
                    "refused valid headers \(headers): \(error)")
            }
        }
        if form.count == before, form.appendError != nil { break }
    }
    if let error = form.appendError {
        // Refused: a type with control characters or a part holding the boundary. Nothing may be sent.
        check(form.makeBodyStream().drainFully(readSize: 7) == nil, "a form with \(error) streamed")
        return 0
    }
    let readSize = 1 + Int(input.byte() % 97)
    guard let streamed = form.makeBodyStream().drainFully(readSize: readSize) else {
        fatalError("a valid form failed to stream")
    }
    check(
        UInt64(streamed.count) == form.contentLength,
        "contentLength \(form.contentLength ?? 0), streamed \(streamed.count)")
    check(streamed == Array(try! form.encode()), "encode() differs from the stream")
    verify(streamed, against: sent, boundariesInStreams: boundariesInStreams)
    fuzzMisbehavingSources(&input)
    return 0
}

/// Sources that misbehave as careless callers make them: a subclass that overrides only open, close and read and
/// holds more or fewer bytes than declared, one stream instance that a factory hands out every time, and a file
/// changed at the same size between append and read. Each must stream exactly or fail with a MultipartError: never
/// trap, never send a wrong body.
private func fuzzMisbehavingSources(_ input: inout Input) {
    let body = input.take(Int(input.byte()))
    let inStream = occurrences(of: Array("--\(boundary)".utf8), in: body)
    func expect(_ form: MultipartFormData, streams: Bool, _ what: String) {
        let encoded = try? form.encode()
        check((encoded != nil) == streams, "\(what): \(encoded == nil ? "failed" : "streamed")")
        if let encoded {
            let sent = Sent.field(name: "p", fileName: "p.bin", type: "application/octet-stream", body: body)
            verify(Array(encoded), against: [sent], boundariesInStreams: what.hasPrefix("file") ? 0 : inStream)
        }
    }

    let declared = max(0, body.count + Int(input.byte() % 5) - 2)
    var bare = try! MultipartFormData(boundary: boundary)
    bare.append(length: UInt64(declared), name: "p", fileName: "p.bin") { BareStream(body) }
    expect(bare, streams: declared == body.count, "a bare stream of \(body.count) bytes declared as \(declared)")

    nonisolated(unsafe) let shared = InputStream(data: Data(body))
    var sharing = try! MultipartFormData(boundary: boundary)
    sharing.append(length: UInt64(body.count), name: "p", fileName: "p.bin") { shared }
    expect(sharing, streams: true, "a shared stream, first time")
    expect(sharing, streams: body.isEmpty, "a shared stream, second time")

    guard !body.isEmpty, !holdsBoundary([], body) else { return }
    let url = scratch.appendingPathComponent("p.bin")
    try! Data(body).write(to: url)
    // An hour old, so that a change made now moves the modification time (see FileIdentity).
    try! FileManager.default.setAttributes(
        [.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: url.path)
    var file = try! MultipartFormData(boundary: boundary)
    try! file.append(fileURL: url, name: "p", mimeType: "application/octet-stream")
    switch input.byte() % 3 {
    case 0:
        expect(file, streams: true, "file unchanged")
    case 1:
        let handle = try! FileHandle(forWritingTo: url)
        try! handle.seek(toOffset: UInt64(input.byte()) % UInt64(body.count))
        try! handle.write(contentsOf: [input.byte()])
        try! handle.close()
        expect(file, streams: false, "file overwritten in place")
    default:
        let other = scratch.appendingPathComponent("other.bin")
        try! Data(body).write(to: other)
        check(rename(other.path, url.path) == 0, "rename")
        expect(file, streams: false, "file replaced by one of the same size")
    }
}

/// A directory of this process's own for the files the fuzzer changes.
private let scratch: URL = {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("multipart-fuzz-\(getpid())")
    try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}()

/// A subclass that overrides only open, close and read: its `streamStatus` and `hasBytesAvailable` are the base
/// class's.
private final class BareStream: InputStream {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        super.init(data: Data())
    }

    override func open() {}
    override func close() {}

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        let count = min(len, bytes.count - offset)
        guard count > 0 else { return 0 }
        bytes.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + offset, count: count) }
        offset += count
        return count
    }
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError(message()) }
}

extension MultipartBodyStream {
    fileprivate func drainFully(readSize: Int) -> [UInt8]? {
        open()
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: readSize)
        while true {
            let count = read(&buffer, maxLength: readSize)
            if count < 0 { return nil }
            if count == 0 { return output }
            output += buffer[..<count]
        }
    }
}

private func isValidHeaderList(_ headers: [(String, String)]) -> Bool {
    let token = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
    return headers.allSatisfy { name, value in
        !name.isEmpty && name.utf8.allSatisfy(token.contains)
            && value.utf8.allSatisfy { $0 == 9 || ($0 >= 32 && $0 != 127) }
    }
}

/// Whether the part's header lines or body hold the boundary's text, which the form must refuse.
private func holdsBoundary(_ headers: [(String, String)], _ body: [UInt8]) -> Bool {
    let bytes = Array(headers.map { "\($0.0): \($0.1)\r\n" }.joined().utf8) + body
    let needle = Array(boundary.utf8)
    guard bytes.count >= needle.count else { return false }
    return (0...(bytes.count - needle.count)).contains { Array(bytes[$0..<$0 + needle.count]) == needle }
}

/// Browsers' escaping of names and file names, written out again here; NUL as `%00`.
private func escaped(_ text: String) -> String {
    var output = ""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": output += "%22"
        case "\r": output += "%0D"
        case "\n": output += "%0A"
        case "\0": output += "%00"
        default: output.unicodeScalars.append(scalar)
        }
    }
    return output
}

/// Splits the body at the delimiters and compares each part's header lines and body with what was sent.
private func verify(_ body: [UInt8], against sent: [Sent], boundariesInStreams: Int) {
    let dash = Array("--\(boundary)".utf8)
    var expected: [UInt8] = []
    for (index, part) in sent.enumerated() {
        expected += (index == 0 ? [] : Array("\r\n".utf8)) + dash + Array("\r\n".utf8)
        switch part {
        case .field(let name, let fileName, let type, let bytes):
            var disposition = "Content-Disposition: form-data; name=\"\(escaped(name))\""
            if let fileName { disposition += "; filename=\"\(escaped(fileName))\"" }
            var lines = [disposition]
            let effectiveType = type ?? fileName.map(MultipartFormData.mimeType(forFileName:))
            if let effectiveType { lines.append("Content-Type: \(effectiveType)") }
            expected += Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8) + bytes
        case .custom(let headers, let bytes):
            expected += Array((headers.map { "\($0.0): \($0.1)\r\n" }.joined() + "\r\n").utf8) + bytes
        }
    }
    expected += (sent.isEmpty ? [] : Array("\r\n".utf8)) + dash + Array("--\r\n".utf8)
    check(body == expected, "the body differs from the parts as sent")
    // The boundary's text stands only in the delimiters (one per part, and the close) and in stream bodies.
    let found = occurrences(of: dash, in: body)
    check(
        found == sent.count + 1 + boundariesInStreams,
        "the boundary appears \(found) times for \(sent.count) parts and \(boundariesInStreams) in streams")
}

private func occurrences(of needle: [UInt8], in bytes: [UInt8]) -> Int {
    var count = 0
    var index = 0
    while index + needle.count <= bytes.count {
        if Array(bytes[index..<index + needle.count]) == needle {
            count += 1
            index += needle.count
        } else {
            index += 1
        }
    }
    return count
}
