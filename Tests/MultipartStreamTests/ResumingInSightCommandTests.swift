import Foundation
import MultipartStreamTestSupport
import Testing

/// `-C -` resumes in sight: a line for each drop and resume, `-v` for each request of the protocol, the bytes a run
/// really sent, and a local state problem said as one.
extension CommandLineTests {
    private func blob(seed: UInt64) throws -> Int {
        var generator = SeededGenerator(seed: seed)
        _ = try directory.file("blob.bin", contents: Data([UInt8].random(count: 3_000_000, using: &generator)))
        return try run(["-s", "--boundary", "InSight", "-F", "file=@blob.bin", "-o", "-"]).stdout.count
    }

    @Test func aDropAndItsResumeAreSaidALineEach() throws {
        let length = try blob(seed: 51)
        let server = try DraftServer()
        let result = try run([
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
            try run(["-s"] + ["-C", "-", "-F", "a=1", "-o", "answer.json", server.url().absoluteString]).stderr.isEmpty)
    }

    @Test func verboseShowsEachRequestOfTheProtocolAndItsAnswer() throws {
        _ = try blob(seed: 52)
        let server = try DraftServer()
        let result = try run([
            "-v", "-C", "-", "--boundary", "InSight", "-F", "file=@blob.bin", "-o", "answer.json",
            server.url(scenario: "head-503").absoluteString,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stderr.split(separator: "\n").map(String.init)
        let requests = lines.filter { $0.hasPrefix("> ") && $0.contains(" http://") }.map {
            $0.split(separator: " ")[1]
        }
        #expect(requests == ["POST", "OPTIONS", "POST", "PATCH", "HEAD", "HEAD", "PATCH"], "\(lines)")
        #expect(requests.count == (try server.log()).count + 1, "the command's own line, then one per request sent")
        #expect(lines.contains("> Upload-Offset: \(try server.log().last?.offset ?? "")"))
        #expect(lines.contains("< HTTP 503") && lines.contains("< Retry-After: 0"))
        #expect(lines.contains("< Upload-Limit: max-age=3600"))
    }

    @Test func aServerWithoutTheDraftIsSaidSo() throws {
        _ = try blob(seed: 53)
        let server = try DraftServer(version: 5)
        let result = try run(["-C", "-", "-F", "file=@blob.bin", "-o", "answer.json", server.url().absoluteString])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stderr.hasPrefix(
                "multipart: the server does not take resumable uploads: sending the whole form\n"), "\(result.stderr)")
    }

    /// `%{size_upload}` is what this run sent, not the form's length: a resumed run sends the rest.
    @Test func sizeUploadIsTheBytesThisRunSent() throws {
        let length = try blob(seed: 54)
        let server = try DraftServer()
        var arguments = [
            "-sS", "-C", "-", "--retry", "0", "--boundary", "InSight", "-F", "file=@blob.bin", "-o", "answer.json",
            "-w", "%{size_upload}", server.url(scenario: "patch-503").absoluteString,
        ]
        let first = try run(arguments)
        #expect(first.status == 4)
        #expect(
            (Int(String(decoding: first.stdout, as: UTF8.self)) ?? 0) >= length / 2, "at least what the server kept")
        arguments[4] = "1"
        let second = try run(arguments)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(String(decoding: second.stdout, as: UTF8.self) == String(length - length / 2))
    }

    @Test func aStateThatCannotBeKeptIsALocalProblem() throws {
        let server = try DraftServer()
        let file = try directory.file("not-a-directory", contents: Data())
        let result = try run(["-C", "-", "--state-dir", file.path, "-F", "a=1", server.url().absoluteString])
        #expect(result.status == 3, "\(result.stderr)")
        #expect(result.stderr.contains("multipart: -C -: the upload's state cannot be kept at \(file.path)"))
        #expect(!result.stderr.contains("form:"))
        #expect(try server.log().isEmpty, "nothing sent")
    }
}
