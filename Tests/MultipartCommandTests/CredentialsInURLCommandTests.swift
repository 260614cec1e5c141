import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartCLI

/// The same through the command, against curl 7.88: `-L`, `--location-trusted`, and `-C -`'s discovery, fallback,
/// creation and appends.
extension CommandLineTests {
    @Test(arguments: RedirectCases.codes)
    func credentialsInTheURLStayWithTheirOrigin(code: Int) async throws {
        let (first, other) = (try await UploadServer(), try await UploadServer())
        for (location, leaves) in RedirectCases.locations(first: first, other: other) {
            for (options, trusted) in [
                (["-L"], false), (["--location-trusted"], true), (["-L", "-C", "-"], false),
                (["-L", "-C", "-", "--single-request-limit", "0"], false),
            ] {
                let url = RedirectCases.withCredentials(
                    first, RedirectCases.redirectPath(code, to: location))
                let before = try await (first.log().count, other.log().count)
                // Each -C - run with a state of its own: none knows what an earlier one found the server to speak.
                let state = options.contains("-C") ? ["--state-dir", "state-\(UUID())"] : []
                let result = try await run(
                    ["-sS", "-F", "a=b", "-o", "/dev/null"] + options + state + [url.absoluteString])
                #expect(result.status == 0 || code <= 303, "\(options) \(code) \(location): \(result.stderr)")
                let reached = try await leaves ? other.log().dropFirst(before.1) : first.log().dropFirst(before.0)
                let landed = reached.filter { $0.path.hasSuffix("landed") }
                // -C - sends the small form in one request; created first, it asks OPTIONS five times (each
                // redirected), once a version, before the form goes plain.
                let requests = options.contains("--single-request-limit") ? 6 : 1
                #expect(landed.count == requests, "\(options) \(code) \(location): \(landed)")
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
        // Over 1 MiB, so that discovery, creation and appends each go.
        _ = try directory.file("blob.bin", contents: Data(repeating: 7, count: 1_100_000))
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

/// No credential in any message: the command's every way to fail, and to succeed, with a user and password in the
/// URL and with `-u`, under `-v` and `-w '%{url_effective}'`: neither the password, nor the user beside it, nor the
/// `Authorization` header's credentials appear in anything it writes (stderr, stdout, the listings).
extension CommandLineTests {
    @Test func noMessageCarriesACredential() async throws {
        let server = try await UploadServer()
        let draft = try await DraftServer()
        _ = try directory.file("blob.bin", contents: Data(repeating: 7, count: 100_000))
        _ = try FileManager.default.createDirectory(at: directory.path("adir"), withIntermediateDirectories: true)
        /// `url` with the user and password.
        func secret(_ url: URL) -> String {
            url.absoluteString.replacingOccurrences(of: "http://", with: "http://ada:s3cret@")
        }
        // Each bounded: a resumable upload gives up after a second of retries, and no run goes past 20 s. The answer's
        // body (which the server's echo of the request fills with its headers) is no message: it goes to a file.
        let verbose = [
            "-v", "-w", "%{url_effective} %{http_code}\\n", "-F", "a=1", "-F", "file=@blob.bin", "-m", "20",
            "--retry-max-time", "1", "-o", "answer",
        ]
        let cases: [[String]] = [
            // Refused connection, plain and resumable.
            verbose + ["http://ada:s3cret@127.0.0.1:1/up"],
            verbose + ["-C", "-", "http://ada:s3cret@127.0.0.1:1/up"],
            // HTTP errors, plain and resumable (the application's answer, and a server without the draft).
            verbose + [secret(server.url("/status/404"))],
            verbose + ["-C", "-", secret(draft.url(scenario: "complete-404"))],
            verbose + ["-C", "-", secret(server.url("/status/500"))],
            // A redirect not followed, and one followed to nowhere.
            verbose + [secret(server.url("/redirect/307?to=http://ada:s3cret@127.0.0.1:1/x"))],
            verbose + ["-L", secret(server.url("/redirect/307?to=http://ada:s3cret@127.0.0.1:1/x"))],
            // Success, and the output refused.
            verbose + [secret(server.url("/upload"))],
            verbose.dropLast(2) + ["-o", "adir", secret(server.url("/upload"))],
            // -u, and a saved upload abandoned that is not there.
            verbose + ["-u", "ada:s3cret", "http://127.0.0.1:1/up"],
            ["-C", "-", "--abandon", "-F", "a=1", secret(server.url("/upload"))],
            // The queue refuses the credential, and lists nothing of it.
            ["--queue", "q", "-F", "a=1", secret(server.url("/upload"))],
            ["--queue", "q", "--list"],
            ["--list-saved"],
            // A token in a header, plain and resumable, under -v.
            verbose + ["-H", "Authorization: Bearer t0ken", secret(server.url("/status/404"))],
            verbose + ["-C", "-", "-H", "Cookie: session=t0ken", secret(draft.url(scenario: "complete-404"))],
            // A queue's run, its credentials given to it: an upload the application refuses, and one that finds no
            // server (the run bounded by --max-time), under -v and -w; then its listing.
            ["--queue", "q2", "-F", "a=1", draft.url(scenario: "complete-404").absoluteString],
            ["--queue", "q2", "-F", "a=1", "http://127.0.0.1:1/up"],
            [
                "--queue", "q2", "--run", "-v", "-w", "%{url_effective} %{http_code}\\n", "-u", "ada:s3cret", "-H",
                "Cookie: session=t0ken", "--max-time", "5",
            ],
            ["--queue", "q2", "--list"],
        ]
        let basic = Data("ada:s3cret".utf8).base64EncodedString()
        for arguments in cases {
            let result = try await run(arguments)
            #expect(result.seconds < 30, "\(arguments): \(result.seconds) s")
            let output = String(decoding: result.stdout, as: UTF8.self) + result.stderr
            for secret in ["s3cret", "ada:", "ada@", basic, "t0ken"] {
                #expect(!output.contains(secret), "\(arguments): \(secret) in \(output.prefix(4_000))")
            }
        }
    }
}

extension CommandLineTests {
    /// The redaction itself: every URL's user information, wherever it sits in the text, and nothing else.
    @Test(arguments: [
        ("multipart: http://ada:s3cret@127.0.0.1:1/up: failed", "multipart: http://127.0.0.1:1/up: failed"),
        ("to https://tok@h.example?x=1 and http://a:b@c/d", "to https://h.example?x=1 and http://c/d"),
        ("at 'http://u:p%40q@h'", "at 'http://h'"),
        ("mail ada@example.com, http://h/a@b", "mail ada@example.com, http://h/a@b"),
        ("no URL here", "no URL here"),
    ])
    func redactionLeavesOutEveryURLsUserInformation(text: String, shown: String) {
        #expect(Redaction.text(text) == shown)
    }

    @Test func verboseHidesCredentialHeadersButTheirScheme() {
        #expect(Redaction.header("Authorization", value: "Basic YWRhOnMzY3JldA==") == "Basic <hidden>")
        #expect(Redaction.header("cookie", value: "session=abc") == "<hidden>")
        #expect(Redaction.header("Accept", value: "*/*") == "*/*")
    }
}
