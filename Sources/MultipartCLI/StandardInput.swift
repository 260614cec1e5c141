import Foundation
import MultipartStream

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Standard input for `-F name=@-`, copied to a temporary file first: a form's `Content-Length` must be exact before
/// the first byte, and standard input tells its length only at its end. The file is the command's own, readable by
/// its user only, and removed when the command ends, also by Ctrl-C, SIGTERM or SIGHUP.
final class StandardInputSpool {
    /// The temporary file's path.
    let path: String

    /// Copies standard input to a new temporary file, 1 MiB at a time.
    init() throws {
        var template = Array((NSTemporaryDirectory() + "/multipart-stdin-XXXXXX").utf8CString)
        let descriptor: Int32
        do throws(POSIX.Failure) {
            descriptor = try POSIX.makeTemporaryFile(&template)
        } catch {
            throw CommandFailure(status: .localFile, message: "-F @-: cannot make a temporary file: \(error)")
        }
        path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        removeOnSignal(template)
        defer { POSIX.close(descriptor) }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: BufferSize.copy, alignment: 1)
        defer { buffer.deallocate() }
        while true {
            let count: Int
            do throws(POSIX.Failure) {
                count = try POSIX.read(
                    STDIN_FILENO, into: UnsafeMutableRawBufferPointer(start: buffer, count: BufferSize.copy))
            } catch {
                try? POSIX.unlink(path)
                let message = "-F @-: reading standard input failed: \(POSIX.errnoText(error.code))"
                throw CommandFailure(status: .localFile, message: message)
            }
            if count == 0 { return }
            do throws(POSIX.Failure) {
                try POSIX.writeAll(descriptor, UnsafeRawBufferPointer(start: buffer, count: count))
            } catch {
                try? POSIX.unlink(path)
                let message =
                    "-F @-: writing the temporary copy of standard input failed: \(POSIX.errnoText(error.code))"
                throw CommandFailure(status: .localFile, message: message)
            }
        }
    }

    deinit {
        try? POSIX.unlink(path)
    }

    /// Makes SIGINT, SIGTERM and SIGHUP remove the file before they end the process as they would have. A signal
    /// the command was started ignoring (SIGINT for a script's background job) stays ignored.
    private func removeOnSignal(_ path: [CChar]) {
        let copy = UnsafeMutablePointer<CChar>.allocate(capacity: path.count)
        copy.initialize(from: path, count: path.count)
        spoolPath = copy
        for number in [SIGINT, SIGTERM, SIGHUP] {
            guard !isIgnored(number) else { continue }
            _ = signal(number) { received in
                // Only async-signal-safe calls here: unlink, signal, raise.
                if let spoolPath { POSIX.unlinkInSignalHandler(spoolPath) }
                _ = signal(received, SIG_DFL)
                raise(received)
            }
        }
    }

    /// All of standard input, for `-F name=<-`: a text field, held in memory as `<file` is.
    static func readAll() throws -> Data {
        FileHandle.standardInput.readDataToEndOfFile()
    }
}

/// Whether the process ignores signal `number` (as it was started, or since).
private func isIgnored(_ number: Int32) -> Bool {
    var current = sigaction()
    guard sigaction(number, nil, &current) == 0 else { return false }
    #if canImport(Darwin)
        let handler = current.__sigaction_u.__sa_handler
    #else
        let handler = current.__sigaction_handler.sa_handler
    #endif
    // C function pointers are not Equatable: compare their addresses.
    return unsafeBitCast(handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
}

/// The spool's path for the signal handler, which can capture nothing; set once, before the handlers.
nonisolated(unsafe) private var spoolPath: UnsafeMutablePointer<CChar>?
