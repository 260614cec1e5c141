import Foundation
import MultipartStreamTestSupport
import Testing

/// What each option of `--help` does with `--queue DIR`: applied to a run or to an add, or refused by name; and the
/// run's own options at work: `--limit-rate` for the whole queue measured at the link, `-v`, `-w`, `--max-time` and
/// `--speed-limit`.
extension CommandLineTests {
    /// The options a run applies, and those an add keeps, as the docs say; every other is refused by name.
    static let appliedToRun: Set<String> = [
        "--header", "--user", "--user-agent", "--silent", "--show-error", "--verbose", "--write-out", "--max-time",
        "--speed-limit", "--speed-time", "--limit-rate", "--fail", "--fail-with-body", "--parallel",
        "--single-request-limit",
    ]
    static let appliedToAdd: Set<String> = [
        "--form", "--form-string", "--header", "--user-agent", "--request", "--boundary", "--key", "--again",
        "--silent", "--show-error",
    ]
    /// A value for each option of `--help` that takes one.
    static let optionValues: [String: String] = [
        "--form": "b=2", "--form-string": "b=2", "--header": "X-Tag: 1", "--request": "PUT", "--boundary": "bound",
        "--strategy": "stream", "--limit-rate": "1M", "--output": "out.bin", "--output-body": "body.bin",
        "--user": "ada:secret", "--user-agent": "agent/1", "--write-out": "%{http_code}", "--max-time": "30",
        "--connect-timeout": "5", "--retry-delay": "1", "--retry-max-time": "10", "--continue-at": "-",
        "--state-dir": "state", "--speed-limit": "1", "--speed-time": "30", "--parallel": "2", "--key": "k",
        "--single-request-limit": "256K",
    ]

    /// Every long option `--help` lists (the modes' own aside: `--queue`, `--run`, the look-and-steer options, and
    /// help and version, which print and exit) goes through `--queue DIR --run` and through an add: each either
    /// runs (exit 0) where the docs say it applies, or is refused with exit 2 and its name. One that neither
    /// applies nor is refused fails the test.
    @Test func everyOptionOfHelpAppliesToAQueueOrIsRefusedByName() async throws {
        let help = String(decoding: try await run(["--help"]).stdout, as: UTF8.self)
        // The option column of each line that starts with a dash.
        let options = Set(
            help.split(separator: "\n").filter { $0.hasPrefix("  -") }.flatMap { line in
                line.prefix(47).split(whereSeparator: { " ,".contains($0) }).filter { $0.hasPrefix("--") }.map(
                    String.init)
            })
        let modes: Set<String> = [
            "--queue", "--run", "--list", "--retry", "--remove", "--remove-completed", "--pause", "--resume",
            "--prioritize", "--help", "--version",
        ]
        #expect(options.count > 40, "\(options.sorted())")
        // Apart: what the adds add is never run.
        let (runs, adds) = (directory.path("runs").path, directory.path("adds").path)
        var ignored: [String] = []
        for option in options.subtracting(modes).sorted() {
            let given = [option] + (Self.optionValues[option].map { [$0] } ?? [])
            for (mode, applied, arguments) in [
                ("run", Self.appliedToRun, ["--queue", runs, "--run"]),
                ("add", Self.appliedToAdd, ["--queue", adds, "-F", "a=1", "http://127.0.0.1:1/"]),
            ] {
                let result = try await run(arguments + given)
                #expect(!result.stderr.contains("needs a value"), "\(option): no value in the test's table")
                if applied.contains(option) {
                    #expect(result.status == 0, "\(option) with \(mode): \(result.stderr)")
                } else if result.status != 2 || !result.stderr.contains(option) {
                    ignored.append("\(option) with \(mode): exit \(result.status), \(result.stderr)")
                }
            }
        }
        #expect(ignored.isEmpty, "neither applied nor refused:\n\(ignored.joined(separator: "\n"))")
    }

    /// `--limit-rate` with `--run` is one rate for the whole queue, measured at the link (a proxy that counts the
    /// bytes it passes each tenth of a second): with 1, 3 and 8 uploads in flight, no 5 s carry more than 5 % over
    /// the rate, and the queue keeps to at least 80 % of it (where the test runs alone, `measuredAlone`), every form
    /// whole on the server. Beside other suites a stall of the proxy, which counts the bytes as it forwards them,
    /// bunches what waited into one window: there no 5 s carry more than half as much again, which a run that does
    /// not keep one rate for all its uploads (3 or 8 times it), or no rate at all, still fails.
    @Test(.tags(.measuredAlone), arguments: [1, 3, 8])
    func aRunsLimitRateHoldsForTheWholeQueueAtTheLink(inFlight: Int) async throws {
        let server = try await DraftServer()
        let proxy = try await FaultProxy(to: server.port, cuts: [])
        let queue = directory.path("queue").path
        let rate = 1 << 20
        var expected: [DraftServer.Form] = []
        // 8 MiB in all: 8 s at the rate.
        for index in 0..<8 {
            let file = directory.path("f-\(index).bin")
            _ = FileManager.default.createFile(atPath: file.path, contents: nil)
            #expect(truncate(file.path, off_t(1 << 20)) == 0)
            // Every request through the proxy: the upload resource's Location is relative.
            expected.append(
                try await enqueue(index, to: proxy.url(server.url(scenario: "relative-location")), queue: queue).form)
        }
        let result = try await run([
            "--queue", queue, "--run", "-sS", "--parallel", "\(inFlight)", "--limit-rate", "1M",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let seen = try proxy.stop()
        #expect(try server.forms().sorted { $0.sha256 < $1.sha256 } == expected.sorted { $0.sha256 < $1.sha256 })
        let (most, span) = seen.mostForwarded(inAny: 5)
        let over = Double(most) / Double(5 * rate)
        let average = Double(seen.forwarded) / span / Double(rate)
        print(
            "--limit-rate 1M, \(inFlight) in flight: the most in 5 s \(most) B (\(over) of the rate), \(average) on average"
        )
        let allowed = LongRuns.alone ? 1.05 : 1.5
        #expect(over <= allowed, "\(inFlight) in flight: \(most) bytes in 5 s, \(over) of the rate")
        // Beside other suites, late wake-ups of the pacing can only slow the run: half the rate there, which a run
        // that waits twice as long as the rate asks still fails.
        let least = LongRuns.alone ? 0.8 : 0.5
        #expect(average >= least, "\(inFlight) in flight: \(average) of the rate on average")
        #expect(try server.mostInFlight() <= inFlight)
    }

    /// A run's `-v` says each request and answer of each upload, named by the upload, the whole form's to a server
    /// that speaks no draft too; `-w` writes one line for each upload the run ends, with its status, the bytes it sent
    /// and its URL, without the password of `-u`.
    @Test func aRunsVerboseAndWriteOutSayEachUpload() async throws {
        let server = try await DraftServer()
        let plain = try await UploadServer()
        let queue = directory.path("queue").path
        var added: [(id: String, form: DraftServer.Form)] = []
        for index in 0..<2 {
            _ = try directory.file("f-\(index).bin", contents: Data(repeating: UInt8(index), count: 100_000))
            added.append(try await enqueue(index, to: server.url(), queue: queue))
        }
        _ = try directory.file("f-2.bin", contents: Data(repeating: 2, count: 100_000))
        let whole = try await enqueue(2, to: plain.url("/upload"), queue: queue)
        let result = try await run([
            "--queue", queue, "--run", "-v", "-u", "ada:s3cret", "-w",
            "%{http_code} %{size_upload} %{url_effective}\\n",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = String(decoding: result.stdout, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 3, "\(lines)")
        #expect(result.stderr.contains("> POST \(plain.url("/upload").absoluteString) (upload \(whole.id))"))
        #expect(result.stderr.contains("> Content-Length: \(whole.form.bytes)"), "\(result.stderr)")
        #expect(result.stderr.contains("< HTTP 200 (upload \(whole.id))"), "\(result.stderr)")
        #expect(lines.contains { $0.hasPrefix("200 \(whole.form.bytes) ") }, "\(lines)")
        for (id, form) in added {
            // 100 kB: the whole form in its creation, said complete.
            #expect(result.stderr.contains("> POST \(server.url().absoluteString) (upload \(id))"), "\(result.stderr)")
            #expect(result.stderr.contains("> Upload-Complete: ?1"), "\(result.stderr)")
            #expect(result.stderr.contains("< HTTP 200 (upload \(id))"), "\(result.stderr)")
            let line = try #require(lines.first { $0.hasSuffix(server.url().absoluteString) })
            let fields = line.split(separator: " ")
            #expect(fields[0] == "200" && (Int(fields[1]) ?? 0) >= form.bytes, "\(line)")
        }
        #expect(!result.stderr.contains("s3cret") && !result.stderr.contains("YWRhOnMzY3JldA"), "\(result.stderr)")
    }

    /// `--max-time` bounds a run as a whole: it stops in time, exits 4 saying so, and keeps what it did not
    /// complete; the next run sends each form once.
    @Test func aRunsMaxTimeBoundsTheRunAndKeepsTheRest() async throws {
        let server = try await DraftServer()
        let queue = directory.path("queue").path
        var expected: [DraftServer.Form] = []
        for index in 0..<3 {
            let file = directory.path("f-\(index).bin")
            _ = FileManager.default.createFile(atPath: file.path, contents: nil)
            #expect(truncate(file.path, off_t(8 << 20)) == 0)
            // 10 MB/s shared by the server's uploads: 2.5 s at least for the three.
            expected.append(try await enqueue(index, to: server.url(scenario: "paced"), queue: queue).form)
        }
        let stopped = try await run(["--queue", queue, "--run", "--max-time", "0.5"])
        #expect(stopped.status == 4, "\(stopped.stderr)")
        #expect(stopped.stderr.contains("timed out after 0.5 s (--max-time)"), "\(stopped.stderr)")
        #expect(stopped.stderr.contains("kept for the next --run"), "\(stopped.stderr)")
        #expect(stopped.seconds < 10, "\(stopped.seconds) s")
        #expect(try server.forms().count < 3)
        let rest = try await run(["--queue", queue, "--run", "-s"])
        #expect(rest.status == 0, "\(rest.stderr)")
        #expect(try server.forms().sorted { $0.sha256 < $1.sha256 } == expected.sorted { $0.sha256 < $1.sha256 })
    }

    /// `--speed-limit` and `--speed-time` are each upload's stall rule in a run: a connection that stops taking the
    /// body (a proxy that holds it for 120 s) is given up after 2 s, not the 30 s of the default rule, and the upload
    /// resumes and completes.
    @Test func aRunsSpeedLimitIsEachUploadsStallRule() async throws {
        let server = try await DraftServer()
        let proxy = try await FaultProxy(to: server.port, cuts: ["stall:256K"])
        let queue = directory.path("queue").path
        // More than the sockets' buffers hold, so that the body stops being handed out at the stall.
        let file = directory.path("f-0.bin")
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        #expect(truncate(file.path, off_t(32 << 20)) == 0)
        let added = try await enqueue(0, to: proxy.url(server.url(scenario: "relative-location")), queue: queue)
        let result = try await run(["--queue", queue, "--run", "-sS", "--speed-limit", "1000", "--speed-time", "2"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.seconds < 25, "the stall was given up after \(result.seconds) s")
        #expect(try server.forms() == [added.form])
        #expect(try proxy.stop().stalls == 1)
    }
}
