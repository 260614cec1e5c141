import Foundation
import MultipartStreamTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The test support's processes start one at a time (``Foundation/Process/startAlone(preparing:)``): a child started
/// by one thread while another thread starts its own holds none of that other child's sockets, so every exit is seen.
@Suite struct ProcessSpawningTests {
    /// 200 children started from every thread at once, half of them sleeping until killed, in a process with 300 more
    /// descriptors open (the wider `run()`'s window, as in a full run): each sleeper holds one socket, its own.
    /// Started with `run()` alone, 2 or 3 sleepers held another child's too, in each of 4 runs.
    @Test(.enabled(if: isLinux)) func aChildStartedBesideAnotherHoldsNoneOfItsSockets() async throws {
        let open = (0..<300).compactMap { _ in FileHandle(forReadingAtPath: "/dev/null") }
        defer { for handle in open { try? handle.close() } }
        let sleepers = try await onAThreadOfItsOwn { () -> [Int32] in
            let started = Recorded<Int32>()
            DispatchQueue.concurrentPerform(iterations: 200) { index in
                let child = Process()
                child.executableURL = URL(fileURLWithPath: index % 2 == 0 ? "/bin/sleep" : "/bin/true")
                // Until killed below, however long a loaded run takes to start them all.
                child.arguments = index % 2 == 0 ? ["3600"] : []
                guard (try? child.startAlone()) != nil else { return }
                if index % 2 == 0 { started.append(child.processIdentifier) }
            }
            return started.values
        }
        #expect(sleepers.count == 100)
        // The tests running beside this one open TCP sockets without close-on-exec, which a child started meanwhile
        // inherits however it is started; a child's end of its exit pair is a Unix socket, as no test's own sockets are.
        let unix = try unixSocketInodes()
        var holding: [Int32: Int] = [:]
        for pid in sleepers {
            #expect(kill(pid, 0) == 0, "sleeper \(pid) is still running, and its descriptors there to look at")
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
            let sockets = entries.filter {
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")
                else { return false }
                return target.hasPrefix("socket:[") && unix.contains(String(target.dropFirst(8).dropLast()))
            }.count
            if sockets != 1 { holding[pid] = sockets }
            kill(pid, SIGKILL)
        }
        #expect(holding.isEmpty, "sleepers holding another child's socket: \(holding)")
    }

    /// The inodes of every Unix socket there is, read once the sleepers hold theirs: the seventh column of
    /// `/proc/net/unix`.
    private func unixSocketInodes() throws -> Set<String> {
        // Read to its end: `String(contentsOfFile:)` returned only the first part of it here.
        let file = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/net/unix"))
        defer { try? file.close() }
        let table = String(decoding: try file.readToEnd() ?? Data(), as: UTF8.self)
        return Set(
            table.split(separator: "\n").dropFirst().compactMap { line in
                let columns = line.split(separator: " ", omittingEmptySubsequences: true)
                return columns.count > 6 ? String(columns[6]) : nil
            })
    }
}
