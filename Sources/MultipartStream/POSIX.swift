import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The system calls the package loops over, written once: reads and writes retried after `EINTR`, a write carried on
/// until every byte is out, and a failure's `errno` in words. Package-wide: the command writes files and spools
/// standard input with them too.
package enum POSIX {
    /// A system call failed with this `errno`.
    package struct Failure: Error, Equatable {
        package var code: Int32
    }

    /// Writes every byte of `bytes` to `descriptor`, in as many writes as it takes.
    package static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) throws(Failure) {
        var written = 0
        while written < bytes.count {
            let result = systemWrite(descriptor, bytes.baseAddress! + written, bytes.count - written)
            if result < 0 {
                if errno == EINTR { continue }
                throw Failure(code: errno)
            }
            written += result
        }
    }

    /// Reads up to `buffer.count` bytes from `descriptor` into `buffer`; 0 only at the end.
    package static func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Failure) -> Int {
        while true {
            let count = systemRead(descriptor, buffer.baseAddress, buffer.count)
            if count >= 0 { return count }
            if errno != EINTR { throw Failure(code: errno) }
        }
    }

    /// Closes `descriptor`; its failure has nothing left to undo.
    package static func close(_ descriptor: Int32) {
        _ = systemClose(descriptor)
    }

    /// `errno` in words, with its number: "No space left on device (errno 28)".
    package static func errnoText(_ code: Int32) -> String {
        "\(String(cString: strerror(code))) (errno \(code))"
    }
}

// The C library's names, which the methods above shadow.
#if canImport(Glibc)
    private let systemRead = Glibc.read
    private let systemWrite = Glibc.write
    private let systemClose = Glibc.close
#elseif canImport(Musl)
    private let systemRead = Musl.read
    private let systemWrite = Musl.write
    private let systemClose = Musl.close
#elseif canImport(Darwin)
    private let systemRead = Darwin.read
    private let systemWrite = Darwin.write
    private let systemClose = Darwin.close
#endif
