import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartCLI
@testable import MultipartForm
@testable import MultipartStream

/// What a curl user does in the first hour: the bar in any terminal, `-H` that removes or empties a header, `-w
/// @file`, `-o` on an error, `--version`, a home left as it was, `-v` showing what went out, and parts typed as curl
/// types them.
extension CommandLineTests {
    /// What the server's `/raw-headers` saw.
    struct RawHeaders: Decodable {
        var requestLine: String
        var headers: [[String]]

        /// The values of `name`, in order, whatever its case.
        func values(_ name: String) -> [String] {
            headers.filter { $0[0].lowercased() == name.lowercased() }.map { $0[1] }
        }
    }

    private func rawHeaders(_ arguments: [String]) async throws -> (RawHeaders, Run) {
        let server = try await UploadServer()
        let result = try await run(
            ["-s", "-F", "a=1", "-o", "headers.json"] + arguments + [server.url("/raw-headers").absoluteString])
        #expect(result.status == 0, "\(result.stderr)")
        let data = try Data(contentsOf: directory.path("headers.json"))
        return (try JSONDecoder().decode(RawHeaders.self, from: data), result)
    }

    // MARK: Headers

    @Test func aHeaderWithNothingAfterItsColonIsLeftOutAndOneWithASemicolonIsSentEmpty() async throws {
        let (seen, _) = try await rawHeaders(["-H", "Accept:", "-H", "User-Agent:", "-H", "X-Empty;", "-H", "X-Tag: v"])
        #expect(seen.values("Accept").isEmpty && seen.values("User-Agent").isEmpty, "\(seen.headers)")
        #expect(seen.values("X-Empty") == [""], "\(seen.headers)")
        #expect(seen.values("X-Tag") == ["v"])
        #expect(seen.values("Expect").isEmpty)
    }

    @Test func theRequestCarriesWhatCurlsDoesAndNothingElse() async throws {
        let (seen, _) = try await rawHeaders([])
        let names = Set(seen.headers.map { $0[0].lowercased() })
        #expect(names == ["host", "user-agent", "accept", "content-length", "content-type"], "\(seen.headers)")
        #expect(seen.values("User-Agent") == ["multipart/\(Version.current)"])
        #expect(seen.values("Accept") == ["*/*"])
    }

    @Test func verboseShowsTheRequestLineAndEveryHeaderAsTheyWentOut() async throws {
        let server = try await UploadServer()
        let url = server.url("/raw-headers")
        let result = try await run([
            "-v", "-F", "a=1", "-H", "X-Tag: v", "-H", "Accept:", "-o", "headers.json", url.absoluteString,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let seen = try JSONDecoder().decode(RawHeaders.self, from: Data(contentsOf: directory.path("headers.json")))
        let shown = result.stderr.split(separator: "\n").filter { $0.hasPrefix("> ") }.map { String($0.dropFirst(2)) }
        #expect(shown.first == seen.requestLine, "\(shown)")
        let sent = seen.headers.map { "\($0[0]): \($0[1])" }
        #expect(Set(shown.dropFirst()) == Set(sent), "shown \(shown), sent \(sent)")
    }

    @Test func verboseShowsARedirectAndTheRequestItSends() async throws {
        let server = try await UploadServer()
        let result = try await run([
            "-v", "-L", "-F", "a=1", "-o", "headers.json", server.url("/redirect/307?to=/raw-headers").absoluteString,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let seen = try JSONDecoder().decode(RawHeaders.self, from: Data(contentsOf: directory.path("headers.json")))
        let lines = result.stderr.split(separator: "\n").map(String.init)
        let requestLines = lines.filter { $0.hasPrefix("> POST ") }
        #expect(requestLines == ["> POST /redirect/307?to=/raw-headers HTTP/1.1", "> \(seen.requestLine)"], "\(lines)")
        #expect(lines.contains("< HTTP 307") && lines.contains("< Location: /raw-headers"), "\(lines)")
        let afterRedirect = lines.drop { $0 != "> \(seen.requestLine)" }.filter { $0.hasPrefix("> ") }.dropFirst()
        #expect(Set(afterRedirect.map { String($0.dropFirst(2)) }) == Set(seen.headers.map { "\($0[0]): \($0[1])" }))
    }

    // MARK: Output

    @Test func writeOutReadsItsFormatFromAFileOrStandardInput() async throws {
        let server = try await UploadServer()
        _ = try directory.file("format.txt", contents: Data("code=%{http_code}\\n".utf8))
        let fromFile = try await run([
            "-s", "-F", "a=1", "-o", "/dev/null", "-w", "@format.txt", server.url().absoluteString,
        ])
        #expect(fromFile.status == 0 && String(decoding: fromFile.stdout, as: UTF8.self) == "code=200\n")
        let fromInput = try await run(
            [],
            shell: "printf 'in=%%{http_code}' | \(Self.executable.path) -s -F a=1 -o /dev/null -w @- \(server.url())")
        #expect(fromInput.status == 0 && String(decoding: fromInput.stdout, as: UTF8.self) == "in=200")
        let missing = try await run(["-F", "a=1", "-o", "/dev/null", "-w", "@nope.txt", server.url().absoluteString])
        #expect(missing.status == 0 && missing.stdout.isEmpty, "as curl: a warning, and nothing written")
        #expect(missing.stderr.contains("warning: -w @nope.txt: cannot read nope.txt"), "\(missing.stderr)")
    }

    @Test func anErrorStatusStillWritesTheBodyToTheOutputFile() async throws {
        let server = try await UploadServer()
        let result = try await run(["-sS", "-F", "a=1", "-o", "r500.txt", server.url("/status/500").absoluteString])
        #expect(result.status == 4, "\(result.stderr)")
        #expect(
            try String(contentsOf: directory.path("r500.txt"), encoding: .utf8) == "the server says no\nsecond line\n")
        #expect(result.stderr.contains("answered HTTP 500"))
    }

    /// curl's `-f`, `--fail` and `--fail-with-body`, in a curl user's script: accepted, and the command does what it
    /// always does on HTTP 400 and above (exit 4, the status said, the body still written to `-o`).
    @Test(arguments: ["-f", "--fail", "--fail-with-body", "-fsS"])
    func curlsFailFlagsAreWhatTheCommandAlwaysDoes(flag: String) async throws {
        let server = try await UploadServer()
        let output = "fail\(flag).txt"
        let result = try await run(["-sS", flag, "-F", "a=1", "-o", output, server.url("/status/500").absoluteString])
        #expect(result.status == 4, "\(result.stderr)")
        #expect(try String(contentsOf: directory.path(output), encoding: .utf8) == "the server says no\nsecond line\n")
        #expect(result.stderr.contains("answered HTTP 500"), "\(result.stderr)")
        let success = try await run([flag, "-sS", "-F", "a=1", "-o", "/dev/null", server.url().absoluteString])
        #expect(success.status == 0, "\(success.stderr)")
    }

    @Test func versionSaysWhatItIs() async throws {
        for flag in ["--version", "-V"] {
            let result = try await run([flag])
            let text = String(decoding: result.stdout, as: UTF8.self)
            #expect(result.status == 0 && text.hasPrefix("multipart \(Version.current) ("), "\(text)")
        }
    }

    @Test func anUploadLeavesTheHomeDirectoryAsItWas() async throws {
        let server = try await UploadServer()
        let home = directory.path("home")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let result = try await run(
            [],
            shell:
                "env -u XDG_CACHE_HOME -u XDG_DATA_HOME \(Self.executable.path) -s -F a=1 -o /dev/null \(server.url())")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: home.path).isEmpty)
        // What was there before stays, even an empty directory of Foundation's own.
        let cache = home.appendingPathComponent(".cache/org.swift.foundation.URLCache")
        try FileManager.default.createDirectory(at: cache, withIntermediateDirectories: true)
        _ = try await run(
            [],
            shell:
                "env -u XDG_CACHE_HOME -u XDG_DATA_HOME \(Self.executable.path) -s -F a=1 -o /dev/null \(server.url())")
        #expect(FileManager.default.fileExists(atPath: cache.path))
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: home.appendingPathComponent(".cache").path) == [
                "org.swift.foundation.URLCache"
            ])
    }

    // MARK: Small things

    @Test func interruptedIsSaidAsSuch() async throws {
        let server = try await UploadServer()
        _ = try directory.file("big.bin", contents: Data(count: 4_000_000))
        let result = try await run(
            [],
            shell: "\(Self.executable.path) -C - --limit-rate 500K -F f=@big.bin -o /dev/null \(server.url()) & "
                + "sleep 1; kill -INT $!; wait $!")
        #expect(result.status == 130, "\(result.stderr)")
        #expect(result.stderr.contains(", interrupted"), "\(result.stderr)")
        #expect(!result.stderr.contains(", failed"))
    }

    @Test func aMissingFileIsSaidAlikeForAtAndLessThan() async throws {
        let at = try await run(["-F", "f=@nope.bin", "-o", "-"])
        let lessThan = try await run(["-F", "f=<nope.txt", "-o", "-"])
        #expect(at.status == 3 && lessThan.status == 3)
        #expect(at.stderr.hasPrefix("multipart: -F f=@nope.bin: no file at /"), "\(at.stderr)")
        #expect(lessThan.stderr.hasPrefix("multipart: -F f=<nope.txt: no file at /"), "\(lessThan.stderr)")
    }

    @Test func aURLWithoutFieldsIsAUsageError() async throws {
        let server = try await UploadServer()
        let result = try await run([server.url().absoluteString])
        #expect(result.status == 2 && result.stderr.contains("no -F: nothing to upload"), "\(result.stderr)")
        #expect(try await server.log().isEmpty)
    }

    // MARK: Parts typed as curl types them

    /// Every extension the library's table knows, and curl's own, in upper case too: one form through curl and
    /// through the command with curl's boundary, byte for byte.
    @Test func everyFilePartIsTypedAsCurlTypesIt() async throws {
        let extensions = Array(MIMEType.byExtension.keys).sorted() + ["JPG", "Txt", "tar.gz", "unknownext"]
        var fields: [String] = []
        for (index, pathExtension) in extensions.enumerated() {
            _ = try directory.file("f\(index).\(pathExtension)", contents: Data("part \(index)\n".utf8))
            fields += ["-F", "p\(index)=@f\(index).\(pathExtension)"]
        }
        _ = try directory.file("input.bin", contents: Data("standard input\n".utf8))
        fields += ["-F", "stdin=@-"]
        let server = try await UploadServer()
        let quoted = fields.map { "'\($0)'" }.joined(separator: " ")
        let curl = try await run([], shell: "curl -s -o curl.json \(quoted) \(server.url("/echo")) < input.bin")
        #expect(curl.status == 0)
        let curlEcho = try JSONDecoder().decode(Echo.self, from: Data(contentsOf: directory.path("curl.json")))
        let boundary = try #require(curlEcho.contentType.components(separatedBy: "boundary=").last)
        let ours = try await run(
            [],
            shell:
                "\(Self.executable.path) -s --boundary \(boundary) -o ours.json \(quoted) \(server.url("/echo")) < input.bin"
        )
        #expect(ours.status == 0, "\(ours.stderr)")
        let ourEcho = try JSONDecoder().decode(Echo.self, from: Data(contentsOf: directory.path("ours.json")))
        #expect(ourEcho.contentType == curlEcho.contentType)
        if ourEcho.body != curlEcho.body {
            let curlLines = Set(String(decoding: curlEcho.body, as: UTF8.self).split(separator: "\r\n"))
            let ourLines = Set(String(decoding: ourEcho.body, as: UTF8.self).split(separator: "\r\n"))
            Issue.record(
                "curl only: \(curlLines.subtracting(ourLines).sorted()); ours only: \(ourLines.subtracting(curlLines).sorted())"
            )
        }
    }
}

/// The bar as a terminal shows it: every frame on one line, within the width, redrawn in place.
extension CommandLineTests {
    /// What `multipart --limit-rate 1M -F f=@clip.bin` (3,000,000 bytes) wrote to a pseudo-terminal of `size`
    /// columns (`COLUMNS[:RESIZED]`, see Peers/pty-run.py), standard output there too with `stdoutToo`, else sent
    /// to `/dev/null` with `-o`; without the erase sequence. Expects the command to succeed.
    private func terminalOutput(size: String, stdoutToo: Bool = false) async throws -> String {
        let server = try await UploadServer()
        _ = try directory.file("clip.bin", contents: Data(count: 3_000_000))
        let output = stdoutToo ? "" : "-o /dev/null "
        let result = try await run(
            [],
            shell: "python3 \(peerScript("pty-run.py").path) \(stdoutToo ? "--stdout-too " : "")\(size) "
                + "\(Self.executable.path) --limit-rate 1M -F f=@clip.bin \(output)\(server.url())")
        struct Captured: Decodable {
            var output: String
            var status: Int
        }
        let captured = try JSONDecoder().decode(Captured.self, from: result.stdout)
        #expect(captured.status == 0, "\(captured.output.suffix(300))")
        return captured.output.replacingOccurrences(of: "\u{1B}[K", with: "")
    }

    /// The frames the command drew on a pseudo-terminal of `columns` (resized to `resized` after its second frame),
    /// without the erase sequence, and the summary line after them.
    private func frames(columns: Int, resized: Int? = nil) async throws -> (frames: [String], summary: String) {
        let text = try await terminalOutput(size: resized.map { "\(columns):\($0)" } ?? String(columns))
        let lastNewline = try #require(text.lastIndex(of: "\n"))
        let drawn = text[..<lastNewline]
        let summary = drawn.split(separator: "\n").last.map(String.init) ?? ""
        let bar = drawn.split(separator: "\n").dropLast().joined(separator: "\n")
        #expect(!bar.contains("\n"), "every frame on the one line: \(bar.debugDescription)")
        return (bar.split(separator: "\r").map(String.init), summary)
    }

    @Test(arguments: [40, 50, 120])
    func theBarKeepsToOneLineOfTheTerminal(columns: Int) async throws {
        let (frames, summary) = try await frames(columns: columns)
        #expect(frames.count >= 5, "\(frames)")
        for frame in frames { #expect(frame.count < columns, "\(frame.debugDescription) in \(columns) columns") }
        let last = try #require(frames.last)
        #expect(last.contains("100%"), "the last frame complete: \(last)")
        if columns >= 80 { #expect(last.contains("ETA") && last.contains("/s") && last.hasPrefix("[")) }
        #expect(summary.hasPrefix("multipart: sent 2.9 MiB"), "\(summary)")
    }

    /// The answer, written to the terminal as it arrives, starts on a line of its own: the bar's line ends first,
    /// and no frame is drawn over the answer.
    @Test func theAnswerStartsOnALineOfItsOwn() async throws {
        let text = try await terminalOutput(size: "50", stdoutToo: true)
        let answerStart = try #require(text.range(of: "{\""), "no answer on the terminal: \(text.suffix(300))")
        let (before, answer) = (text[..<answerStart.lowerBound], text[answerStart.lowerBound...])
        #expect(before.contains("100%"), "the bar was drawn: \(before.suffix(300).debugDescription)")
        #expect(before.hasSuffix("\n"), "the bar's line ends before the answer: \(before.suffix(120).debugDescription)")
        #expect(!answer.contains("\r"), "no frame over the answer: \(answer.prefix(120).debugDescription)")
        let frames = before.split(separator: "\n").flatMap { $0.split(separator: "\r") }
        #expect(frames.allSatisfy { $0.count < 50 }, "\(frames.filter { $0.count >= 50 })")
    }

    @Test func theBarFollowsAResizedTerminal() async throws {
        let (frames, _) = try await frames(columns: 120, resized: 40)
        #expect(frames.prefix(2).contains { $0.count >= 40 }, "wide before: \(frames)")
        for frame in frames.dropFirst(3) { #expect(frame.count < 40, "\(frame.debugDescription)") }
    }
}

extension CommandLineParsingTests {
    @Test func curlsHeaderFormsParse() throws {
        let options = try Options(parsing: ["-F", "a=1", "-H", "Accept:", "-H", "X;", "-H", "Y:  ", "-o", "-"])
        #expect(
            options.headers == [
                .init(name: "Accept", value: nil), .init(name: "X", value: ""), .init(name: "Y", value: nil),
            ])
        #expect(try Options(parsing: ["-V"]).version)
    }

    @Test(arguments: [40, 50, 80, 120, 200])
    func theBarFitsEveryWidth(columns: Int) {
        for sent: UInt64 in [0, 1 << 20, 3 << 30] {
            let progress = MultipartUploadProgress(bytesSent: sent, totalBytes: 3 << 30)
            let bar = ProgressReporter.bar(progress, elapsed: 7, columns: columns)
            #expect(bar.count < columns && bar.contains("%"), "\(bar)")
        }
        let full = ProgressReporter.bar(
            MultipartUploadProgress(bytesSent: 1 << 30, totalBytes: 2 << 30), elapsed: 2, columns: columns)
        if columns >= 80 {
            #expect(
                full
                    == ProgressReporter.bar(
                        MultipartUploadProgress(bytesSent: 1 << 30, totalBytes: 2 << 30), elapsed: 2))
        }
    }
}
