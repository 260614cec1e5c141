import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

/// What `-C -` keeps stays findable and tidy: `--list-saved`, pruning, and a path that is not UTF-8.
extension CommandLineTests {
    private func keptUpload(_ server: DraftServer, boundary: String) async throws -> [String] {
        var generator = SeededGenerator(seed: 41)
        _ = try directory.file("blob.bin", contents: Data([UInt8].random(count: 3_000_000, using: &generator)))
        let arguments = [
            "-S", "-C", "-", "--retry", "0", "--boundary", boundary, "-F", "file=@blob.bin", "-o", "answer.json",
            server.url(scenario: "patch-503").absoluteString,
        ]
        #expect(try await run(arguments).status == 4)
        return arguments
    }

    @Test func listSavedShowsWhatTheNextRunWouldResumeAndRemovesWhatExpired() async throws {
        let server = try await DraftServer()
        // One turn for the runs until the listing: its "removed in 59 min" counts from the upload's save.
        try await Process.inOneTurn { [self] in
            _ = try await keptUpload(server, boundary: "Listed")
            let length = try await run(["-s", "--boundary", "Listed", "-F", "file=@blob.bin", "-o", "-"]).stdout.count
            // Another upload's state, past its max-age.
            let states = SavedUploadDirectory(
                directory.path("state/multipart"), interopVersions: ResumableUpload.InteropVersion.spoken)
            let expiredKey = String(repeating: "e", count: 64)
            try states.save(
                SavedUpload(
                    method: "PUT", requestURL: "http://127.0.0.1:1/old", uploadURL: "http://127.0.0.1:1/u/9",
                    uploadOnOtherOrigin: false, interopVersion: 9, boundary: "b", contentLength: 10,
                    fingerprint: String(repeating: "0", count: 64), acknowledged: 5,
                    created: Date(timeIntervalSinceNow: -90),
                    updated: Date(timeIntervalSinceNow: -90), expires: Date(timeIntervalSinceNow: -30)),
                as: expiredKey)

            let requests = try server.log().count
            let listed = try await run(["--list-saved"])
            #expect(listed.status == 0, "\(listed.stderr)")
            let lines = String(decoding: listed.stdout, as: UTF8.self).split(separator: "\n")
            #expect(lines.count == 1, "\(lines)")
            #expect(
                lines.first?.hasPrefix(
                    "POST \(server.url(scenario: "patch-503").absoluteString) (interop version 10): the server last "
                        + "acknowledged \(length / 2) of \(length) "
                        + "bytes (50.0%) when last asked (a run since may have sent more), saved ") == true, "\(lines)")
            #expect(lines.first?.contains("removed in 59 min") == true, "the server's expires=3600: \(lines)")
            #expect(listed.stderr.contains("whose lifetime was over: \(states.file(for: expiredKey).path)"))
            #expect(!FileManager.default.fileExists(atPath: states.file(for: expiredKey).path))
            #expect(try server.log().count == requests, "nothing sent")

            let empty = try await run(["--list-saved", "--state-dir", directory.path("nothing").path])
            #expect(empty.status == 0 && empty.stdout.isEmpty && empty.stderr.contains("no saved uploads"))
            let misused = try await run(["--list-saved", "-F", "a=1", server.url().absoluteString])
            #expect(misused.status == 2 && misused.stderr.contains("sends nothing"))
        }
    }

    /// A path that is not UTF-8 reaches the form through a descriptor (`/dev/fd/N`); its state is found again when N
    /// comes out otherwise, as it does when the shell holds other descriptors open.
    @Test func aSavedUploadOfAFileWhosePathIsNotUTF8IsResumed() async throws {
        let server = try await DraftServer()
        let url = server.url(scenario: "patch-503").absoluteString
        let command =
            "\(Self.executable.path) -S -C - --retry RETRIES --boundary NotUTF8 -F $'file=@caf\\xe9.bin' -o answer.json "
            + url
        let make = "head -c 3000000 /dev/urandom > $'caf\\xe9.bin' && "
        let first = try await run([], shell: make + command.replacingOccurrences(of: "RETRIES", with: "0"))
        #expect(first.status == 4, "\(first.stderr)")
        let second = try await run(
            [],
            shell: "exec 3</dev/null 4</dev/null 5</dev/null; " + command.replacingOccurrences(of: "RETRIES", with: "1")
        )
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stderr.contains("resuming the saved upload at byte 1500"), "\(second.stderr)")
        let log = try server.log()
        #expect(log.filter { $0.method == "POST" }.count == 1, "one upload: \(log.map(\.method))")
        let encoded = try await run(
            [], shell: "\(Self.executable.path) -s --boundary NotUTF8 -F $'file=@caf\\xe9.bin' -o expected.multipart")
        #expect(encoded.status == 0)
        let expected = directory.path("expected.multipart")
        let bytes = try Data(contentsOf: expected).count
        #expect(try server.forms() == [DraftServer.Form(bytes: bytes, sha256: try sha256sum(expected))])
    }
}
