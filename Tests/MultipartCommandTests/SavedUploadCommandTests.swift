import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartCLI
@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct SavedUploadOptionTests {
    @Test func savedUploadAndStallOptionsParse() throws {
        let options = try Options(parsing: [
            "-C", "-", "--state-dir", "/tmp/s", "--abandon", "-Y", "100", "--speed-time=2.5", "-F", "a=1",
            "http://a.example/",
        ])
        #expect(options.resumes && options.abandons && options.stateDirectory == "/tmp/s")
        #expect(options.stall == MultipartResumption.Stall(bytesPerSecond: 100, seconds: 2.5))
        // curl's defaults for the one not given.
        #expect(try Options(parsing: ["-y", "5", "-F", "a=1", "http://a.example/"]).stall?.bytesPerSecond == 1)
        #expect(try Options(parsing: ["-Y", "5", "-F", "a=1", "http://a.example/"]).stall?.seconds == 30)
        #expect(try Options(parsing: ["-F", "a=1", "http://a.example/"]).stall == nil)
    }

    /// Ctrl-C prints the command that resumes, unless it may hold a credential, however it was typed.
    @Test func theResumingCommandIsNeverPrintedWithACredential() throws {
        #expect(
            try Options(parsing: ["-C", "-", "-sA", "agent/1", "-F", "a=1", "http://a.example/"]).resumingCommand != nil
        )
        for arguments in [
            ["-sSu", "ada:pw"], ["--user=ada:pw"], ["-H", "X-Api-Key: k"], ["-HCookie: c=1"],
        ] {
            let options = try Options(parsing: ["-C", "-"] + arguments + ["-F", "a=1", "http://a.example/"])
            #expect(options.resumingCommand == nil, "\(arguments)")
        }
        let inURL = try Options(parsing: ["-C", "-", "-F", "a=1", "http://ada:pw@a.example/"])
        #expect(inURL.resumingCommand == nil)
    }

    @Test(arguments: [
        (["--abandon", "-F", "a=1", "http://a.example/"], "only -C - makes"),
        (["--state-dir", "s", "-F", "a=1", "http://a.example/"], "only -C - makes"),
        (["-C", "-", "--abandon", "-F", "a=1", "-o", "-"], "give the URL"),
        (["--speed-limit", "0", "-F", "a=1", "http://a.example/"], "positive number of bytes"),
        (["--speed-time", "nan", "-F", "a=1", "http://a.example/"], "expected a number of seconds"),
        (["-C", "-", "--state-dir=", "-F", "a=1", "http://a.example/"], "needs a directory"),
    ])
    func badSavedUploadOptions(arguments: [String], message: String) throws {
        let error = try #require(throws: UsageError.self) { try Options(parsing: arguments) }
        #expect(error.message.contains(message), "\(error.message)")
    }
}

extension CommandLineTests {
    /// The state directory `run` gives the command, as `$XDG_STATE_HOME/multipart`.
    private var states: URL { directory.path("state/multipart") }

    private func stateFiles() -> [URL] {
        ((try? FileManager.default.contentsOfDirectory(at: states, includingPropertiesForKeys: nil)) ?? [])
            .filter { $0.pathExtension == "json" }
    }

    /// `multipart` with `arguments`, started in the background with the test's state directory.
    func start(_ arguments: [String], stderr: URL, exited: (@Sendable () -> Void)? = nil) throws -> Process {
        let process = Process()
        process.executableURL = Self.executable
        process.arguments = arguments
        process.currentDirectoryURL = directory.url
        process.environment = environment
        _ = FileManager.default.createFile(atPath: stderr.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: stderr)
        process.standardOutput = FileHandle.nullDevice
        if let exited { process.terminationHandler = { _ in exited() } }
        try process.startAlone()
        return process
    }

    /// Ctrl-C once the server holds 1 MiB of a stalled append; the command keeps the upload and says how to resume
    /// it, its state holds no credential, and the same command run again resumes and sends the rest.
    @Test func ctrlCKeepsTheUploadAndTheSameCommandResumesIt() async throws {
        let random = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
        _ = try directory.file("video.bin", contents: random.readData(ofLength: 24 << 20))
        let server = try await DraftServer()
        let arguments = [
            "-S", "-C", "-", "--boundary", "SavedUpload", "-u", "ada:pass-word-secret", "-H",
            "Cookie: session=cookie-secret", "-F", "note=hello", "-F", "video=@video.bin", "-o", "answer.json",
            server.url(scenario: "stall").absoluteString,
        ]
        let first = try start(arguments, stderr: directory.path("first.err"))
        try await onAThreadOfItsOwn {
            try waitFor(
                "the command's append", ended: { first.exitedWithStatus }, seen: { "\((try? server.log()) ?? [])" },
                until: { try server.log().contains(where: { $0.method == "PATCH" }) })
            first.interrupt()
            try waitFor("the interrupted command to exit") { !first.isRunning }
        }
        let message = try String(contentsOf: directory.path("first.err"), encoding: .utf8)
        #expect(first.terminationStatus == 130, "\(message)")
        #expect(message.contains("interrupted after handing out"), "\(message)")
        // What is known, as what it is: the server's word is its creation's offset, whatever went out since.
        #expect(message.contains("(the server had 0 when it last said; it may hold more)"), "\(message)")
        #expect(message.contains("Run the same command again to resume it (with its credentials)"), "\(message)")
        #expect(!message.contains("secret"), "no credential printed")
        #expect(!(try server.log()).contains { $0.method == "DELETE" })
        let saved = stateFiles()
        #expect(saved.count == 1)
        let text = try saved.map { try String(contentsOf: $0, encoding: .utf8) }.joined()
        for secret in ["pass-word-secret", "cookie-secret", "YWRhOnBhc3Mtd29yZC1zZWNyZXQ", "hello"] {
            #expect(!text.contains(secret), "the state holds \(secret)")
        }

        let second = try await run(arguments)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stderr.contains("resuming the saved upload at byte 1048576 of"), "\(second.stderr)")
        #expect(second.stderr.contains("multipart: sent 23.0 MiB from byte 1048576 in"), "only this run's bytes")
        let body = try await run([
            "-s", "--boundary", "SavedUpload", "-F", "note=hello", "-F", "video=@video.bin", "-o", "-",
        ])
        let expected = try directory.file("expected.multipart", contents: body.stdout)
        #expect(try server.forms() == [DraftServer.Form(bytes: body.stdout.count, sha256: try sha256sum(expected))])
        #expect(stateFiles().isEmpty, "no state after success")
    }

    /// `-C -` with no `--retry`: the first append keeps half and answers 503. The command fails, says where the
    /// server stands and how to resume, deletes nothing; the same command run again sends the rest, once.
    /// `-C -` as a user types it first, through a drop after half: retried (three times unless told), the server
    /// asked where it stands, and only the rest sent.
    @Test func aDropIsResumedInTheSameRunByDefault() async throws {
        var generator = SeededGenerator(seed: 36)
        _ = try directory.file("blob.bin", contents: Data([UInt8].random(count: 3_000_000, using: &generator)))
        let server = try await DraftServer()
        let result = try await run([
            "-s", "-C", "-", "--boundary", "Retried", "-F", "file=@blob.bin", "-o", "answer.json",
            server.url(scenario: "head-503").absoluteString,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let body = try await run(["-s", "--boundary", "Retried", "-F", "file=@blob.bin", "-o", "-"]).stdout
        let expected = try directory.file("expected.multipart", contents: body)
        #expect(try server.forms() == [DraftServer.Form(bytes: body.count, sha256: try sha256sum(expected))])
        let log = try server.log()
        #expect(log.map(\.method) == ["OPTIONS", "POST", "PATCH", "HEAD", "HEAD", "PATCH"], "\(log)")
        #expect(log.last?.offset == String(body.count / 2), "only the rest, from the server's offset")
        #expect(stateFiles().isEmpty, "no state after success")
    }

    @Test func retriesSpentKeepTheUploadAndTheSameCommandResumesIt() async throws {
        var generator = SeededGenerator(seed: 34)
        _ = try directory.file("blob.bin", contents: Data([UInt8].random(count: 3_000_000, using: &generator)))
        let server = try await DraftServer()
        let arguments = [
            "-S", "-C", "-", "--retry", "0", "--boundary", "KeptUpload", "-F", "file=@blob.bin", "-o", "answer.json",
            server.url(scenario: "patch-503").absoluteString,
        ]
        let first = try await run(arguments)
        let length = try await run(["-s", "--boundary", "KeptUpload", "-F", "file=@blob.bin", "-o", "-"]).stdout.count
        #expect(first.status == 4, "\(first.stderr)")
        #expect(
            first.stderr.contains("the server having \(length / 2) of the form's \(length) bytes"), "\(first.stderr)")
        #expect(first.stderr.contains("Run the same command again to resume it:\n  "), "\(first.stderr)")
        #expect(
            first.stderr.contains("multipart -S -C - --retry 0 --boundary KeptUpload -F file=@blob.bin"),
            "\(first.stderr)")
        #expect(!(try server.log()).contains { $0.method == "DELETE" }, "the server keeps the upload")
        #expect(stateFiles().count == 1, "the state stays")

        let second = try await run(arguments)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stderr.contains("resuming the saved upload at byte \(length / 2) of"), "\(second.stderr)")
        let body = try await run(["-s", "--boundary", "KeptUpload", "-F", "file=@blob.bin", "-o", "-"])
        let expected = try directory.file("expected.multipart", contents: body.stdout)
        #expect(try server.forms() == [DraftServer.Form(bytes: body.stdout.count, sha256: try sha256sum(expected))])
        #expect(try server.log().filter { $0.method == "POST" }.count == 1, "created once")
        #expect(stateFiles().isEmpty, "no state after success")
    }

    @Test func aCorruptStateFileIsIgnoredWithAWarning() async throws {
        // An absolute path: the form is made here as the command makes it, to find the state file's name.
        let file = try directory.file("a.txt", contents: Data("resumable".utf8))
        let server = try await DraftServer()
        let arguments = ["-S", "-C", "-", "-F", "f=@\(file.path)", "-o", "/dev/null", server.url().absoluteString]
        let options = try Options(parsing: arguments)
        var request = URLRequest(url: server.url())
        request.httpMethod = "POST"
        let key = try #require(try Command.makeForm(options).savedUploadKey(for: request))
        try FileManager.default.createDirectory(at: states, withIntermediateDirectories: true)
        try Data("{\"format\": 1, \"uploadURL\": ".utf8).write(to: states.appendingPathComponent("\(key).json"))
        let result = try await run(arguments)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("warning: ignoring the state file"), "\(result.stderr)")
        #expect(result.stderr.contains("corrupt or truncated"), "\(result.stderr)")
        #expect(try server.forms().count == 1)
        #expect(stateFiles().isEmpty)
    }
}
