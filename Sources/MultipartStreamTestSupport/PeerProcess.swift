import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A peer server started as a child process: it prints what it listens on as its first line of stdout, and exits
/// when its stdin closes.
struct PeerProcess {
    let process = Process()
    let stdin: Pipe
    let stdout: Pipe
    /// The first line the peer printed, trimmed.
    let firstLine: String

    /// Starts `/usr/bin/env arguments` and waits for its first line, read on a thread of its own: a test that blocks
    /// one of the concurrency pool's threads (two here) holds up every other test's tasks, and a hundred tests
    /// starting their servers at once held them up for seconds. `name` says which peer failed.
    init(_ arguments: [String], name: String) async throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = PythonInterpreter.resolved(arguments)
        // The pipes are made while no other process starts, and close on exec: a peer or command started meanwhile
        // would hold this peer's stdin open, and it would never see it close.
        let process = process
        (stdin, stdout) = try process.startAlone {
            let (stdin, stdout) = (Pipe(), Pipe())
            for handle in [
                stdin.fileHandleForReading, stdin.fileHandleForWriting, stdout.fileHandleForReading,
                stdout.fileHandleForWriting,
            ] {
                _ = fcntl(handle.fileDescriptor, F_SETFD, FD_CLOEXEC)
            }
            process.standardInput = stdin
            process.standardOutput = stdout
            return (stdin, stdout)
        }
        let output = stdout.fileHandleForReading
        let line = try await onAThreadOfItsOwn {
            var line = Data()
            while !line.contains(UInt8(ascii: "\n")) {
                let chunk = output.availableData
                guard !chunk.isEmpty else {
                    throw Peer.Failure(description: "the \(name) server exited before listening")
                }
                line.append(chunk)
            }
            return line
        }
        firstLine = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Closes the peer's stdin, which makes it exit, and waits for it: no server outlives its test. A peer still
    /// running after `seconds` (its stdin held open by a process that inherited it before it was marked
    /// close-on-exec) is terminated, then killed: a stop never waits forever, as one did in a CI run, holding a
    /// thread of the pool that the test holding the inheriting process needed. Returns what the peer printed on
    /// stdout after its first line.
    @discardableResult
    func stop(upTo seconds: Double = 10) -> Data {
        try? stdin.fileHandleForWriting.close()
        let exited = { [process] in !process.isRunning }
        if (try? waitFor("the peer to exit", upTo: seconds, every: 0.005, until: exited)) == nil {
            process.terminate()
            if (try? waitFor("the peer to end", upTo: 5, every: 0.005, until: exited)) == nil {
                kill(process.processIdentifier, SIGKILL)
            }
        }
        process.waitUntilExit()
        // What the peer wrote is in the pipe now; read it without waiting for an end of file that another process
        // holding the write end would put off.
        let descriptor = stdout.fileHandleForReading.fileDescriptor
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        let rest = readAll(from: descriptor).bytes
        try? stdout.fileHandleForReading.close()
        return rest
    }
}

/// The Python interpreter that `python3` names, found once: where `python3` is pyenv's shim (as on the machines this
/// suite runs on), it is a bash script that starts half a dozen processes before Python does, and a run starts
/// hundreds of Python peers: about a tenth of the run's CPU went to the shim.
enum PythonInterpreter {
    static let path: String = {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", "import sys; print(sys.executable)"]
        guard let data = try? process.outputAlone() else { return "python3" }
        let path = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return process.terminationStatus == 0 && path.hasPrefix("/") ? path : "python3"
    }()

    /// `arguments` with `python3` as the interpreter's own path.
    static func resolved(_ arguments: [String]) -> [String] {
        arguments.first == "python3" ? [path] + arguments.dropFirst() : arguments
    }
}
