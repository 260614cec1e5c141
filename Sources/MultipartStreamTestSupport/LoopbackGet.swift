import Foundation

#if canImport(Glibc)
    import Glibc
    private let systemConnect = Glibc.connect
#elseif canImport(Darwin)
    import Darwin
    private let systemConnect = Darwin.connect
#endif

/// `url`'s answer body, fetched over a socket of this process rather than with URLSession or a `curl` process:
/// URLSession's one queue for the process may be held by a test's blocked stream, and a process per look (hundreds
/// a test, thousands a run) cost the suite more than the uploads it checked. Only a peer on 127.0.0.1 is asked.
///
/// - Throws: ``Peer/Failure`` when the peer cannot be reached, stops answering for 30 s, or its answer is not HTTP.
public func loopbackGet(_ url: URL) throws -> Data {
    guard url.scheme == "http", url.host == "127.0.0.1" || url.host == "localhost", let port = url.port else {
        throw Peer.Failure(description: "\(url) is not a peer on 127.0.0.1")
    }
    let parts = URLComponents(url: url, resolvingAgainstBaseURL: true)
    let path = parts?.percentEncodedPath ?? ""
    let target = (path.isEmpty ? "/" : path) + (parts?.percentEncodedQuery.map { "?\($0)" } ?? "")
    let descriptor = try LoopbackSocket.connect(to: UInt16(port))
    defer { close(descriptor) }
    // HTTP/1.0: the peer closes the connection after its answer, whose end is then the end of the stream.
    let request = "GET \(target) HTTP/1.0\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n"
    try LoopbackSocket.send(Array(request.utf8), on: descriptor, to: url)
    let (answer, failure) = readAll(from: descriptor)
    if let failure { throw Peer.Failure(description: "reading \(url): errno \(failure)") }
    guard let headEnd = answer.range(of: Data("\r\n\r\n".utf8)) else {
        throw Peer.Failure(description: "\(url) answered \(answer.count) bytes without an HTTP head")
    }
    let head = String(decoding: answer[..<headEnd.lowerBound], as: UTF8.self).lowercased()
    let body = Data(answer[headEnd.upperBound...])
    guard head.hasPrefix("http/1.") else { throw Peer.Failure(description: "\(url) answered no HTTP: \(head)") }
    return head.contains("\r\ntransfer-encoding: chunked") ? try dechunked(body, from: url) : body
}

/// A chunked body's bytes.
private func dechunked(_ body: Data, from url: URL) throws -> Data {
    var bytes = Data()
    var rest = body[...]
    while let lineEnd = rest.range(of: Data("\r\n".utf8)) {
        let sizeText = String(decoding: rest[..<lineEnd.lowerBound], as: UTF8.self)
        guard let size = Int(sizeText.split(separator: ";").first ?? "", radix: 16),
            rest.distance(from: lineEnd.upperBound, to: rest.endIndex) >= size
        else { throw Peer.Failure(description: "\(url) answered a broken chunk: \(sizeText)") }
        if size == 0 { return bytes }
        let start = lineEnd.upperBound
        bytes.append(rest[start..<rest.index(start, offsetBy: size)])
        rest = rest[rest.index(start, offsetBy: size)...].dropFirst(2)
    }
    throw Peer.Failure(description: "\(url) answered a chunked body cut short")
}

/// A TCP connection to 127.0.0.1, closed on exec (so that no child process started meanwhile holds it open), that
/// gives up after 30 s of silence either way.
private enum LoopbackSocket {
    static func connect(to port: UInt16) throws -> Int32 {
        #if os(Linux)
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
            let descriptor = socket(AF_INET, SOCK_STREAM, 0)
            if descriptor >= 0 { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        #endif
        guard descriptor >= 0 else { throw Peer.Failure(description: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                systemConnect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            close(descriptor)
            throw Peer.Failure(description: "connect to 127.0.0.1:\(port): errno \(code)")
        }
        return descriptor
    }

    static func send(_ bytes: [UInt8], on descriptor: Int32, to url: URL) throws {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw Peer.Failure(description: "sending to \(url): errno \(errno)") }
            sent += count
        }
    }
}
