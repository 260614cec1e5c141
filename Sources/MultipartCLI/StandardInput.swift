import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Standard input for `-F name=@-`, copied to a temporary file first: a form's `Content-Length` must be exact before
/// the first byte, and standard input tells its length only at its end. The file is the command's own, readable by
/// its user only, and removed when the command ends.
final class StandardInputSpool {
    /// The temporary file's path.
    let path: String

    /// Copies standard input to a new temporary file, 1 MiB at a time.
    init() throws {
        var template = Array((NSTemporaryDirectory() + "/multipart-stdin-XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else {
            throw CommandFailure(status: .localFile, message: "-F @-: cannot make a temporary file: \(errnoText())")
        }
        path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer { close(descriptor) }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 1)
        defer { buffer.deallocate() }
        while true {
            let count = read(STDIN_FILENO, buffer, 1 << 20)
            if count == 0 { return }
            if count < 0 {
                if errno == EINTR { continue }
                let message = "-F @-: reading standard input failed: \(errnoText())"
                unlink(path)
                throw CommandFailure(status: .localFile, message: message)
            }
            var written = 0
            while written < count {
                let result = write(descriptor, buffer + written, count - written)
                if result < 0 {
                    if errno == EINTR { continue }
                    let message = "-F @-: writing the temporary copy of standard input failed: \(errnoText())"
                    unlink(path)
                    throw CommandFailure(status: .localFile, message: message)
                }
                written += result
            }
        }
    }

    deinit {
        unlink(path)
    }

    /// All of standard input, for `-F name=<-`: a text field, held in memory as `<file` is.
    static func readAll() throws -> Data {
        FileHandle.standardInput.readDataToEndOfFile()
    }
}

private func errnoText() -> String {
    String(cString: strerror(errno))
}
