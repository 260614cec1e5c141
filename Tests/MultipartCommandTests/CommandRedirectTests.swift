import Foundation
import MultipartStreamTestSupport
import Testing

/// The command's credentials on redirects, as curl's, and arguments sent as the bytes they are.
extension CommandLineTests {
    private static var credentials: [(arguments: [String], header: KeyPath<UploadServer.Seen, String?>, value: String)]
    {
        [
            (["-u", "alice:secret"], \.authorization, "Basic YWxpY2U6c2VjcmV0"),
            (["-H", "Authorization: Bearer t0ken"], \.authorization, "Bearer t0ken"),
            (["-H", "Cookie: session=1"], \.cookie, "session=1"),
            (["-H", "Proxy-Authorization: Basic cHJveHk6cA=="], \.proxyAuthorization, "Basic cHJveHk6cA=="),
        ]
    }

    private func seen(_ run: Run, _ server: UploadServer) throws -> UploadServer.Seen {
        #expect(run.status == 0, "\(run.stderr)")
        return try server.seen(in: run.stdout)
    }

    @Test(arguments: [301, 302, 303, 307, 308])
    func credentialsNeverFollowARedirectToAnotherHost(code: Int) async throws {
        let server = try await UploadServer()
        for credential in Self.credentials {
            let arguments = ["-sS", "-L"] + credential.arguments + ["-F", "a=1"]
            let elsewhere = try await seen(
                run(arguments + [server.url("/elsewhere/\(code)?to=/headers").absoluteString]), server)
            #expect(
                elsewhere[keyPath: credential.header] == nil, "\(credential.arguments) followed a \(code) to localhost")
            #expect(elsewhere.authorization == nil && elsewhere.cookie == nil && elsewhere.proxyAuthorization == nil)
            if code >= 307 { #expect(elsewhere.method == "POST" && elsewhere.parts?.count == 1, "the form again") }

            let same = try await seen(
                run(arguments + [server.url("/redirect/\(code)?to=/headers").absoluteString]), server)
            #expect(same[keyPath: credential.header] == credential.value, "\(credential.arguments): same origin")

            let trusted = try await seen(
                run(
                    ["-sS", "--location-trusted"] + credential.arguments + [
                        "-F", "a=1", server.url("/elsewhere/\(code)?to=/headers").absoluteString,
                    ]),
                server)
            #expect(trusted[keyPath: credential.header] == credential.value, "\(credential.arguments): trusted")
        }
    }

    /// `bash -c` with `$'…'` quoting: Foundation's `Process` takes arguments as strings, which cannot hold every byte.
    private func runBytes(_ arguments: String) async throws -> Run {
        try await run([], shell: "'\(Self.executable.path)' \(arguments)")
    }

    @Test func textValuesAreSentAsTheArgumentsBytes() async throws {
        let field = try await runBytes(#"-F $'t=\xff\xferaw' --boundary B --output-body -"#)
        #expect(field.status == 0, "\(field.stderr)")
        #expect(
            field.stdout == Data("--B\r\nContent-Disposition: form-data; name=\"t\"\r\n\r\n".utf8) + Data([0xFF, 0xFE])
                + Data("raw\r\n--B--\r\n".utf8))
        let literal = try await runBytes(#"--form-string $'s=\xff;type=x' --boundary B --output-body -"#)
        #expect(
            literal.stdout.range(of: Data([0x0D, 0x0A, 0x0D, 0x0A, 0xFF]) + Data(";type=x\r\n".utf8)) != nil,
            "\(literal.stderr)")
    }

    @Test(arguments: [
        (#"-F $'\xff=1'"#, "name is not UTF-8"),
        (#"-F $'f=@Package.swift;filename=\xff.txt'"#, ";filename= is not UTF-8"),
        (#"-F $'f=1;type=text/\xff'"#, ";type= is not UTF-8"),
        (#"-F $'f=1;headers=\"X-A: \xff\"'"#, ";headers= is not UTF-8"),
        (#"-H $'X-A: \xff' -F a=1 http://127.0.0.1:9/"#, "-H: the header is not UTF-8"),
    ])
    func headerTextThatIsNotUTF8IsRefused(arguments: String, message: String) async throws {
        _ = try directory.file("Package.swift", contents: Data("x".utf8))
        let result = try await runBytes("\(arguments) --output-body /dev/null")
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains(message), "\(result.stderr)")
    }

    @Test func aUserThatIsNotUTF8IsSentAsItsBytes() async throws {
        let server = try await UploadServer()
        let result = try await runBytes(#"-sS -u $'\xe9l\xe8ve:pw' -F a=1 "# + server.url("/headers").absoluteString)
        #expect(result.status == 0, "\(result.stderr)")
        let expected = "Basic " + (Data([0xE9, 0x6C, 0xE8]) + Data("ve:pw".utf8)).base64EncodedString()
        #expect(try server.seen(in: result.stdout).authorization == expected)
    }
}
