import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Everything `descriptor` gives until its end, and the `errno` that stopped the reading before it, if one did (a
/// socket's timeout, a non-blocking pipe with nothing more for now). The test support's one read loop: a peer's log
/// over a socket, a peer's last output, a file under /proc that Foundation reads only the first page of.
func readAll(from descriptor: Int32) -> (bytes: Data, failure: Int32?) {
    var bytes = Data()
    var buffer = [UInt8](repeating: 0, count: 64 << 10)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0 && errno == EINTR { continue }
        if count < 0 { return (bytes, errno) }
        if count == 0 { return (bytes, nil) }
        bytes.append(contentsOf: buffer[..<count])
    }
}
