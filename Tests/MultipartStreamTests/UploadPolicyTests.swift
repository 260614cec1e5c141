import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The upload layer's decisions, without a server: origins, what a redirect keeps, and who answers a challenge.
@Suite struct UploadPolicyTests {
    private func url(_ text: String) -> URL { URL(string: text)! }

    // MARK: Origin

    @Test(arguments: [
        ("http://127.0.0.1/x", "http://127.0.0.1:80/ok"),
        ("https://Example.COM/a", "https://example.com:443/b"),
        ("HTTP://h:8080/", "http://H:8080/z?q=1"),
    ])
    func theSameOriginWhateverThePortsSpelling(first: String, second: String) {
        #expect(Origin(url(first)) == Origin(url(second)))
        #expect(Origin(url(first)) != nil)
    }

    @Test(arguments: [
        ("http://127.0.0.1/x", "http://localhost/x"),
        ("http://h/", "https://h/"),
        ("http://h/", "http://h:8080/"),
        ("https://h/", "https://h:80/"),
    ])
    func anotherOrigin(first: String, second: String) {
        #expect(Origin(url(first)) != Origin(url(second)))
    }

    @Test func aURLWithoutHostOrKnownPortHasNoOrigin() {
        #expect(Origin(url("file:///tmp/a")) == nil)
        #expect(Origin(url("ftp://h/a")) == nil)
        #expect(Origin(nil) == nil)
    }

    // MARK: Credentials on redirects

    private func request(_ target: String) -> URLRequest {
        var request = URLRequest(url: url(target))
        request.setValue("Basic YWxpY2U6c2VjcmV0", forHTTPHeaderField: "Authorization")
        request.setValue("session=1", forHTTPHeaderField: "Cookie")
        request.setValue("Basic cHJveHk6cA==", forHTTPHeaderField: "Proxy-Authorization")
        request.setValue("kept", forHTTPHeaderField: "X-Tag")
        return request
    }

    @Test(arguments: [
        "http://localhost:8080/landing", "https://127.0.0.1:8080/landing", "http://127.0.0.1:9090/landing",
        "http://evil.example/landing",
    ])
    func credentialsNeverFollowARedirectToAnotherOrigin(target: String) {
        let proposal = RequestMaker(hook: nil, origin: url("http://127.0.0.1:8080/x")).judged(request(target))
        for name in CredentialHeaders.names {
            #expect(proposal.value(forHTTPHeaderField: name) == nil, "\(name) to \(target)")
        }
        #expect(proposal.value(forHTTPHeaderField: "X-Tag") == "kept", "other headers stay")
    }

    /// Random redirects, as a lying server writes them and as Linux URLSession proposes them (the first URL with only
    /// the host and port changed, its user and password kept): whatever the `Location`, a request that leaves the
    /// first URL's origin carries no credential, neither a header nor a user and password in its URL, and one that
    /// stays keeps the first URL's user and password.
    @Test func randomRedirectsNeverCarryACredentialToAnotherOrigin() {
        var generator = SeededGenerator(seed: 45)
        let firsts = [
            "http://ada:pw@127.0.0.1:8080/a/b", "http://ada@127.0.0.1:8080/", "https://u:p%40x@h.example/up",
            "http://127.0.0.1:8080/plain", "http://ada:pw@[::1]:9/x",
        ]
        let locations = [
            "//127.0.0.1:9090/landed", "//127.0.0.1:8080/landed", "/landed", "landed", "../../x", "?q=1", "#f",
            "http://127.0.0.1:8080/y", "http://evil.example/", "https://127.0.0.1:8080/z", "//eve:pw@evil.example/",
            "http://eve:pw@127.0.0.1:8080/", "ftp://h/x", "", " ", "http://", "//", "%zz", "http://[::1]:9/x",
        ]
        var checked = 0
        for _ in 0..<5_000 {
            let first = url(firsts.randomElement(using: &generator)!)
            let location = locations.randomElement(using: &generator)!
            // What Linux URLSession proposes for a scheme-relative `Location`: the first URL, host and port swapped.
            var components = URLComponents(url: first, resolvingAgainstBaseURL: false)!
            components.host = ["127.0.0.1", "evil.example", "h.example"].randomElement(using: &generator)!
            components.port = [nil, 8080, 9090].randomElement(using: &generator)!
            var proposed = URLRequest(url: components.url ?? first)
            proposed.setValue("Basic c2VjcmV0", forHTTPHeaderField: "Authorization")
            proposed.setValue("s=1", forHTTPHeaderField: "Cookie")
            let sent = Bool.random(using: &generator) ? first : url("http://127.0.0.1:8080/hop")
            let shown = RequestMaker(hook: nil, origin: first).judged(
                RequestMaker.aimed(proposed, .init(url: RedirectPolicy.target(of: location, from: sent))))
            guard let target = shown.url else { continue }
            checked += 1
            if Origin(target) != Origin(first) {
                #expect(target.user == nil && target.password == nil, "\(first) → \(location): \(target)")
                #expect(shown.value(forHTTPHeaderField: "Authorization") == nil, "\(first) → \(location)")
                #expect(shown.value(forHTTPHeaderField: "Cookie") == nil)
            } else if first.user != nil, target.user == nil {
                Issue.record("\(first) → \(location): the same origin lost the first URL's user: \(target)")
            }
        }
        #expect(checked > 4_000)
    }

    @Test(arguments: ["http://127.0.0.1:8080/elsewhere", "HTTP://127.0.0.1:8080/x?again", "http://127.0.0.1:80/ok"])
    func aSameOriginRedirectKeepsThem(target: String) {
        let origin = url(target.contains(":80/") ? "http://127.0.0.1/x" : "http://127.0.0.1:8080/x")
        let proposal = RequestMaker(hook: nil, origin: origin).judged(request(target))
        #expect(proposal.value(forHTTPHeaderField: "Authorization") == "Basic YWxpY2U6c2VjcmV0")
        #expect(proposal.value(forHTTPHeaderField: "Cookie") == "session=1")
        #expect(proposal.value(forHTTPHeaderField: "Proxy-Authorization") == "Basic cHJveHk6cA==")
    }

    // MARK: What a redirect does

    @Test func aNilAnswerKeepsTheRedirectAsTheResponse() {
        guard case .keepResponse = RedirectPolicy.decide(statusCode: 307, answer: nil, sent: nil, canResend: true)
        else {
            Issue.record("expected the 3xx as the answer")
            return
        }
    }

    #if !canImport(Darwin)
        @Test(arguments: [307, 308])
        func aRedirectThatKeepsTheBodyIsResentAsTheDelegateReturnedIt(code: Int) throws {
            var sent = URLRequest(url: url("http://127.0.0.1:8080/x"))
            sent.httpMethod = "PUT"
            var answer = URLRequest(url: url("http://127.0.0.1:80/ok"), timeoutInterval: 7)
            answer.httpMethod = "PUT"
            answer.setValue("from-delegate", forHTTPHeaderField: "X-Delegate")
            guard
                case .resend(let delegates, let edit) = RedirectPolicy.decide(
                    statusCode: code, answer: answer, sent: sent, canResend: true)
            else {
                Issue.record("expected a resend")
                return
            }
            #expect(delegates == answer && edit == .method("PUT"))
            let resend = RequestMaker.following(delegates, edit)
            #expect(resend.url == answer.url)
            #expect(resend.value(forHTTPHeaderField: "X-Delegate") == "from-delegate")
            #expect(resend.timeoutInterval == 7)
            #expect(resend.httpMethod == "PUT")
        }

        @Test func aResendThatCannotBeMadeFailsNamingTheRedirect() {
            var answer = URLRequest(url: url("http://127.0.0.1/ok"))
            answer.httpMethod = "POST"
            guard
                case .fail(let error) = RedirectPolicy.decide(
                    statusCode: 308, answer: answer, sent: answer, canResend: false),
                case .redirectNotFollowed(statusCode: 308, let location) = error.reason
            else {
                Issue.record("expected redirectNotFollowed")
                return
            }
            #expect(location == answer.url)
        }

        @Test func aGETAfterARedirectLosesTheHeadersThatDescribedTheBody() {
            var answer = URLRequest(url: url("http://127.0.0.1/ok"))
            answer.httpMethod = "GET"
            answer.setBodyLength(1_000)
            answer.setValue("multipart/form-data; boundary=B", forHTTPHeaderField: "Content-Type")
            guard
                case .follow(let delegates, let edit) = RedirectPolicy.decide(
                    statusCode: 303, answer: answer, sent: nil, canResend: true)
            else {
                Issue.record("expected to follow")
                return
            }
            #expect(edit == .withoutBodyHeaders)
            let request = RequestMaker.following(delegates, edit)
            for name in ["Content-Length", "Content-Type", "Transfer-Encoding", "Expect"] {
                #expect(request.value(forHTTPHeaderField: name) == nil, "\(name)")
            }
        }
    #endif

    // MARK: Who answers a challenge

    @Test func aTaskLevelMethodAnswersEveryChallengeWhereThePlatformCanTell() {
        for method in [NSURLAuthenticationMethodHTTPBasic, "NSURLAuthenticationMethodServerTrust"] {
            #expect(
                ChallengePolicy.methods(for: method, implementsTaskLevel: true, implementsSessionLevel: true)
                    == [.taskLevel])
        }
    }

    @Test(arguments: [
        "NSURLAuthenticationMethodServerTrust", "NSURLAuthenticationMethodClientCertificate",
        NSURLAuthenticationMethodNTLM, NSURLAuthenticationMethodNegotiate,
    ])
    func aSessionWideChallengeGoesToTheSessionLevelMethodWithoutATaskLevelOne(method: String) {
        #expect(
            ChallengePolicy.methods(for: method, implementsTaskLevel: false, implementsSessionLevel: true)
                == [.sessionLevel])
        #expect(
            ChallengePolicy.methods(for: method, implementsTaskLevel: false, implementsSessionLevel: false) == [])
        // Where the platform cannot tell (Linux), the session-level method is asked when the task-level one has
        // no opinion.
        #expect(
            ChallengePolicy.methods(for: method, implementsTaskLevel: nil, implementsSessionLevel: nil)
                == [.taskLevel, .sessionLevel])
    }

    @Test func aRequestChallengeNeverGoesToTheSessionLevelMethod() {
        for method in [NSURLAuthenticationMethodHTTPBasic, NSURLAuthenticationMethodHTTPDigest] {
            #expect(
                ChallengePolicy.methods(for: method, implementsTaskLevel: false, implementsSessionLevel: true) == [])
            #expect(
                ChallengePolicy.methods(for: method, implementsTaskLevel: nil, implementsSessionLevel: nil)
                    == [.taskLevel])
        }
    }
}
