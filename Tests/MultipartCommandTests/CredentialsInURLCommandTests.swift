import Foundation
import MultipartStreamTestSupport
import Testing

/// The same through the command, against curl 7.88: `-L`, `--location-trusted`, and `-C -`'s discovery, fallback,
/// creation and appends.
extension CommandLineTests {
    @Test(arguments: RedirectCases.codes)
    func credentialsInTheURLStayWithTheirOrigin(code: Int) async throws {
        let (first, other) = (try await UploadServer(), try await UploadServer())
        for (location, leaves) in RedirectCases.locations(first: first, other: other) {
            for (options, trusted) in [(["-L"], false), (["--location-trusted"], true), (["-L", "-C", "-"], false)] {
                let url = RedirectCases.withCredentials(
                    first, RedirectCases.redirectPath(code, to: location))
                let before = try await (first.log().count, other.log().count)
                let result = try await run(["-sS", "-F", "a=b", "-o", "/dev/null"] + options + [url.absoluteString])
                #expect(result.status == 0 || code <= 303, "\(options) \(code) \(location): \(result.stderr)")
                let reached = try await leaves ? other.log().dropFirst(before.1) : first.log().dropFirst(before.0)
                let landed = reached.filter { $0.path.hasSuffix("landed") }
                // -C - asks OPTIONS five times (each redirected), once a version, before the form goes plain.
                #expect(landed.count == (options.contains("-C") ? 6 : 1), "\(options) \(code) \(location): \(landed)")
                let expected = leaves && !trusted ? nil : RedirectCases.basic
                #expect(
                    landed.allSatisfy { $0.authorization == expected }, "\(options) \(code) \(location): \(landed)")
            }
        }
    }

    /// curl itself, on the same redirects: the behaviour the command copies.
    @Test func curlKeepsCredentialsInTheURLWithTheirOriginToo() async throws {
        let (first, other) = (try await UploadServer(), try await UploadServer())
        for (location, leaves) in RedirectCases.locations(first: first, other: other) {
            let url = RedirectCases.withCredentials(
                first, RedirectCases.redirectPath(307, to: location))
            let before = try await (first.log().count, other.log().count)
            _ = try await run([], shell: "curl -sS -L -F a=b -o /dev/null '\(url.absoluteString)'")
            let reached = try await leaves ? other.log().dropFirst(before.1) : first.log().dropFirst(before.0)
            let landed = try #require(reached.last { $0.path.hasSuffix("landed") })
            #expect(landed.authorization == (leaves ? nil : RedirectCases.basic), "curl, \(location)")
        }
    }

    /// `-C -` against a server of the draft whose start URL redirects discovery and creation to another origin,
    /// which puts the upload back on the first: nothing on the other origin carries the credential, everything on
    /// the first does, and the form arrives whole.
    @Test func credentialsInTheURLStayWithTheirOriginThroughTheResumableProtocol() async throws {
        let server = try await DraftServer()
        _ = try directory.file("blob.bin", contents: Data(repeating: 7, count: 200_000))
        let start = URL(
            string: server.url(scenario: "redirect-away").absoluteString.replacingOccurrences(
                of: "http://", with: "http://ada:pw@"))!
        let result = try await run([
            "-sS", "-L", "-C", "-", "-F", "file=@blob.bin", "-o", "/dev/null", start.absoluteString,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let log = try server.log()
        #expect(try server.forms().count == 1)
        let away = log.filter { $0.port == server.alternatePort }
        let home = log.filter { $0.port == server.port }
        #expect(Set(away.map(\.method)) == ["OPTIONS", "POST"], "\(away)")
        #expect(Set(home.map(\.method)).isSuperset(of: ["OPTIONS", "POST", "PATCH"]), "\(home)")
        #expect(away.allSatisfy { $0.authorization == nil }, "\(away)")
        #expect(home.allSatisfy { $0.authorization == RedirectCases.basic }, "\(home)")
    }
}
