import Foundation
import MultipartStream
import MultipartStreamTestSupport
import Testing

@testable import MultipartCLI

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `-F` in curl's grammar, and the rest of the command line.
@Suite struct CommandLineParsingTests {
    @Test(arguments: [
        ("a=1", FieldArgument.text(name: "a", value: "1", type: nil)),
        ("a=", .text(name: "a", value: "", type: nil)),
        ("a=x=y", .text(name: "a", value: "x=y", type: nil)),
        ("a=b;c", .text(name: "a", value: "b;c", type: nil)),
        ("a=v;type=text/csv", .text(name: "a", value: "v", type: "text/csv")),
        ("a=\"x;type=y\"", .text(name: "a", value: "x;type=y", type: nil)),
        ("a=\"say \\\"hi\\\" \\\\o/\"", .text(name: "a", value: "say \"hi\" \\o/", type: nil)),
        ("a=\"@literal\"", .text(name: "a", value: "@literal", type: nil)),
        ("photo=@cat.jpg", .file(name: "photo", path: "cat.jpg", type: nil, fileName: nil)),
        (
            "doc=@a.pdf;type=application/pdf;filename=b.pdf",
            .file(name: "doc", path: "a.pdf", type: "application/pdf", fileName: "b.pdf")
        ),
        ("doc=@a.pdf;filename=\"x;y.pdf\"", .file(name: "doc", path: "a.pdf", type: nil, fileName: "x;y.pdf")),
        ("doc=@\"my file;1.txt\"", .file(name: "doc", path: "my file;1.txt", type: nil, fileName: nil)),
        ("doc=@a;b.txt", .file(name: "doc", path: "a;b.txt", type: nil, fileName: nil)),
        ("note=<notes.txt", .textFromFile(name: "note", path: "notes.txt", type: nil)),
        ("note=<notes.txt;type=text/plain", .textFromFile(name: "note", path: "notes.txt", type: "text/plain")),
        ("größe=ü", .text(name: "größe", value: "ü", type: nil)),
    ])
    func fieldArguments(argument: String, expected: FieldArgument) throws {
        #expect(try FieldArgument(parsing: argument) == expected)
    }

    @Test(arguments: [
        ("novalue", "expected name=value"),
        ("=x", "the field has no name"),
        ("a=@", "no file after @"),
        ("a=<", "no file after <"),
        ("a=\"open", "a quote is not closed"),
        ("a=<f;filename=x", ";filename= is not supported here"),
        ("a=@f;encoder=base64", ";encoder= is not supported here"),
        ("a=\"v\"junk", "unexpected text"),
    ])
    func badFieldArguments(argument: String, message: String) throws {
        let error = try #require(throws: UsageError.self) { try FieldArgument(parsing: argument) }
        #expect(error.message.contains(message), "\(error.message)")
    }

    @Test func everyOption() throws {
        let options = try Options(parsing: [
            "-F", "a=1", "-Fb=@f.bin", "--form", "c=<n.txt", "-H", "Authorization: Bearer T", "--header", "X-A:b",
            "-X", "PUT", "--boundary", "XyZ", "--strategy", "stream", "--limit-rate", "500K", "-o", "out.json", "-s",
            "-v", "https://example.com/upload",
        ])
        var expected = Options()
        expected.fields = [
            .text(name: "a", value: "1", type: nil), .file(name: "b", path: "f.bin", type: nil, fileName: nil),
            .textFromFile(name: "c", path: "n.txt", type: nil),
        ]
        expected.headers = [.init(name: "Authorization", value: "Bearer T"), .init(name: "X-A", value: "b")]
        expected.method = "PUT"
        expected.boundary = "XyZ"
        expected.strategy = .stream
        expected.rateLimit = 500 << 10
        expected.output = "out.json"
        expected.silent = true
        expected.verbose = true
        expected.url = URL(string: "https://example.com/upload")
        // Each option as typed, by its long name too: what a queue's modes take or refuse by name.
        #expect(
            options.given.map(\.typed) == [
                "-F", "-F", "--form", "-H", "--header", "-X", "--boundary",
                "--strategy", "--limit-rate", "-o", "-s", "-v",
            ])
        #expect(options.given.map(\.name).prefix(3) == ["--form", "--form", "--form"])
        expected.given = options.given
        #expect(options == expected)
    }

    @Test(arguments: [("500", 500), ("2k", 2_048), ("3M", 3 << 20), ("1G", 1 << 30)])
    func rates(text: String, bytes: Int) throws {
        #expect(try Options(parsing: ["--limit-rate", text, "-o", "-"]).rateLimit == bytes)
    }

    @Test(arguments: [
        (["-F", "a=1"], "give a URL to upload to, or -o FILE"),
        (["-F"], "-F needs a value"),
        (["--strategy", "fast", "-o", "-"], "expected stream, file or automatic"),
        (["--limit-rate", "fast", "-o", "-"], "expected a positive number"),
        (["--limit-rate", "0", "-o", "-"], "expected a positive number"),
        (["--limit-rate", "9999999999999999G", "-o", "-"], "more bytes per second than can be counted"),
        (["-H", "NoColon", "-o", "-"], "expected 'Name: value'"),
        (["-H", "X-A: 1\r\nX-Injected: 2", "-o", "-"], "holds CR, LF or another control character"),
        (["-H", "X-A: 1\nX-Injected: 2", "-o", "-"], "holds CR, LF or another control character"),
        (["-H", "X A: 1", "-o", "-"], "the name must be"),
        (["-H", "X\u{01}A: 1", "-o", "-"], "the name must be"),
        (["-X", "POST /x HTTP/1.1\r\nX-Injected: 1\r\n", "-o", "-"], "a method must be"),
        (["-X", "", "-o", "-"], "a method must be"),
        (["--bogus"], "unknown option --bogus"),
        (["ftp://example.com/"], "not an http or https URL"),
        (["http://a.example/", "http://b.example/"], "more than one URL"),
        (["--output-body", "x", "http://a.example/"], "leave out the URL"),
    ])
    func badCommandLines(arguments: [String], message: String) throws {
        let error = try #require(throws: UsageError.self) { try Options(parsing: arguments) }
        #expect(error.message.contains(message), "\(error.message)")
    }

    @Test func theProgressBarShowsBytesPercentRateAndETA() {
        let bar = ProgressReporter.bar(
            MultipartUploadProgress(bytesSent: 1 << 30, totalBytes: 2 << 30), elapsed: 2)
        #expect(bar == "[############            ]  50%  1.0 GiB / 2.0 GiB  512.0 MiB/s  ETA 0:02")
    }
}

/// The `multipart` executable, run as a user would, against servers on 127.0.0.1.
///
/// Not one test at a time, though a hundred starting at once keep the concurrency pool's two threads busy making
/// files and forms: a child process holds a socket of this process while it runs (Foundation's `Process`), and
/// run so, the command's tests overlapped the whole run, and the cancel storms' count of sockets with it.
@Suite struct CommandLineTests: Sendable {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    /// The built `multipart` executable, beside the test bundle.
    static let executable: URL = {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle.main.bundleURL.deletingLastPathComponent(),
            Bundle.main.bundleURL,
        ].map { $0.appendingPathComponent("multipart") }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[0]
    }()

    struct Run {
        var status: Int32
        var stdout: Data
        var stderr: String
        /// How long the process ran, from its start to its exit.
        var seconds: Double = 0
    }

    /// This process's environment, but for the user's state directory: `-C -` keeps its state in the test's own.
    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = directory.path("home").path
        environment["XDG_STATE_HOME"] = directory.path("state").path
        return environment
    }

    /// Runs `command` in a shell (for `ulimit` and pseudo-terminals) or `multipart` with `arguments`.
    func run(_ arguments: [String], shell: String? = nil) async throws -> Run {
        let process = Process()
        if let shell {
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = ["-c", shell]
        } else {
            process.executableURL = Self.executable
            process.arguments = arguments
        }
        let stdoutURL = directory.path("stdout-\(UUID().uuidString)")
        let stderrURL = directory.path("stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: stdoutURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: stdoutURL)
        process.standardError = try FileHandle(forWritingTo: stderrURL)
        process.currentDirectoryURL = directory.url
        process.environment = environment
        let seconds = try await process.runToExit()
        return Run(
            status: process.terminationStatus, stdout: try Data(contentsOf: stdoutURL),
            stderr: try String(contentsOf: stderrURL, encoding: .utf8), seconds: seconds)
    }

    /// What the Node server's `/echo` answers.
    struct Echo: Decodable {
        var contentType: String
        var body: Data
    }

    @Test func threePartsAreByteForByteWhatCurlSends() async throws {
        _ = try directory.file("cat.jpg", contents: Data("JPEG bytes".utf8))
        _ = try directory.file("a.pdf", contents: Data("%PDF-1.7".utf8))
        _ = try directory.file("notes.txt", contents: Data("line one\nline two\n".utf8))
        let fields = [
            "-F", "title=Holiday", "-F", "photo=@cat.jpg", "-F", "doc=@a.pdf;type=application/pdf;filename=b.pdf",
            "-F", "note=<notes.txt",
        ]
        let server = try await UploadServer()
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        curl.arguments = ["curl", "-s", "-o", "curl.json"] + fields + [server.url("/echo").absoluteString]
        curl.currentDirectoryURL = directory.url
        try await curl.runToExit()
        let curlEcho = try JSONDecoder().decode(Echo.self, from: Data(contentsOf: directory.path("curl.json")))
        let boundary = try #require(curlEcho.contentType.components(separatedBy: "boundary=").last)

        let ours = try await run(
            fields + ["--boundary", boundary, "-s", "-o", "ours.json", server.url("/echo").absoluteString])
        #expect(ours.status == 0, "\(ours.stderr)")
        let ourEcho = try JSONDecoder().decode(Echo.self, from: Data(contentsOf: directory.path("ours.json")))
        #expect(ourEcho.contentType == curlEcho.contentType)
        #expect(ourEcho.body == curlEcho.body, "\(String(decoding: ourEcho.body, as: UTF8.self))")
    }

    @Test func withoutAURLTheBodyIsWrittenAndParsesWithThePeers() async throws {
        _ = try directory.file("data.csv", contents: Data("a,b\n1,2\n".utf8))
        let result = try await run(["-F", "name=Ada", "-F", "sheet=@data.csv", "-o", "body.multipart"])
        #expect(result.status == 0, "\(result.stderr)")
        let contentType = try #require(
            result.stderr.split(separator: "\n").first { $0.hasPrefix("Content-Type: ") }?.dropFirst(14))
        let body = try Data(contentsOf: directory.path("body.multipart"))
        #expect(result.stderr.contains("Content-Length: \(body.count)"))
        let sent = [
            FormPart(name: "name", body: Data("Ada".utf8)),
            // Typed as curl types it: .csv is not in its table.
            FormPart(
                name: "sheet", fileName: "data.csv", contentType: "application/octet-stream",
                body: Data("a,b\n1,2\n".utf8)),
        ]
        for peer in Peer.allCases {
            #expect(try peer.parse(body, contentType: String(contentType)) == sent.map { $0.seen(by: peer) })
        }
        // `-` is standard output.
        let piped = try await run(["-F", "name=Ada", "--output-body", "-", "--boundary", "B0undary"])
        #expect(String(decoding: piped.stdout, as: UTF8.self).hasPrefix("--B0undary\r\nContent-Disposition"))
    }

    @Test func outputNeverRemovesWhatTheCommandDidNotCreate() async throws {
        let kept = Data("keep me".utf8)
        try FileManager.default.createDirectory(at: directory.path("d"), withIntermediateDirectories: false)
        _ = try directory.file("d/keep", contents: kept)
        _ = try directory.file("in", contents: kept)
        for arguments in [
            ["-F", "a=b", "-o", "d"], ["-F", "a=b", "-o", "."], ["-F", "a=b", "--output-body", "d"],
            ["-F", "x=@in", "-o", "in"], ["-F", "x=<in", "--output-body", "in"],
        ] {
            let result = try await run(arguments)
            #expect(result.status == 3, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("is a directory") || result.stderr.contains("an input of the form"))
        }
        #expect(try Data(contentsOf: directory.path("d/keep")) == kept)
        #expect(try Data(contentsOf: directory.path("in")) == kept)

        // A device is written into, not replaced.
        #expect(try await run(["-F", "a=b", "-o", "/dev/null"]).status == 0)
        let null = try FileManager.default.attributesOfItem(atPath: "/dev/null")
        #expect(null[.type] as? FileAttributeType == .typeCharacterSpecial)

        // A file is replaced whole, through a link to it; the link stays a link.
        _ = try directory.file("old.multipart", contents: kept)
        try FileManager.default.createSymbolicLink(
            at: directory.path("link.multipart"), withDestinationURL: directory.path("old.multipart"))
        let replaced = try await run(["-F", "a=b", "-o", "link.multipart"])
        #expect(replaced.status == 0, "\(replaced.stderr)")
        let body = try Data(contentsOf: directory.path("old.multipart"))
        #expect(replaced.stderr.contains("Content-Length: \(body.count)"))
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: directory.path("link.multipart").path)
                == directory.path("old.multipart").path)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.url.path)
            .filter { $0.contains(".multipart-") }
        #expect(leftovers.isEmpty, "no temporary file left behind")
    }

    @Test func theMethodAskedForIsSent() async throws {
        let server = try await UploadServer()
        for method in ["PUT", "PATCH", "POST"] {
            let result = try await run(["-X", method, "-F", "a=b", "-s", server.url().absoluteString])
            #expect(result.status == 0, "\(result.stderr)")
            let seen = try server.seen(in: result.stdout)
            #expect(seen.method == method)
            #expect(seen.parts?.count == 1)
        }
        // Never a POST that was not asked for: URLSession sends no body with GET.
        let get = try await run(["-X", "GET", "-F", "a=b", server.url().absoluteString])
        #expect(get.status == 2)
        #expect(get.stderr.contains("URLSession sends no body with GET"))
        #expect(try await server.log().count == 3, "nothing was sent for the GET")
    }

    @Test func aFileWhoseNameIsNotUTF8IsFound() async throws {
        // caf\xE9.txt: Latin-1, not UTF-8; made and named through bash, which passes the byte as it is.
        let result = try await run(
            [],
            shell: "printf 'latin' > $'caf\\xe9.txt' && \(Self.executable.path) -F $'f=@caf\\xe9.txt' -o out.multipart")
        #expect(result.status == 0, "\(result.stderr)")
        let body = try Data(contentsOf: directory.path("out.multipart"))
        #expect(body.range(of: Data("\r\n\r\nlatin\r\n".utf8)) != nil, "the file's bytes are in the body")
    }

    @Test func aMissingFileExits3BeforeAnyByteIsSent() async throws {
        let server = try await UploadServer()
        let result = try await run(["-F", "a=1", "-F", "f=@missing.bin", server.url().absoluteString])
        #expect(result.status == 3)
        #expect(result.stderr.contains("missing.bin"))
        #expect(try await server.log().isEmpty)
    }

    @Test func aServerErrorExits4WithTheStatusAndTheBody() async throws {
        let server = try await UploadServer()
        let result = try await run(["-sS", "-F", "a=1", server.url("/status/500").absoluteString])
        #expect(result.status == 4)
        #expect(result.stderr.contains("HTTP 500"))
        #expect(result.stderr.contains("the server says no"))
    }

    @Test func aRefusedConnectionExits4() async throws {
        let result = try await run(["-s", "-F", "a=1", "http://127.0.0.1:1/"])
        #expect(result.status == 4)
    }

    @Test func anUploadPrintsTheResponseAndASummary() async throws {
        _ = try directory.file("big.bin", contents: Data(count: 1 << 20))
        let server = try await UploadServer()
        let result = try await run([
            "-F", "a=1", "-F", "f=@big.bin", "-H", "X-Note: hi", "-v", server.url().absoluteString,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let seen = try server.seen(in: result.stdout)
        #expect(seen.parts?.map(\.name) == ["a", "f"])
        #expect(result.stderr.contains("> X-Note: hi"))
        #expect(result.stderr.contains("< HTTP 200"))
        #expect(result.stderr.contains("multipart: sent 1.0 MiB"))
        #expect(result.stderr.contains("HTTP 200"))
        #expect(!result.stderr.contains("\r"), "no bar when stderr is not a terminal")
    }

    @Test func helpDocumentsEveryOptionWithAnExample() async throws {
        let result = try await run(["--help"])
        #expect(result.status == 0)
        let text = String(decoding: result.stdout, as: UTF8.self)
        for option in [
            "-F", "-H", "-X", "--boundary", "--strategy", "--limit-rate", "-o", "--output-body", "-s", "-v", "e.g.",
            "Exit status", "--form-string", "headers=", "@-", "-u", "-A", "-i", "-w", "%{http_code}", "%{time_total}",
            "%{size_upload}", "%{speed_upload}", "%{url_effective}", "-L", "--max-time", "--connect-timeout",
            "--retry", "--retry-delay", "-S", "--", "-k", "temporary file",
        ] {
            #expect(text.contains(option), "\(option)")
        }
    }

    /// As curl 7.88: exit 2, nothing sent, and its words; this command sent `Content-Type: ` empty before.
    @Test func anEmptyTypeIsRefusedAsCurlRefusesIt() async throws {
        _ = try directory.file("f.txt", contents: Data("x".utf8))
        let ours = try await run(["-F", "a=@f.txt;type=", "-o", "-"])
        let curl = try await run([], shell: "curl -F 'a=@f.txt;type=' http://127.0.0.1:9/")
        #expect(ours.status == 2 && curl.status == 2, "\(ours.stderr) / \(curl.stderr)")
        #expect(ours.stdout.isEmpty)
        #expect(ours.stderr.contains("Illegally formatted content-type field!"), "\(ours.stderr)")
        #expect(curl.stderr.contains("Illegally formatted content-type field!"), "\(curl.stderr)")
    }

    @Test func aUsageErrorExits2WithTheMessageAndAUsageLine() async throws {
        let result = try await run(["-F", "novalue", "-o", "-"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("expected name=value"))
        #expect(result.stderr.contains("usage: multipart"))
    }

    /// curl's `--retry` sends a request again after a 503; with `-C -` that would create the upload anew and send
    /// the whole form again, to an application that already processed it.
    @Test func dashCDashNeverStartsTheFormOverAfterTheApplicationsServerError() async throws {
        let server = try await DraftServer()
        _ = try directory.file("a.txt", contents: Data("resumable".utf8))
        let result = try await run([
            "-sS", "-C", "-", "--retry", "2", "-F", "f=@a.txt", "-o", "/dev/null",
            server.url(scenario: "complete-503").absoluteString,
        ])
        #expect(result.stderr.contains("answered HTTP 503"), "\(result.stderr)")
        #expect(!result.stderr.contains("retrying"), "\(result.stderr)")
        #expect(try server.log().filter { $0.method == "POST" }.count == 1, "created once")
        #expect(try server.forms().count == 1, "processed once")
    }

    /// Linux only: util-linux's `script` gives the command its pseudo-terminal.
    @Test(.enabled(if: isLinux)) func theProgressBarRendersInATerminal() async throws {
        _ = try directory.file("big.bin", contents: Data(count: 2 << 20))
        let server = try await UploadServer()
        // `script` gives the command a pseudo-terminal and copies what it shows into typescript.
        let command =
            "\(Self.executable.path) -F f=@big.bin --limit-rate 4M -o /dev/null \(server.url().absoluteString)"
        let result = try await run([], shell: "script -qfec '\(command)' typescript > /dev/null")
        #expect(result.status == 0, "\(result.stderr)")
        let screen = try String(contentsOf: directory.path("typescript"), encoding: .utf8)
        let frames = screen.components(separatedBy: "\r[").dropFirst()
        #expect(frames.count >= 3, "\(screen)")
        #expect(frames.count <= 15, "at most 10 redraws a second")
        #expect(screen.contains("100%  2.0 MiB / 2.0 MiB"))
        #expect(screen.contains("ETA"))
        #expect(screen.contains("multipart: sent 2.0 MiB"))
        // Each redraw erases what the last one left beyond it, so no stale `ETA` outlives the bar.
        #expect(frames.allSatisfy { $0.contains("\u{1B}[K") }, "\(frames.map(\.debugDescription))")
    }

    @Test func fiveThousandFilesUploadWithSixtyFourDescriptors() async throws {
        var arguments: [String] = []
        for index in 0..<5_000 {
            _ = try directory.file("f\(index).txt", contents: Data("file \(index)\n".utf8))
            arguments += ["-F", "f\(index)=@f\(index).txt"]
        }
        try Data(arguments.joined(separator: " ").utf8).write(to: directory.path("args"))
        let result = try await run([], shell: "ulimit -n 64 && \(Self.executable.path) $(cat args) -o body.multipart")
        #expect(result.status == 0, "\(result.stderr)")
        let body = try Data(contentsOf: directory.path("body.multipart"))
        let parts = try Peer.node.parse(
            body, contentType: String(result.stderr.split(separator: "\n").first!.dropFirst(14)))
        #expect(parts.count == 5_000)
        #expect(parts.last?.body == Data("file 4999\n".utf8))
    }
}
