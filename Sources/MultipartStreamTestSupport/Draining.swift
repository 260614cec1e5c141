import Foundation
import MultipartStream

/// What reading a stream to its end produced.
public struct Drained {
    /// The bytes read.
    public var bytes = Data()
    /// The error that stopped the stream, when a read returned -1.
    public var error: MultipartError?
}

extension MultipartBodyStream {
    /// Opens the stream if needed and reads it to the end (0) or to the first failure (-1), `readSize` bytes at a
    /// time, checking the `InputStream` rules on every read.
    public func drain(readSize: Int = 64 << 10) -> Drained {
        if streamStatus == .notOpen { open() }
        var drained = Drained()
        var buffer = [UInt8](repeating: 0, count: readSize)
        while true {
            let count = buffer.withUnsafeMutableBufferPointer { read($0.baseAddress!, maxLength: readSize) }
            if count < 0 {
                drained.error = streamError as? MultipartError
                precondition(streamStatus == .error, "-1 must leave the stream in .error")
                return drained
            }
            if count == 0 { return drained }
            precondition(count <= readSize, "read returned more than maxLength")
            drained.bytes.append(contentsOf: buffer[..<count])
        }
    }
}

extension MultipartFormData {
    /// The body read through a new ``MultipartBodyStream``; throws the stream's error if it fails.
    public func streamedBody(readSize: Int = 64 << 10) throws -> Data {
        let drained = makeBodyStream().drain(readSize: readSize)
        if let error = drained.error { throw error }
        return drained.bytes
    }
}
