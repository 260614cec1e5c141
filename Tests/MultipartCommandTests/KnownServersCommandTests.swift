import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartCLI
@testable import MultipartStream

extension CommandLineTests {
    /// `-C -` keeps what it found each server to speak beside its saved uploads: a second run to the same origin asks
    /// nothing. A server with the draft gets the upload created at once (its `POST` and `PATCH`); one without it
    /// (version 5 only, which the command does not speak) gets the form whole, where each run asked five `OPTIONS`.
    @Test(arguments: [true, false]) func aSecondRunToTheSameServerAsksNothing(speaksDraft: Bool) async throws {
        let server = try await DraftServer(version: speaksDraft ? nil : 5)
        var seen: [Int] = []
        // Over 1 MiB: a smaller form goes in one request, asking nothing at all.
        for (index, size) in [1_100_000, 1_200_000].enumerated() {
            _ = try directory.file("f-\(index).bin", contents: Data(repeating: UInt8(index), count: size))
            let sent = try await run([
                "-sS", "-C", "-", "-F", "file=@f-\(index).bin", "-o", "answer-\(index).json",
                server.url().absoluteString,
            ])
            #expect(sent.status == 0, "\(sent.stderr)")
            seen.append(try server.log().count)
        }
        let log = try server.log().map(\.method)
        let (first, second) = (log.prefix(seen[0]), log.dropFirst(seen[0]))
        #expect(first.contains("OPTIONS"), "the first run asks: \(log)")
        #expect(Array(second) == (speaksDraft ? ["POST", "PATCH"] : ["POST"]), "the second asks nothing: \(log)")
        let forms = try server.forms()
        #expect(forms.count == 2 && zip(forms, [1_100_000, 1_200_000]).allSatisfy { $0.bytes > $1 }, "\(forms)")
        let kept = try Data(contentsOf: directory.path("state/multipart/servers/origins.json"))
        #expect(String(decoding: kept, as: UTF8.self).contains("127.0.0.1:\(server.port)"))
    }

    /// A server found to speak no draft is taken at its word for a day, then asked again; a file that does not
    /// decode is no knowledge.
    @Test func whatTheCommandKeepsOfAServerSpeakingNoDraftLastsADay() throws {
        let servers = KnownServers(in: directory.path("servers"))
        let origin = "http://127.0.0.1:9"
        let then = Date(timeIntervalSince1970: 2_000_000_000)
        servers.keep(.speaksNone(since: then), for: origin)
        #expect(servers.finding(for: origin, at: then.addingTimeInterval(3_600)) == .speaksNone(since: then))
        #expect(servers.finding(for: origin, at: then.addingTimeInterval(KnownServers.speaksNoneFor)) == nil)
        let draft = ResumableUpload.KnownServer(version: .v9, limits: ResumableUpload.Limits(maxAppendSize: 10_000))
        servers.keep(.speaks(draft), for: "https://example.com:443")
        #expect(servers.finding(for: "https://example.com:443", at: .distantFuture) == .speaks(draft))
        #expect(servers.finding(for: origin, at: then) == .speaksNone(since: then), "each origin kept")
        try Data("not JSON".utf8).write(to: directory.path("servers/servers/origins.json"))
        #expect(servers.finding(for: origin, at: then) == nil)
    }
}
