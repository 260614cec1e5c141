import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A user and password written in the URL (`http://ada:pw@host/`) are the first origin's, as an `Authorization`
/// header is: a redirect to another origin, however its `Location` is written, carries none of them, and one to the
/// same origin keeps them, as curl 7.88 does. swift-corelibs-foundation resolves a scheme-relative `Location` by
/// changing only the host and port of the URL it answers, user and password kept, and libcurl sends those as
/// `Authorization: Basic`.
@Suite struct CredentialsInURLTests {
    /// `ada:pw`, as libcurl sends it.
    static let basic = "Basic YWRhOnB3"
    static let codes = [301, 302, 303, 307, 308]

    /// The `Location`s to test, by where they lead: to `other` (another port), or back to `first`.
    static func locations(first: UploadServer, other: UploadServer) -> [(location: String, leaves: Bool)] {
        let (a, b) = (first.url().port!, other.url().port!)
        return [
            ("http://127.0.0.1:\(b)/landed", true), ("//127.0.0.1:\(b)/landed", true),
            ("http://127.0.0.1:\(a)/landed", false), ("//127.0.0.1:\(a)/landed", false), ("/landed", false),
            ("../landed", false),
        ]
    }

    /// `server`'s URL of `path`, with ada:pw in it.
    static func withCredentials(_ server: UploadServer, _ path: String) -> URL {
        URL(string: server.url(path).absoluteString.replacingOccurrences(of: "http://", with: "http://ada:pw@"))!
    }

    static func redirectPath(_ code: Int, to location: String) -> String {
        "/redirect/\(code)?to=" + location.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    private func form() -> MultipartFormData {
        var form = MultipartFormData()
        form.append("value", name: "field")
        return form
    }

    @Test(arguments: codes)
    func theUploadAPI(code: Int) async throws {
        let (first, other) = (try UploadServer(), try UploadServer())
        for (location, leaves) in Self.locations(first: first, other: other) {
            let before = try await (first.log().count, other.log().count)
            let url = Self.withCredentials(first, Self.redirectPath(code, to: location))
            let (_, response) = try await URLSession.shared.upload(form(), with: URLRequest(url: url))
            #expect(response.url?.path.hasSuffix("landed") == true, "\(code) \(location)")
            let reached = leaves ? other : first
            let request = try #require(try await reached.log().dropFirst(leaves ? before.1 : before.0).last)
            #expect(request.path.hasSuffix("landed"), "\(code) \(location): \(request)")
            #expect(
                request.authorization == (leaves ? nil : Self.basic), "\(code) \(location): \(request)")
        }
    }

    /// `multipartUploadTask` follows what URLSession resends without a body (301 to 303 turn the POST into a GET);
    /// the streamed request's delegate likewise.
    @Test(arguments: [301, 302, 303])
    func theTaskAndStreamedRequestAPIs(code: Int) async throws {
        let (first, other) = (try UploadServer(), try UploadServer())
        let form = form()
        for (location, leaves) in Self.locations(first: first, other: other) {
            let url = Self.withCredentials(first, Self.redirectPath(code, to: location))
            let session = URLSession(configuration: .ephemeral)
            defer { session.finishTasksAndInvalidate() }
            let taskDone: Void = try await withCheckedThrowingContinuation { continuation in
                session.multipartUploadTask(with: URLRequest(url: url), form: form) { _, _, error in
                    if let error { continuation.resume(throwing: error) } else { continuation.resume() }
                }.resume()
            }
            _ = taskDone
            let streamedDone: Void = await withCheckedContinuation { continuation in
                let delegate = MultipartStreamedUploadDelegate { _, _, _, _ in continuation.resume() }
                let streamed = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
                streamed.uploadTask(withStreamedRequest: URLRequest(url: url, multipartFormData: form)).resume()
                streamed.finishTasksAndInvalidate()
            }
            _ = streamedDone
            let reached = try await (leaves ? other : first).log().filter { $0.path.hasSuffix("landed") }.suffix(2)
            #expect(reached.count == 2, "\(code) \(location)")
            #expect(
                reached.allSatisfy { $0.authorization == (leaves ? nil : Self.basic) },
                "\(code) \(location): \(reached)")
        }
    }
}

/// The same through the command, against curl 7.88: `-L`, `--location-trusted`, and `-C -`'s discovery, fallback,
/// creation and appends.
extension CommandLineTests {
    @Test(arguments: CredentialsInURLTests.codes)
    func credentialsInTheURLStayWithTheirOrigin(code: Int) async throws {
        let (first, other) = (try UploadServer(), try UploadServer())
        for (location, leaves) in CredentialsInURLTests.locations(first: first, other: other) {
            for (options, trusted) in [(["-L"], false), (["--location-trusted"], true), (["-L", "-C", "-"], false)] {
                let url = CredentialsInURLTests.withCredentials(
                    first, CredentialsInURLTests.redirectPath(code, to: location))
                let before = try await (first.log().count, other.log().count)
                let result = try run(["-sS", "-F", "a=b", "-o", "/dev/null"] + options + [url.absoluteString])
                #expect(result.status == 0 || code <= 303, "\(options) \(code) \(location): \(result.stderr)")
                let reached = try await leaves ? other.log().dropFirst(before.1) : first.log().dropFirst(before.0)
                let landed = reached.filter { $0.path.hasSuffix("landed") }
                // -C - asks OPTIONS four times (each redirected) before the form goes plain.
                #expect(landed.count == (options.contains("-C") ? 5 : 1), "\(options) \(code) \(location): \(landed)")
                let expected = leaves && !trusted ? nil : CredentialsInURLTests.basic
                #expect(
                    landed.allSatisfy { $0.authorization == expected }, "\(options) \(code) \(location): \(landed)")
            }
        }
    }

    /// curl itself, on the same redirects: the behaviour the command copies.
    @Test func curlKeepsCredentialsInTheURLWithTheirOriginToo() async throws {
        let (first, other) = (try UploadServer(), try UploadServer())
        for (location, leaves) in CredentialsInURLTests.locations(first: first, other: other) {
            let url = CredentialsInURLTests.withCredentials(
                first, CredentialsInURLTests.redirectPath(307, to: location))
            let before = try await (first.log().count, other.log().count)
            _ = try run([], shell: "curl -sS -L -F a=b -o /dev/null '\(url.absoluteString)'")
            let reached = try await leaves ? other.log().dropFirst(before.1) : first.log().dropFirst(before.0)
            let landed = try #require(reached.last { $0.path.hasSuffix("landed") })
            #expect(landed.authorization == (leaves ? nil : CredentialsInURLTests.basic), "curl, \(location)")
        }
    }

    /// `-C -` against a server of the draft whose start URL redirects discovery and creation to another origin,
    /// which puts the upload back on the first: nothing on the other origin carries the credential, everything on
    /// the first does, and the form arrives whole.
    @Test func credentialsInTheURLStayWithTheirOriginThroughTheResumableProtocol() throws {
        let server = try DraftServer()
        _ = try directory.file("blob.bin", contents: Data(repeating: 7, count: 200_000))
        let start = URL(
            string: server.url(scenario: "redirect-away").absoluteString.replacingOccurrences(
                of: "http://", with: "http://ada:pw@"))!
        let result = try run(["-sS", "-L", "-C", "-", "-F", "file=@blob.bin", "-o", "/dev/null", start.absoluteString])
        #expect(result.status == 0, "\(result.stderr)")
        let log = try server.log()
        #expect(try server.forms().count == 1)
        let away = log.filter { $0.port == server.alternatePort }
        let home = log.filter { $0.port == server.port }
        #expect(Set(away.map(\.method)) == ["OPTIONS", "POST"], "\(away)")
        #expect(Set(home.map(\.method)).isSuperset(of: ["OPTIONS", "POST", "PATCH"]), "\(home)")
        #expect(away.allSatisfy { $0.authorization == nil }, "\(away)")
        #expect(home.allSatisfy { $0.authorization == CredentialsInURLTests.basic }, "\(home)")
    }
}
