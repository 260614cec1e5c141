import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension CommandLineTests {
    /// The outage: 64 MiB into the upload its connection is reset, and for `seconds` every connection after it too.
    private static func outage(seconds: Int) -> [String] { ["outage:64M:\(seconds)"] }

    /// A 256 MiB file, the `multipart -C -` arguments that send it with a fixed boundary to `url`, and the SHA-256
    /// of the body those arguments make, written by the command itself (`-o`, nothing sent).
    private func bigUpload(to url: URL) async throws -> (arguments: [String], form: DraftServer.Form) {
        let file = directory.path("big.bin")
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        let handle = try FileHandle(forWritingTo: file)
        let block = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 9) })
        for index in 0..<256 { try handle.write(contentsOf: block.prefix(block.count - (index == 255 ? 7 : 0))) }
        try handle.close()
        let form = ["--boundary", "outage-boundary", "-F", "title=backup", "-F", "file=@big.bin"]
        let written = try await run(["-s"] + form + ["-o", "expected.multipart"])
        #expect(written.status == 0, "\(written.stderr)")
        let expected = directory.path("expected.multipart")
        let bytes = try FileManager.default.attributesOfItem(atPath: expected.path)[.size] as? Int ?? 0
        let sum = try sha256sum(expected)
        return (["-C", "-"] + form + [url.absoluteString], DraftServer.Form(bytes: bytes, sha256: sum))
    }

    /// `multipart` with `arguments`, killed and failed if it runs past `seconds`; its status, stderr and when it
    /// exited (told by the process's end, not by the test's next look, which a busy pool of threads delays).
    func run(_ arguments: [String], upTo seconds: Double) async throws -> (Run, exited: Date) {
        let stderr = directory.path("stderr-\(UUID().uuidString)")
        let exited = LockedDate()
        let process = try start(arguments, stderr: stderr) { exited.set(Date()) }
        defer { if process.isRunning { process.terminate() } }
        try await waitFor("multipart \(arguments.joined(separator: " "))", upTo: seconds, every: 0.1) {
            !process.isRunning
        }
        process.waitUntilExit()
        let said = try String(contentsOf: stderr, encoding: .utf8)
        return (Run(status: process.terminationStatus, stdout: Data(), stderr: said), exited.value ?? Date())
    }

    /// The PATCH bodies the server read past the form's length: what went twice.
    private func resent(_ server: DraftServer, form: DraftServer.Form) throws -> Int {
        try server.log().filter { $0.method == "PATCH" }.reduce(0) { $0 + $1.bytes } - form.bytes
    }

    /// A 45 s outage with the defaults of `-C -`: waited out, tried at most 15 times meanwhile, sent again within
    /// 15 s of the network's return, the form on the server once and whole, at most 8 MiB of it twice. A line on
    /// stderr says why it waits and when it tries next.
    @Test(.longRun) func aFortyFiveSecondOutageIsWaitedOut() async throws {
        let server = try await DraftServer()
        let proxy = try await FaultProxy(to: server.port, cuts: Self.outage(seconds: 45))
        let upload = try await bigUpload(to: proxy.url(server.url(scenario: "relative-location")))
        let (result, _) = try await run(upload.arguments, upTo: 240)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try server.forms() == [upload.form])
        #expect(try resent(server, form: upload.form) <= 8 << 20)
        #expect(result.stderr.contains("trying again in"), "\(result.stderr)")
        let seen = try proxy.stop()
        #expect(seen.outageTries >= 1 && seen.outageTries <= 15, "\(seen.outageTries) tries during the outage")
        let end = try #require(seen.outageEnd)
        let back = try #require(seen.firstAfterOutage)
        #expect(back - end <= 15, "sent again \(back - end) s after the network came back")
    }

    /// `--retry-max-time 10` through the same outage: exit 4 within 10 to 30 s of its start, the upload saved (its
    /// state, and the server's upload, never deleted); once the network is back, the same command sends only the
    /// rest.
    @Test(.longRun) func anOutageLongerThanRetryMaxTimeExits4AndKeepsTheUpload() async throws {
        let server = try await DraftServer()
        let proxy = try await FaultProxy(to: server.port, cuts: Self.outage(seconds: 30))
        let upload = try await bigUpload(to: proxy.url(server.url(scenario: "relative-location")))
        let (result, exited) = try await run(["--retry-max-time", "10"] + upload.arguments, upTo: 120)
        let took = exited.timeIntervalSince1970 - (try #require(try proxy.seen().outageEnd) - 30)
        #expect(result.status == 4, "\(result.stderr)")
        #expect(took >= 10 && took <= 30, "exited \(took) s into the outage: \(result.stderr)")
        #expect(result.stderr.contains("no progress for"), "\(result.stderr)")
        let states = directory.path("state/multipart")
        let saved = try FileManager.default.contentsOfDirectory(atPath: states.path).filter { $0.hasSuffix(".json") }
        #expect(saved.count == 1, "the state is kept: \(saved)")
        #expect(try !server.log().contains { $0.method == "DELETE" }, "the server's upload was deleted")
        let held = try server.log().filter { $0.method == "PATCH" }.reduce(0) { $0 + $1.bytes }

        // Once connections go through again (each one tried before is reset at once), the same command resumes.
        try await waitFor("the outage to end", upTo: 60, every: 0.5) {
            (try? loopbackGet(proxy.url(URL(string: "http://127.0.0.1/log")!))) != nil
        }
        let before = try server.log().count
        let (rerun, _) = try await run(upload.arguments, upTo: 120)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        #expect(try server.forms() == [upload.form])
        let patches = try server.log().dropFirst(before).filter { $0.method == "PATCH" }
        #expect(patches.first.flatMap { Int($0.offset ?? "") } ?? 0 >= held - (8 << 20), "\(patches)")
        #expect(patches.reduce(0) { $0 + $1.bytes } <= upload.form.bytes - held + (8 << 20), "only the rest went")
        let left = try FileManager.default.contentsOfDirectory(atPath: states.path).filter { $0.hasSuffix(".json") }
        #expect(left.isEmpty, "the state is removed once the upload completes")
    }
}

/// A time set once from another thread (a process's termination handler).
final class LockedDate: @unchecked Sendable {
    // @unchecked: `date` is guarded by `lock`.
    private let lock = NSLock()
    private var date: Date?

    func set(_ value: Date) { lock.withLock { date = value } }
    var value: Date? { lock.withLock { date } }
}
