import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

/// `multipart -C -` against servers that each speak one interop version of the draft (`Peers/draft-server.py`), as
/// a user types it: the version found, the draft's rules of that version, and what a saved upload keeps of it.
extension CommandLineTests {
    /// Reads the saved state `file`, changes it as the clock or a hand would, and writes it back sealed.
    private func changeSavedState(_ file: URL, _ change: (inout SavedUpload) throws -> Void) throws {
        var record = try SavedUpload.decoder.decode(SavedUpload.self, from: Data(contentsOf: file))
        try change(&record)
        try SavedUpload.encoder.encode(record.sealed()).write(to: file)
    }

    /// A 3 MB file, and the form `multipart` sends of it with `boundary`.
    private func blobForm(boundary: String, seed: UInt64) async throws -> (bytes: Int, sha256: String) {
        var generator = SeededGenerator(seed: seed)
        _ = try directory.file("blob.bin", contents: Data([UInt8].random(count: 3_000_000, using: &generator)))
        let body = try await run(["-s", "--boundary", boundary, "-F", "file=@blob.bin", "-o", "-"]).stdout
        let expected = try directory.file("expected-\(boundary).multipart", contents: body)
        return (body.count, try sha256sum(expected))
    }

    /// The state files `-C -` left in the test's state directory.
    func savedStates() -> [URL] {
        let states = directory.path("state/multipart")
        return ((try? FileManager.default.contentsOfDirectory(at: states, includingPropertiesForKeys: nil)) ?? [])
            .filter { $0.pathExtension == "json" }
    }

    /// A drop after half, against a server of each version: found by asking the newest first, then resumed in that
    /// version (HEAD, then the rest); the form arrives once and whole, never as a plain POST.
    @Test(arguments: [6, 7, 8, 9, 10])
    func eachVersionIsFoundAndADropIsResumedInIt(version: Int) async throws {
        let form = try await blobForm(boundary: "Version\(version)", seed: UInt64(version))
        let server = try await DraftServer(version: version)
        let result = try await run([
            "-s", "-C", "-", "--retry", "3", "--boundary", "Version\(version)", "-F", "file=@blob.bin", "-o",
            "answer.json", server.url(scenario: "head-503").absoluteString,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try server.forms() == [DraftServer.Form(bytes: form.bytes, sha256: form.sha256)])
        let log = try server.log()
        let probes = Array(repeating: "OPTIONS", count: 11 - version)
        #expect(log.map(\.method) == probes + ["POST", "PATCH", "HEAD", "HEAD", "PATCH"], "\(log)")
        #expect(log.prefix(probes.count).map(\.version) == (version...10).reversed().map { String($0) })
        #expect(log.dropFirst(probes.count).allSatisfy { $0.version == String(version) }, "\(log)")
        #expect(log.first { $0.method == "POST" }?.bytes == 0, "the creation carries none of the form")
        #expect(log.last?.offset == String(form.bytes / 2), "only the rest, from the server's offset")
        if version >= 8 {
            #expect(log.last?.interims == 1, "the 104 before the final answer was passed over")
        }
        #expect(savedStates().isEmpty)
    }

    /// The completing append drops after its last byte, unanswered, and the `HEAD` then says every byte but leaves
    /// `Upload-Complete` out: never a completion. Version 6, which may leave it out, completes the upload with an
    /// empty append saying `?1` and returns the application's answer; from version 7 it is a breach, and the saved
    /// upload is kept for a later run (nothing deleted), with the form never processed.
    @Test(arguments: [6, 7, 9])
    func everyByteWithoutUploadCompleteIsNoCompletion(version: Int) async throws {
        let form = try await blobForm(boundary: "NoWord", seed: 63)
        let server = try await DraftServer(version: version)
        let result = try await run([
            "-sS", "-C", "-", "--boundary", "NoWord", "-F", "file=@blob.bin", "-o", "answer.json",
            server.url(scenario: "drop-at-end-no-field").absoluteString,
        ])
        let log = try server.log()
        let patches = log.filter { $0.method == "PATCH" }
        if version == 6 {
            #expect(result.status == 0, "\(result.stderr)")
            #expect(try server.forms() == [DraftServer.Form(bytes: form.bytes, sha256: form.sha256)])
            #expect(patches.count == 2 && patches.last?.bytes == 0 && patches.last?.complete == "?1", "\(log)")
            let answer = try String(contentsOf: directory.path("answer.json"), encoding: .utf8)
            #expect(answer.contains(form.sha256), "the application's answer: \(answer)")
            #expect(savedStates().isEmpty)
        } else {
            #expect(result.status == 4, "\(result.stderr)")
            #expect(result.stderr.contains("without Upload-Complete"), "\(result.stderr)")
            #expect(try server.forms().isEmpty, "the application never got the form")
            #expect(patches.count == 1 && !log.contains { $0.method == "DELETE" }, "\(log)")
            #expect(savedStates().count == 1, "kept for a later run")
        }
    }

    /// A server that speaks 6 and 10, as the draft's editor's example middleware does: the first request is in 10,
    /// which it speaks, and a 64 MiB upload through two dropped connections completes byte-exact in 10, each resume
    /// asking the offset once.
    @Test(.longRun) func aServerThatSpeaks6And10IsSpokenTo10FromTheFirstRequest() async throws {
        var generator = SeededGenerator(seed: 610)
        try generator.writeFile(at: directory.path("blob.bin"), size: 64 << 20)
        let body = try await run(["-s", "--boundary", "SixAndTen", "-F", "file=@blob.bin", "-o", "expected.multipart"])
        #expect(body.status == 0)
        let expected = directory.path("expected.multipart")
        let bytes = try FileManager.default.attributesOfItem(atPath: expected.path)[.size] as? Int ?? 0
        let server = try await DraftServer(versions: [6, 10])
        let result = try await run([
            "-sS", "-C", "-", "--retry", "3", "--boundary", "SixAndTen", "-F", "file=@blob.bin", "-o", "answer.json",
            server.url(scenario: "drop-twice").absoluteString,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try server.forms() == [DraftServer.Form(bytes: bytes, sha256: try sha256sum(expected))])
        let log = try server.log()
        #expect(
            log.map(\.method) == ["OPTIONS", "POST", "PATCH", "HEAD", "PATCH", "HEAD", "PATCH"],
            "one OPTIONS, one HEAD a resume: \(log.map(\.method))")
        #expect(log.allSatisfy { $0.version == "10" }, "\(log.map(\.version))")
        #expect(savedStates().isEmpty)
    }

    /// Version 10: the application refuses the form early with `Upload-Complete: ?1`: after the first 100,000 bytes
    /// of the last append, closing the connection (`early-400`), or once a whole append sent with `?0` was read, on a
    /// connection kept alive (`refused-whole`). The command ends as for any refused status, `-o` holds that answer's
    /// body alone, and no request follows it.
    @Test(arguments: [
        ("early-400", "{\"error\": \"the application refused the form after its first part\"}\n"),
        ("refused-whole", "refused: sorry"),
    ])
    func anEarlyRefusalInVersion10IsTheAnswer(scenario: String, body: String) async throws {
        var generator = SeededGenerator(seed: 611)
        try generator.writeFile(at: directory.path("blob.bin"), size: 16 << 20)
        let server = try await DraftServer(version: 10)
        let result = try await run([
            "-sS", "-C", "-", "-F", "file=@blob.bin", "-o", "answer.json",
            server.url(scenario: scenario).absoluteString,
        ])
        #expect(result.status == 4 && result.stderr.contains("answered HTTP 400"), "\(result.stderr)")
        let answer = try String(contentsOf: directory.path("answer.json"), encoding: .utf8)
        #expect(answer == body, "\(scenario): \(answer)")
        #expect(try server.log().filter { $0.version == "10" }.map(\.method) == ["OPTIONS", "POST", "PATCH"])
        #expect(try server.forms().isEmpty)
        #expect(savedStates().isEmpty, "the application's word ends the upload")
    }

    /// The application's refusal with `?1`, whatever its status and whenever it comes (mid-body or after a whole
    /// append, in an append sent with `?0` or the last, on a connection kept alive or closed): `-o` holds its body,
    /// stderr names its status, exit 4, and nothing follows it.
    @Test(arguments: [
        "refuse-403-mid-keep", "refuse-409-whole-close", "refuse-413-mid-close-last", "refuse-500-whole-keep-last",
        "refuse-503-mid-close", "refuse-404-whole-keep",
    ])
    func theApplicationsRefusalReachesTheOutputWheneverItComes(scenario: String) async throws {
        let status = scenario.split(separator: "-")[1]
        var generator = SeededGenerator(seed: 612)
        // Over 1 MiB, so that the form is created first and the refusal comes in an append.
        try generator.writeFile(at: directory.path("blob.bin"), size: 1_100_000)
        let server = try await DraftServer(version: 10)
        let result = try await run([
            "-sS", "-C", "-", "-F", "file=@blob.bin", "-o", "answer.txt", server.url(scenario: scenario).absoluteString,
        ])
        #expect(result.status == 4 && result.stderr.contains("answered HTTP \(status)"), "\(result.stderr)")
        let answer = try String(contentsOf: directory.path("answer.txt"), encoding: .utf8)
        #expect(answer == "refused with \(status)", "\(scenario): \(answer)")
        #expect(try server.log().map(\.method) == ["OPTIONS", "POST", "PATCH"])
        #expect(try server.forms().isEmpty)
        #expect(savedStates().isEmpty, "the application's word ends the upload")
    }

    @Test func aServerThatSpeaksNoVersionGetsTheFormOncePlain() async throws {
        let form = try await blobForm(boundary: "NoVersion", seed: 5)
        let server = try await DraftServer(version: 5)
        let result = try await run([
            "-s", "-C", "-", "--boundary", "NoVersion", "-F", "file=@blob.bin", "-o", "answer.json",
            server.url().absoluteString,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let log = try server.log()
        #expect(log.map(\.method) == ["OPTIONS", "OPTIONS", "OPTIONS", "OPTIONS", "OPTIONS", "POST"], "\(log)")
        #expect(log.last?.bytes == form.bytes && log.last?.complete == nil, "the whole form, as a plain request")
        #expect(try server.forms() == [DraftServer.Form(bytes: form.bytes, sha256: form.sha256)])
    }

    /// The next run speaks the version the upload was made in, without asking again. Saved `savedSecondsAgo`, as the
    /// clock would have it (set in the record, since a slow run here can outlast a minute by itself): within the
    /// minute in which the server may still be taking what the run before had in flight, it is asked until its offset
    /// stops growing; past it, once.
    @Test(arguments: [0.0, 120.0])
    func aSavedUploadIsResumedInTheVersionItWasMadeIn(savedSecondsAgo: Double) async throws {
        let form = try await blobForm(boundary: "SavedSeven", seed: 7)
        let server = try await DraftServer(version: 7)
        let arguments = [
            "-S", "-C", "-", "--retry", "0", "--boundary", "SavedSeven", "-F", "file=@blob.bin", "-o", "answer.json",
            server.url(scenario: "patch-503").absoluteString,
        ]
        #expect(try await run(arguments).status == 4)
        let state = try #require(savedStates().first)
        let firstRun = try server.log().count
        // The record's time set and the rerun started in one turn: a rerun waiting behind other tests' commands (a
        // minute and more in CI's ThreadSanitizer pass) would find the time it was set long past.
        let second = try await Process.inOneTurn { [self] in
            try changeSavedState(state) { record in
                #expect(record.interopVersion == 7)
                record.updated = Date().addingTimeInterval(-savedSecondsAgo)
            }
            return try await run(arguments)
        }
        #expect(second.status == 0, "\(second.stderr)")
        let resumed = try server.log().dropFirst(firstRun)
        // Asked where the server stands, then the rest; never an OPTIONS.
        let asks = savedSecondsAgo < 60 ? ["HEAD", "HEAD"] : ["HEAD"]
        #expect(resumed.map(\.method) == asks + ["PATCH"], "\(resumed)")
        #expect(resumed.allSatisfy { $0.version == "7" })
        #expect(try server.forms() == [DraftServer.Form(bytes: form.bytes, sha256: form.sha256)])
    }

    /// Past the server's `max-age`, the saved upload is not asked about nor deleted: a new one starts, and says so.
    @Test func aSavedUploadPastItsMaxAgeStartsOverWithoutARequestToIt() async throws {
        let form = try await blobForm(boundary: "Expired", seed: 9)
        let server = try await DraftServer()
        let arguments = [
            "-S", "-C", "-", "--retry", "0", "--boundary", "Expired", "-F", "file=@blob.bin", "-o", "answer.json",
            server.url(scenario: "patch-503").absoluteString,
        ]
        #expect(try await run(arguments).status == 4)
        let state = try #require(savedStates().first)
        try changeSavedState(state) { record in
            let expires = try #require(record.expires).timeIntervalSinceNow
            #expect((3_500...3_600).contains(expires), "max-age=3600 from the server's answer: \(expires)")
            // An hour and a second later, as the clock would have it.
            record.expires = Date().addingTimeInterval(-1)
        }
        let firstRun = try server.log().count
        // The new upload meets the same 503 after half, which a retry mends.
        var retrying = arguments
        retrying[4] = "1"
        let second = try await run(retrying)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stderr.contains("its max-age) has passed: starting over"), "\(second.stderr)")
        let rerun = try server.log().dropFirst(firstRun)
        #expect(!rerun.contains { $0.path == "/u/1" }, "\(rerun)")
        // The server is known from the first run: the new upload is created at once.
        #expect(rerun.map(\.method) == ["POST", "PATCH", "HEAD", "PATCH"], "\(rerun)")
        #expect(try server.forms() == [DraftServer.Form(bytes: form.bytes, sha256: form.sha256)])
        #expect(savedStates().isEmpty)
    }

    /// Version 6 may answer the last append with a 2xx and no `Upload-Complete`; from 7 on that is a breach, which
    /// deletes the upload rather than report a success the server never said.
    @Test(arguments: [(6, Int32(0)), (7, 4), (9, 4)])
    func aFinalAnswerWithoutUploadCompleteIsTheAnswerOnlyInVersion6(version: Int, status: Int32) async throws {
        _ = try await blobForm(boundary: "NoField", seed: 11)
        let server = try await DraftServer(version: version)
        let result = try await run([
            "-sS", "-C", "-", "--boundary", "NoField", "-F", "file=@blob.bin", "-o", "answer.json",
            server.url(scenario: "complete-no-field").absoluteString,
        ])
        #expect(result.status == status, "\(result.stderr)")
        let log = try server.log()
        if status == 0 {
            #expect(!log.contains { $0.method == "DELETE" })
        } else {
            #expect(result.stderr.contains("without Upload-Complete, which its version of the draft requires"))
            #expect(log.last?.method == "DELETE", "\(log)")
        }
        #expect(savedStates().isEmpty)
    }

    /// A 413 is retried smaller, but never under `min-append-size`: the server would refuse that too.
    @Test func appendsKeepToMinAppendSizeThrough413s() async throws {
        let form = try await blobForm(boundary: "MinAppend", seed: 13)
        let server = try await DraftServer()
        let result = try await run([
            "-s", "-C", "-", "--retry", "8", "--retry-delay", "0", "--boundary", "MinAppend", "-F", "file=@blob.bin",
            "-o", "answer.json", server.url(scenario: "too-large-min").absoluteString,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try server.forms() == [DraftServer.Form(bytes: form.bytes, sha256: form.sha256)])
        let appends = try server.log().filter { $0.method == "PATCH" && $0.bytes <= 120_000 }
        #expect(appends.count > 20, "\(appends.count)")
        #expect(appends.dropLast().allSatisfy { $0.bytes >= 100_000 && $0.complete == "?0" }, "\(appends)")
    }

    @Test func limitsNoAppendCanKeepEndTheUploadBeforeAnyByte() async throws {
        _ = try await blobForm(boundary: "Conflict", seed: 17)
        let server = try await DraftServer()
        let result = try await run([
            "-sS", "-C", "-", "--boundary", "Conflict", "-F", "file=@blob.bin",
            server.url(scenario: "conflicting-limits")
                .absoluteString,
        ])
        #expect(result.status != 0)
        #expect(result.stderr.contains("appends of at least 2000 bytes"), "\(result.stderr)")
        #expect(try server.log().map(\.method) == ["OPTIONS"])
    }
}

/// A state file changed by hand or by a disk is never half-trusted.
extension CommandLineTests {
    /// The record changed as an attacker with write access to it, or a failing disk, would change it; each is
    /// ignored with a warning, nothing goes to the recorded upload, and the server ends up with exactly one fresh
    /// encoding of the form.
    @Test(arguments: [
        ("a boundary of the same length", "\"boundary\" : \"KeptTamper\"", "\"boundary\" : \"KeptTampeR\""),
        // JSON writes `/` as `\/`.
        ("the upload URL moved to another upload", #"\/u\/1""#, #"\/u\/77""#),
        ("the upload URL moved to another path", #"\/u\/1""#, #"\/admin\/users\/1""#),
        ("one character of the offset", "\"acknowledged\" : 1", "\"acknowledged\" : 2"),
    ])
    func aTamperedStateFileIsIgnoredAndNothingGoesToTheRecordedUpload(
        tampering: String, original: String, replacement: String
    ) async throws {
        var generator = SeededGenerator(seed: 23)
        _ = try directory.file("blob.bin", contents: Data([UInt8].random(count: 3_000_000, using: &generator)))
        let body = try await run(["-s", "--boundary", "KeptTamper", "-F", "file=@blob.bin", "-o", "-"]).stdout
        let expected = try directory.file("expected.multipart", contents: body)
        let server = try await DraftServer()
        var arguments = [
            "-S", "-C", "-", "--retry", "0", "--boundary", "KeptTamper", "-F", "file=@blob.bin", "-o", "answer.json",
            server.url(scenario: "patch-503").absoluteString,
        ]
        #expect(try await run(arguments).status == 4)
        let states = directory.path("state/multipart")
        let state = try #require(
            try FileManager.default.contentsOfDirectory(at: states, includingPropertiesForKeys: nil).first {
                $0.pathExtension == "json"
            })
        let text = try String(contentsOf: state, encoding: .utf8)
        #expect(text.contains(original), "\(tampering): \(text)")
        try text.replacingOccurrences(of: original, with: replacement).write(
            to: state, atomically: true, encoding: .utf8)

        let firstRun = try server.log().count
        arguments[4] = "1"
        let second = try await run(arguments)
        #expect(second.status == 0, "\(tampering): \(second.stderr)")
        #expect(
            second.stderr.contains("warning: ignoring the state file") && second.stderr.contains("checksum"),
            "\(tampering): \(second.stderr)")
        let rerun = try server.log().dropFirst(firstRun)
        // A new upload, created at once on the server the first run found.
        #expect(rerun.first?.method == "POST" && rerun.first?.path == "/s/patch-503", "\(tampering): \(rerun)")
        #expect(
            !rerun.contains { ["/u/1", "/u/77", "/admin/users/1"].contains($0.path) }, "\(tampering): \(rerun)")
        #expect(try server.forms() == [DraftServer.Form(bytes: body.count, sha256: try sha256sum(expected))])
    }
}
