import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// Every request an upload sends is made in one place (``RequestMaker``), so a credential is judged the same
    /// whatever gave it and whatever path sent it: every way to send × every redirect × every `Location` form × every
    /// source of the credential. What the servers logged decides, never the library's own account. Among
    /// ``URLSessionSuites``, though nothing here blocks URLSession's queue: its 400 uploads beside them once made a
    /// 64 MiB answer there take 159 s rather than 3 s.
    @Suite struct OneWayOutTests {
        /// Where a credential comes from.
        enum Source: CaseIterable, CustomStringConvertible {
            /// Set on the caller's `URLRequest`.
            case header
            /// Given by the `headers:` hook.
            case hook
            /// A user and password written in the URL, which libcurl sends as `Authorization: Basic`.
            case userInfo

            var description: String { "\(self == .header ? "header" : self == .hook ? "hook" : "user info")" }
        }

        typealias Path = UploadPath

        /// Where `path`'s credentials may come from: only `upload` has a hook.
        private func sources(of path: Path) -> [Source] {
            path.isUpload ? Source.allCases : [.header, .userInfo]
        }

        static let bearer = "Bearer T"
        static let cookie = "session=1"
        static let proxy = "Basic cHJveHk6cA=="
        /// `ada:pw`, as libcurl sends it.
        static let basic = "Basic YWRhOnB3"

        private func form() -> MultipartFormData {
            var form = MultipartFormData()
            form.append("value", name: "field")
            form.append(Data(repeating: 7, count: 3_000), name: "file", fileName: "f.bin")
            return form
        }

        /// The `Location`s to test and whether each leaves the first origin: another port, written absolute and
        /// scheme-relative; another host name for the same server; the same origin, absolute and relative. Each is
        /// tagged so that the request that lands is found in the logs.
        private func locations(first: UploadServer, other: UploadServer, tag: String) -> [(String, leaves: Bool)] {
            let (a, b) = (first.url().port!, other.url().port!)
            return [
                ("http://127.0.0.1:\(b)/landed?\(tag)", true), ("//127.0.0.1:\(b)/landed?\(tag)", true),
                ("http://localhost:\(a)/landed?\(tag)", true), ("http://127.0.0.1:\(a)/landed?\(tag)", false),
                ("/landed?\(tag)", false),
            ]
        }

        /// The request and hook a caller writes for `source`.
        private func request(to url: URL, from source: Source, path: Path) -> (URLRequest, MultipartHeaders?) {
            let url =
                source == .userInfo
                ? URL(string: url.absoluteString.replacingOccurrences(of: "http://", with: "http://ada:pw@"))! : url
            var request =
                path == .streamedDelegate ? URLRequest(url: url, multipartFormData: form()) : URLRequest(url: url)
            let credentials = [
                "Authorization": Self.bearer, "Cookie": Self.cookie, "Proxy-Authorization": Self.proxy,
            ]
            switch source {
            case .header:
                for (name, value) in credentials { request.setValue(value, forHTTPHeaderField: name) }
                return (request, nil)
            case .hook:
                return (request, .fresh { _ in credentials })
            case .userInfo:
                return (request, nil)
            }
        }

        /// Sends the form `path`'s way, trusting other origins or not; its error, if any (a task cannot resend after a
        /// 307 on Linux, and says so).
        private func send(
            _ request: URLRequest, headers: MultipartHeaders?, path: Path, trusting: Bool = false
        ) async -> (any Error)? {
            let form = form()
            switch path {
            case .task where !trusting: return await multipartTaskError(request, form: form)
            case .streamedDelegate where !trusting: return await streamedDelegateError(request)
            case .task:
                return await withCheckedContinuation { continuation in
                    URLSession.shared.multipartUploadTask(with: request, form: form, credentialsToOtherOrigins: true) {
                        _, _, error in continuation.resume(returning: error)
                    }.resume()
                }
            case .streamedDelegate:
                return await withCheckedContinuation { continuation in
                    let delegate = MultipartStreamedUploadDelegate(credentialsToOtherOrigins: true) { _, _, _, error in
                        continuation.resume(returning: error)
                    }
                    let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
                    session.uploadTask(withStreamedRequest: request).resume()
                    session.finishTasksAndInvalidate()
                }
            default: break
            }
            do {
                _ = try await URLSession.shared.upload(
                    form, with: request, strategy: path.strategy, headers: headers, credentialsToOtherOrigins: trusting)
                return nil
            } catch {
                return error
            }
        }

        /// What a request that landed must carry: everything from its own origin, nothing from another.
        private func expectCredentials(
            _ landed: UploadServer.LoggedRequest, from source: Source, leaves: Bool, _ what: String
        ) {
            switch source {
            case .header, .hook:
                #expect(landed.authorization == (leaves ? nil : Self.bearer), "\(what): \(landed)")
                #expect(landed.cookie == (leaves ? nil : Self.cookie), "\(what): \(landed)")
                #expect(landed.proxyAuthorization == (leaves ? nil : Self.proxy), "\(what): \(landed)")
            case .userInfo:
                #expect(landed.authorization == (leaves ? nil : Self.basic), "\(what): \(landed)")
            }
        }

        @Test(arguments: [301, 302, 303, 307, 308])
        func aCredentialReachesItsOwnOriginAndNoOtherOnEveryPath(code: Int) async throws {
            let (first, other) = (try await UploadServer(), try await UploadServer())
            var cases = 0
            for path in Path.allCases {
                for source in sources(of: path) {
                    for index in 0..<5 {
                        cases += 1
                        let tag = "case=\(cases)"
                        let (location, leaves) = locations(first: first, other: other, tag: tag)[index]
                        let redirect = first.url(
                            "/redirect/\(code)?to="
                                + location.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
                        let (request, hook) = self.request(to: redirect, from: source, path: path)
                        let error = await send(request, headers: hook, path: path)
                        let what = "\(path), \(code) to \(location), credential from the \(source)"
                        let landed = try await (first.log() + other.log()).filter {
                            $0.path == "/landed" && $0.query == "?\(tag)"
                        }
                        for request in landed { expectCredentials(request, from: source, leaves: leaves, what) }
                        #if !canImport(Darwin)
                            if code >= 307 && (path == .task || path == .streamedDelegate) {
                                #expect(error != nil, "\(what): a task cannot send the form again on Linux")
                                #expect(landed.isEmpty, "\(what): \(landed)")
                                continue
                            }
                        #endif
                        #expect(
                            !landed.isEmpty, "\(what): the redirect was not followed (\(String(describing: error)))")
                    }
                }
            }
            #expect(cases == 16 * 5)
        }

        /// Trust is an option of every way to send, not only of a resumable upload: with `credentialsToOtherOrigins`, a
        /// credential from any source reaches the other origin a redirect leads to, as curl's `--location-trusted`.
        @Test(arguments: [302, 307])
        func aTrustedCredentialReachesAnotherOriginOnEveryPath(code: Int) async throws {
            let (first, other) = (try await UploadServer(), try await UploadServer())
            var cases = 0
            for path in Path.allCases {
                for source in sources(of: path) {
                    cases += 1
                    let tag = "trusted=\(cases)"
                    let location = "http://127.0.0.1:\(other.url().port!)/landed?\(tag)"
                    let redirect = first.url(
                        "/redirect/\(code)?to=" + location.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                    )
                    let (request, hook) = self.request(to: redirect, from: source, path: path)
                    let error = await send(request, headers: hook, path: path, trusting: true)
                    let what = "\(path), \(code), credential from the \(source), trusted"
                    let landed = try await other.log().filter { $0.path == "/landed" && $0.query == "?\(tag)" }
                    #if !canImport(Darwin)
                        if code >= 307 && (path == .task || path == .streamedDelegate) {
                            #expect(
                                error != nil && landed.isEmpty, "\(what): a task cannot send the form again on Linux")
                            continue
                        }
                    #endif
                    #expect(!landed.isEmpty, "\(what): not followed (\(String(describing: error)))")
                    for request in landed { expectCredentials(request, from: source, leaves: false, what) }
                }
            }
            #expect(cases == 16)
        }

        /// A resumable upload the server puts on another origin: the `PATCH` and `HEAD` there carry no credential,
        /// whatever gave it, unless the caller trusts other origins; every request to the first origin carries it; the
        /// form arrives whole either way.
        @Test(arguments: [false, true])
        func aResumableUploadOnAnotherOriginGetsNoCredentialUnlessTrusted(trusted: Bool) async throws {
            for source in Source.allCases {
                let server = try await DraftServer()
                var form = MultipartFormData()
                form.append(Data(repeating: 9, count: 200_000), name: "file", fileName: "f.bin")
                let start = server.url(scenario: "other-origin")
                let url =
                    source == .userInfo
                    ? URL(string: start.absoluteString.replacingOccurrences(of: "http://", with: "http://ada:pw@"))!
                    : start
                var request = URLRequest(url: url)
                var hook: MultipartHeaders?
                let expected = source == .userInfo ? Self.basic : Self.bearer
                switch source {
                case .header:
                    request.setValue(Self.bearer, forHTTPHeaderField: "Authorization")
                    request.setValue(Self.cookie, forHTTPHeaderField: "Cookie")
                case .hook: hook = .fresh { _ in ["Authorization": Self.bearer, "Cookie": Self.cookie] }
                case .userInfo: break
                }
                // Created first, as a form over 1 MiB is: the upload resource on the other origin is where the rule
                // is tried.
                let policy = MultipartResumption(credentialsToOtherOrigins: trusted, singleRequestLimit: 0)
                _ = try await URLSession.shared.upload(
                    form, with: request, strategy: .resumable(policy), headers: hook, acceptableStatusCodes: 200..<300)
                let log = try server.log()
                let away = log.filter { $0.port == server.alternatePort }
                let home = log.filter { $0.port == server.port }
                let what = "\(source), trusted: \(trusted)"
                #expect(away.contains { $0.method == "PATCH" } && !home.isEmpty, "\(what): \(log)")
                #expect(home.allSatisfy { $0.authorization == expected }, "\(what): \(home)")
                #expect(away.allSatisfy { $0.authorization == (trusted ? expected : nil) }, "\(what): \(away)")
                if source != .userInfo {
                    #expect(away.allSatisfy { $0.cookie == (trusted ? Self.cookie : nil) }, "\(what): \(away)")
                }
                #expect(try server.forms().count == 1)
            }
        }
    }
}
