import Foundation
import MultipartStream
import MultipartStreamTestSupport
import Testing

@testable import MultipartCLI

/// `-F name=@-` under `-C -`: standard input goes out as it is read, with no temporary copy, where the server speaks
/// the draft, and is copied once where it does not.
extension CommandLineTests {
    /// 3 MB of standard input and the form it makes, as `--output-body` writes it; its SHA-256.
    private func piped(seed: UInt64) async throws -> (input: URL, expected: DraftServer.Form) {
        var generator = SeededGenerator(seed: seed)
        let input = try directory.file("input.tar", contents: Data([UInt8].random(count: 3_000_000, using: &generator)))
        let result = try await run(
            [], shell: "\(Self.executable.path) -s --boundary Piped -F backup=@- -o - < input.tar")
        let expected = try directory.file("expected.multipart", contents: result.stdout)
        return (input, DraftServer.Form(bytes: result.stdout.count, sha256: try sha256sum(expected)))
    }

    /// `cat input.tar | multipart ARGS`, its temporary files in the test's own directory, which must be empty after.
    private func pipe(_ arguments: String) async throws -> Run {
        try FileManager.default.createDirectory(at: directory.path("tmp"), withIntermediateDirectories: true)
        return try await run([], shell: "cat input.tar | TMPDIR=tmp \(Self.executable.path) \(arguments)")
    }

    @Test func standardInputUnderResumeIsStreamedWithNoTemporaryCopy() async throws {
        let (_, expected) = try await piped(seed: 36)
        let server = try await DraftServer()
        let result = try await pipe("-v -C - --boundary Piped -F backup=@- -o answer.json \(server.url())")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try server.forms() == [expected])
        #expect(
            result.stderr.contains("* the server speaks the draft: streaming standard input as it is read"),
            "\(result.stderr)")
        #expect(result.stderr.contains("* the form: multipart/form-data; boundary=Piped, its length unknown until"))
        let log = try server.log()
        let creation = try #require(log.first { $0.method == "POST" })
        #expect(creation.length == nil && creation.bytes == 0, "created before the length was known")
        #expect(log.filter { $0.method == "PATCH" }.map(\.complete) == ["?1"], "one append: 3 MB is under 8 MiB")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("tmp").path).isEmpty)
    }

    @Test func standardInputUnderResumeToAServerWithoutTheDraftIsCopiedOnce() async throws {
        let (_, expected) = try await piped(seed: 37)
        let server = try await DraftServer(version: 5)
        let result = try await pipe("-v -C - --boundary Piped -F backup=@- -o answer.json \(server.url())")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try server.forms() == [expected])
        #expect(
            result.stderr.contains(
                "* copied standard input to a temporary file to send the form with its length (\(expected.bytes) "),
            "\(result.stderr)")
        #expect(try server.log().filter { $0.method == "POST" }.map(\.bytes) == [expected.bytes])
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("tmp").path).isEmpty)
    }
}

extension CommandLineParsingTests {
    @Test func theProgressBarOfAStreamOfUnknownLengthShowsBytesAndRateOnly() {
        let bar = ProgressReporter.bar(MultipartUploadProgress(bytesSent: 1 << 30, totalBytes: nil), elapsed: 2)
        #expect(bar == "1.0 GiB sent  512.0 MiB/s")
    }
}
