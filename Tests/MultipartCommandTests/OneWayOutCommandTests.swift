import Foundation
import MultipartStreamTestSupport
import Testing

/// The rule every request of the library follows, through the command: a credential given with `-H` or `-u` reaches
/// its own origin, and another only with `--location-trusted`, as curl 7.88 does.
extension CommandLineTests {
    /// The same through the command: `-H` and `-u`, with `-L` (never to another origin) and `--location-trusted`
    /// (on purpose), as curl 7.88 does.
    @Test func theCommandsCredentialsFollowTheSameRule() async throws {
        let (first, other) = (try await UploadServer(), try await UploadServer())
        var cases = 0
        for code in [301, 302, 303, 307, 308] {
            for (source, expected) in [
                (["-H", "Authorization: \("Bearer T")", "-H", "Cookie: \("session=1")"], "Bearer T"),
                (["-u", "ada:pw"], RedirectCases.basic),
            ] {
                for (options, trusted) in [(["-L"], false), (["--location-trusted"], true)] {
                    let targets = [
                        ("http://127.0.0.1:\(other.url().port!)/landed?", true),
                        ("//127.0.0.1:\(other.url().port!)/landed?", true), ("/landed?", false),
                    ]
                    for (location, leaves) in targets {
                        cases += 1
                        let tag = "case=c\(cases)"
                        let redirect = first.url(
                            "/redirect/\(code)?to="
                                + (location + tag).addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
                        let result = try await run(
                            ["-sS", "-F", "a=b", "-o", "/dev/null"] + source + options + [redirect.absoluteString])
                        let what = "\(source) \(options) \(code) to \(location)"
                        // A 301 to 303 lands as a GET without the form, which the server refuses (exit 4).
                        #expect(result.status == 0 || code <= 303, "\(what): \(result.stderr)")
                        let landed = try await (first.log() + other.log()).filter { $0.query == "?\(tag)" }
                        #expect(landed.count == 1, "\(what): \(landed)")
                        let carries = !leaves || trusted
                        #expect(
                            landed.allSatisfy { $0.authorization == (carries ? expected : nil) },
                            "\(what): \(landed)")
                    }
                }
            }
        }
    }
}
