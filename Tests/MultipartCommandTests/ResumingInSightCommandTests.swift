import Foundation
import MultipartStreamTestSupport
import Testing

/// `-C -` resumes in sight: a line for each drop and resume, `-v` for each request of the protocol, the bytes a run
/// really sent, and a local state problem said as one.
extension CommandLineTests {
    private func blob(seed: UInt64) async throws -> Int {
        var generator = SeededGenerator(seed: seed)
        _ = try directory.file("blob.bin", contents: Data([UInt8].random(count: 3_000_000, using: &generator)))
        return try await run(["-s", "--boundary", "InSight", "-F", "file=@blob.bin", "-o", "-"]).stdout.count
    }

    @Test func aDropAndItsResumeAreSaidALineEach() async throws {
        let length = try await blob(seed: 51)
        let server = try await DraftServer()
        let result = try await run([
            "-C", "-", "--boundary", "InSight", "-F", "file=@blob.bin", "-o", "answer.json",
            server.url(scenario: "head-503").absoluteString,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 4, "\(lines)")
        guard lines.count == 4 else { return }
        #expect(lines[0].hasPrefix("multipart: ") && lines[0].hasSuffix("; trying again in 1.0 s"), "the drop")
        #expect(lines[1] == "multipart: HTTP 503; trying again in 0.0 s", "the HEAD's 503, Retry-After: 0")
        #expect(lines[2] == "multipart: the server has \(length / 2) of \(length) bytes (50.0%): resuming")
        #expect(lines[3].hasPrefix("multipart: sent ") && lines[3].hasSuffix("HTTP 200"))
        #expect(
            try await run(["-s"] + ["-C", "-", "-F", "a=1", "-o", "answer.json", server.url().absoluteString]).stderr
                .isEmpty)
    }

    @Test func verboseShowsEachRequestOfTheProtocolAndItsAnswer() async throws {
        _ = try await blob(seed: 52)
        let server = try await DraftServer()
        let result = try await run([
            "-v", "-C", "-", "--boundary", "InSight", "-F", "file=@blob.bin", "-o", "answer.json",
            server.url(scenario: "head-503").absoluteString,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stderr.split(separator: "\n").map(String.init)
        let requests = lines.filter { $0.hasPrefix("> ") && $0.contains(" http://") }.map {
            $0.split(separator: " ")[1]
        }
        #expect(requests == ["OPTIONS", "POST", "PATCH", "HEAD", "HEAD", "PATCH"], "\(lines)")
        #expect(requests.count == (try server.log()).count, "one line per request sent")
        #expect(lines.contains("* -C -: each request of the protocol, below, carries these headers"))
        #expect(lines.contains("> Upload-Offset: \(try server.log().last?.offset ?? "")"))
        #expect(lines.contains("< HTTP 503") && lines.contains("< Retry-After: 0"))
        #expect(lines.contains("< Upload-Limit: expires=3600"))
    }

    @Test func aServerWithoutTheDraftIsSaidSo() async throws {
        _ = try await blob(seed: 53)
        let server = try await DraftServer(version: 5)
        let result = try await run([
            "-C", "-", "-F", "file=@blob.bin", "-o", "answer.json", server.url().absoluteString,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stderr.hasPrefix(
                "multipart: the server does not take resumable uploads: sending the whole form\n"), "\(result.stderr)")
    }

    /// `%{size_upload}` is what this run sent, not the form's length: a resumed run sends the rest.
    @Test func sizeUploadIsTheBytesThisRunSent() async throws {
        let length = try await blob(seed: 54)
        let server = try await DraftServer()
        var arguments = [
            "-sS", "-C", "-", "--retry", "0", "--boundary", "InSight", "-F", "file=@blob.bin", "-o", "answer.json",
            "-w", "%{size_upload}", server.url(scenario: "patch-503").absoluteString,
        ]
        let first = try await run(arguments)
        #expect(first.status == 4)
        #expect(
            (Int(String(decoding: first.stdout, as: UTF8.self)) ?? 0) >= length / 2, "at least what the server kept")
        arguments[4] = "1"
        let second = try await run(arguments)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(String(decoding: second.stdout, as: UTF8.self) == String(length - length / 2))
    }

    @Test func aStateThatCannotBeKeptIsALocalProblem() async throws {
        let server = try await DraftServer()
        let file = try directory.file("not-a-directory", contents: Data())
        let result = try await run(["-C", "-", "--state-dir", file.path, "-F", "a=1", server.url().absoluteString])
        #expect(result.status == 3, "\(result.stderr)")
        #expect(result.stderr.contains("multipart: -C -: the upload's state cannot be kept at \(file.path)"))
        #expect(!result.stderr.contains("form:"))
        #expect(try server.log().isEmpty, "nothing sent")
    }
}

extension CommandLineTests {
    /// The server's offset of upload `id`, asked as the draft asks it.
    private func serverOffset(_ server: DraftServer, upload id: Int) throws -> UInt64? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = [
            "-s", "-I", "-H", "Upload-Draft-Interop-Version: 10", "http://127.0.0.1:\(server.port)/u/\(id)",
        ]
        let head = String(decoding: try process.outputAlone(), as: UTF8.self)
        return head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("upload-offset:") }
            .flatMap { UInt64($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
    }

    /// Ctrl-C during an append to a server that reads slowly, then the same command at once: the server is still
    /// reading what the cancelled append had in flight, so the rerun asks until its offset stops growing and sends
    /// from where the server ends up, not from where it stood at the first ask.
    @Test func aRerunMomentsAfterCtrlCResumesWhereTheServerEndsUp() async throws {
        var generator = SeededGenerator(seed: 57)
        _ = try directory.file("blob.bin", contents: Data([UInt8].random(count: 12_000_000, using: &generator)))
        let server = try await DraftServer()
        let arguments = [
            "-sS", "-C", "-", "--boundary", "Drained", "-F", "file=@blob.bin", "-o", "answer.json", "-w",
            "%{size_upload}", server.url(scenario: "slow").absoluteString,
        ]
        // One turn for both runs: the rerun must follow the Ctrl-C at once, not wait behind other tests' commands.
        let second = try await Process.inOneTurn { [self] in
            let first = Process()
            first.executableURL = Self.executable
            first.arguments = arguments
            first.currentDirectoryURL = directory.url
            first.environment = environment
            first.standardOutput = FileHandle.nullDevice
            first.standardError = FileHandle.nullDevice
            try first.startAlone()
            try await onAThreadOfItsOwn { [self] in
                try waitFor(
                    "the server to have 1 MiB", every: 0.02, ended: { first.exitedWithStatus },
                    seen: { "offset \(String(describing: try? serverOffset(server, upload: 1)))" },
                    until: { try (serverOffset(server, upload: 1) ?? 0) >= 1 << 20 })
                first.interrupt()
                try waitFor("the interrupted command to exit") { !first.isRunning }
            }
            #expect(first.terminationStatus == 130)

            return try await run(["-v"] + arguments.dropFirst())
        }
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stderr.contains("the last run ended moments ago"), "\(second.stderr)")
        // What each HEAD answered, in order: the offset grew while the rerun asked.
        let offsets = second.stderr.split(separator: "\n").filter { $0.hasPrefix("< Upload-Offset: ") }
            .compactMap { UInt64($0.dropFirst(17)) }
        #expect(offsets.count >= 3 && offsets[0] < offsets[offsets.count - 2], "\(offsets)")
        let log = try server.log()
        let patches = log.filter { $0.method == "PATCH" }
        #expect(patches.count == 2, "\(log)")
        // The first PATCH's entry is logged when the server stopped reading it: every byte it took.
        let drained = patches.first?.bytes ?? 0
        #expect(patches.last?.offset == String(drained), "from where the server ended up: \(log)")
        #expect(String(decoding: second.stdout, as: UTF8.self) == String((patches.last?.bytes ?? 0)))
        let body = try await run(["-s", "--boundary", "Drained", "-F", "file=@blob.bin", "-o", "-"]).stdout
        let expected = try directory.file("expected.multipart", contents: body)
        #expect(try server.forms() == [DraftServer.Form(bytes: body.count, sha256: try sha256sum(expected))])
        #expect(patches.last.map { $0.bytes + drained } == body.count, "nothing sent twice")
    }
}
