import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

/// `multipart -C -`, as typed first, against a draft server whose answers lie (`Peers/draft-server.py`'s `lie-*`,
/// `empty-413`, `complete-then-drop` and `location-*` scenarios): the process never traps, never exits 0 for a form
/// the server cannot have, never deletes an upload the server says it holds whole, and never saves a URL it cannot
/// request.
extension CommandLineTests {
    /// A form over 1 MiB, which `-C -` creates first and sends in appends, where the lies are told (a smaller one goes
    /// in one request, whose answer is the application's).
    private func lyingServerForm(seed: UInt64) async throws -> (bytes: Int, sha256: String) {
        var generator = SeededGenerator(seed: seed)
        _ = try directory.file("lie.bin", contents: Data([UInt8].random(count: 1_100_000, using: &generator)))
        let body = try await run(["-s", "--boundary", "Lies", "-F", "file=@lie.bin", "-o", "-"]).stdout
        let expected = try directory.file("expected-lies.multipart", contents: body)
        return (body.count, try sha256sum(expected))
    }

    private func lyingRun(_ server: DraftServer, _ scenario: String) async throws -> Run {
        try await run([
            "-sS", "-C", "-", "--retry", "2", "--retry-delay", "0.01", "--boundary", "Lies", "-F", "file=@lie.bin",
            "-o", "answer.json", "-w", "%{http_code}", server.url(scenario: scenario).absoluteString,
        ])
    }

    /// A completion claimed for an append sent as `?0` (100,000 of 1,100,000 bytes), in each version: the form's length
    /// as the offset, a negative offset, none at all.
    @Test(arguments: [6, 7, 8, 9, 10], ["lie-complete-length", "lie-complete-negative", "lie-complete-none"])
    func aCompletionBeforeTheLastByteIsABreachNotASuccess(version: Int, scenario: String) async throws {
        _ = try await lyingServerForm(seed: 44)
        let server = try await DraftServer(version: version)
        let result = try await lyingRun(server, scenario)
        #expect(result.status == 4, "\(result.stderr)")
        #expect(result.stderr.contains("called the upload complete"), "\(result.stderr)")
        #expect(result.stderr.contains("not its last byte with Upload-Complete: ?1"), "\(result.stderr)")
        let log = try server.log()
        let patches = log.filter { $0.method == "PATCH" }
        #expect(patches.count == 1 && patches.first?.complete == "?0", "\(log)")
        #expect(!log.contains { $0.method == "DELETE" }, "an upload the server calls complete is not deleted")
        #expect(try server.forms().isEmpty)
        #expect(savedStates().isEmpty)
    }

    /// Only the answer is the answer, as curl `-L` writes no redirect's body: the body of every answer the upload
    /// goes on from (a 307 to the moved upload, a 503, a 413, a 409, a 200 that keeps part of the form) reaches
    /// neither `-o` nor standard output, with the options a user types first.
    @Test(arguments: ["redirect-307", "patch-503", "too-large", "conflict-409", "partial-200"])
    func theOutputHoldsTheAnswerAlone(scenario: String) async throws {
        let form = try await lyingServerForm(seed: 47)
        let server = try await DraftServer()
        let url = server.url(scenario: scenario).absoluteString
        let toFile = try await run([
            "-sS", "-C", "-", "--boundary", "Lies", "-F", "file=@lie.bin", "-o", "answer.json", url,
        ])
        #expect(toFile.status == 0, "\(toFile.stderr)")
        let toStandardOutput = try await run(["-sS", "-C", "-", "--boundary", "Lies", "-F", "file=@lie.bin", url])
        #expect(toStandardOutput.status == 0, "\(toStandardOutput.stderr)")
        let expected = DraftServer.Form(bytes: form.bytes, sha256: form.sha256)
        for output in [try Data(contentsOf: directory.path("answer.json")), toStandardOutput.stdout] {
            let text = String(decoding: output, as: UTF8.self)
            #expect((try? JSONDecoder().decode(DraftServer.Form.self, from: output)) == expected, "\(text)")
        }
        #expect(try server.forms() == [expected, expected])
    }

    /// The whole form went in one append that the server answered `?0` at the end; the empty last append (`?1`) is
    /// refused with 413. Before, `size - 1` with `size == 0` trapped (signal 4).
    @Test func a413ToTheEmptyLastAppendIsTheAnswerNotATrap() async throws {
        let form = try await lyingServerForm(seed: 45)
        let server = try await DraftServer()
        let result = try await lyingRun(server, "empty-413")
        // The server's refusal, as any HTTP error is under -C -: exit 4, not a signal.
        #expect(result.status == 4, "\(result.stderr)")
        #expect(result.stderr.contains("answered HTTP 413"), "\(result.stderr)")
        #expect(String(decoding: result.stdout, as: UTF8.self) == "413")
        let patches = try server.log().filter { $0.method == "PATCH" }
        #expect(patches.map(\.bytes) == [form.bytes, 0], "\(patches)")
        #expect(patches.map(\.complete) == ["?1", "?1"])
    }

    /// The server processed the whole form and the answer was lost; `HEAD` says `?1` at the full length. The error
    /// says so, and no `DELETE` goes to an upload the server holds whole.
    @Test func anUploadTheServerHoldsWholeIsNeverDeleted() async throws {
        let form = try await lyingServerForm(seed: 46)
        let server = try await DraftServer()
        let result = try await lyingRun(server, "complete-then-drop")
        #expect(result.status == 4, "\(result.stderr)")
        #expect(result.stderr.contains("the server has all \(form.bytes) bytes of the form"), "\(result.stderr)")
        #expect(result.stderr.contains("not deleted"), "\(result.stderr)")
        let log = try server.log()
        #expect(!log.contains { $0.method == "DELETE" }, "\(log)")
        #expect(try server.forms() == [DraftServer.Form(bytes: form.bytes, sha256: form.sha256)])
        #expect(savedStates().isEmpty)
    }

    /// A `Location` that cannot be requested is the server's breach at creation: nothing is sent there, nothing is
    /// saved, and the next run does not fail on a saved URL (it asks again, and meets the same breach).
    @Test(arguments: [
        ("location-no-host", "it has no host"), ("location-userinfo", "it holds a user or password"),
        ("location-ftp", "its scheme is not http or https"), ("location-huge", "it is longer than 8192 bytes"),
        // Else every append, and every later run's HEAD, hangs in a TLS handshake until it stalls.
        ("location-https-plain", "it asks for https on the port that answered plain http"),
    ])
    func aLocationThatCannotBeRequestedIsABreachAtCreation(scenario: String, flaw: String) async throws {
        _ = try await lyingServerForm(seed: 47)
        let server = try await DraftServer()
        for _ in 0..<2 {
            let result = try await lyingRun(server, scenario)
            #expect(result.status == 4, "\(result.stderr)")
            #expect(result.stderr.contains("cannot be requested: \(flaw)"), "\(result.stderr)")
            #expect(savedStates().isEmpty, "nothing unusable is saved")
        }
        let log = try server.log()
        #expect(log.filter { $0.method == "POST" }.count == 2, "each run created, and stopped there")
        #expect(!log.contains { ["PATCH", "HEAD", "DELETE"].contains($0.method) }, "\(log.map(\.method))")
    }
}
