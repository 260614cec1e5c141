import Foundation
import MultipartStreamTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The test support's processes start one at a time (``Foundation/Process/startAlone(preparing:)``): a child started
/// by one thread while another thread starts its own holds none of that other child's sockets, so every exit is seen.
@Suite struct ProcessSpawningTests {
    /// 400 children started from every thread at once, half of them sleeping, in a process with 300 more descriptors
    /// open (the wider `run()`'s window, as in a full run): each sleeper holds one socket, its own. Started with
    /// `run()` alone, a few in each such run held another child's too (1 to 7 of 200 here).
    @Test(.enabled(if: isLinux)) func aChildStartedBesideAnotherHoldsNoneOfItsSockets() async throws {
        let open = (0..<300).compactMap { _ in FileHandle(forReadingAtPath: "/dev/null") }
        defer { for handle in open { try? handle.close() } }
        let sleepers = try await onAThreadOfItsOwn { () -> [Int32] in
            let started = Recorded<Int32>()
            DispatchQueue.concurrentPerform(iterations: 400) { index in
                let child = Process()
                child.executableURL = URL(fileURLWithPath: index % 2 == 0 ? "/bin/sleep" : "/bin/true")
                child.arguments = index % 2 == 0 ? ["30"] : []
                guard (try? child.startAlone()) != nil else { return }
                if index % 2 == 0 { started.append(child.processIdentifier) }
            }
            return started.values
        }
        #expect(sleepers.count == 200)
        var holding: [Int32: Int] = [:]
        for pid in sleepers {
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
            let sockets = entries.filter {
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)"))?
                    .hasPrefix("socket:") == true
            }.count
            if sockets != 1 { holding[pid] = sockets }
            kill(pid, SIGKILL)
        }
        #expect(holding.isEmpty, "sleepers holding another child's socket: \(holding)")
    }
}
