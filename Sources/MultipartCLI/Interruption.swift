import Dispatch
import Foundation
import MultipartStream

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Ctrl-C (SIGINT) and SIGTERM during a `-C -` upload: the upload under way is cancelled, which keeps a saved
/// upload's resource and state, and the command ends with 128 and the signal's number. A second signal ends the
/// process at once.
final class Interruption: @unchecked Sendable {
    // @unchecked: the state is guarded by `lock`; the signal sources run on a dispatch queue.
    static let shared = Interruption()

    private let lock = Lock()
    private var sources: [any DispatchSourceSignal] = []
    private var cancel: (@Sendable () -> Void)?
    /// The signal that came, if one did.
    private var received: Int32?

    /// The signal that came, if one did.
    var caught: Int32? { lock.withLock { received } }

    /// Takes SIGINT and SIGTERM from their default, which ends the process on the spot.
    func install() {
        lock.withLock {
            guard sources.isEmpty else { return }
            for number in [SIGINT, SIGTERM] {
                _ = signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler { [weak self] in self?.handle(number) }
                source.resume()
                sources.append(source)
            }
        }
    }

    /// Cancels with `cancel` when a signal comes (at once if one came already), until the next call.
    func onSignal(_ cancel: @escaping @Sendable () -> Void) {
        let now = lock.withLock {
            self.cancel = cancel
            return received != nil
        }
        if now { cancel() }
    }

    private func handle(_ number: Int32) {
        let cancel: (@Sendable () -> Void)? = lock.withLock {
            if received != nil { _exit(128 + number) }
            received = number
            return self.cancel
        }
        cancel?()
    }
}

extension Options {
    /// This command as typed, quoted for a POSIX shell; `nil` when it may hold a credential (`-u`, a password in the
    /// URL, a header other than `-A`'s), which is never printed, or bytes that are not UTF-8, which a terminal would
    /// not show as they are.
    var resumingCommand: String? {
        let arguments = RawArguments.current
        guard user == nil, url?.password == nil, headers.allSatisfy({ $0.name == "User-Agent" }),
            arguments.allSatisfy(RawArguments.isUTF8)
        else { return nil }
        return ([CommandLine.arguments.first ?? "multipart"] + arguments).map { argument in
            let plain = argument.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || "-_./=:@,+%".utf8.contains(byte)
            }
            return plain && !argument.isEmpty
                ? argument : "'" + argument.replacingOccurrences(of: "'", with: "'\\''") + "'"
        }.joined(separator: " ")
    }
}
