import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartQueue
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// ``CallerDelegate``: the caller's delegate asked on its own queue, through the methods it has. Linux URLSession
    /// never sends server-trust or client-certificate challenges, so these are handed to the forwarding directly.
    ///
    /// Among ``URLSessionSuites``: the sessions it makes (never invalidated, as a caller's may be) were counted by a
    /// cancel storm's check, beside them, that it leaves none open.
    @Suite struct CallerDelegateTests {
        private let queue: OperationQueue = {
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            queue.name = "caller's delegate queue"
            return queue
        }()

        private func challenge(_ method: String) -> URLAuthenticationChallenge {
            let space = URLProtectionSpace(
                host: "127.0.0.1", port: 443, protocol: "https", realm: nil, authenticationMethod: method)
            return URLAuthenticationChallenge(
                protectionSpace: space, proposedCredential: nil, previousFailureCount: 0, failureResponse: nil,
                error: nil, sender: NoSender())
        }

        private let task = URLSession(configuration: .ephemeral).dataTask(with: URL(string: "http://127.0.0.1:9/")!)

        private func answer(
            _ challenge: URLAuthenticationChallenge,
            by delegate: URLSessionDelegate
        ) async -> (URLSession.AuthChallengeDisposition, String?) {
            let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: queue)
            defer { session.invalidateAndCancel() }
            let caller = CallerDelegate(session)
            return await withCheckedContinuation { continuation in
                caller.challenge(challenge, task: task) { disposition, credential in
                    continuation.resume(returning: (disposition, credential?.user))
                }
            }
        }

        @Test(arguments: [
            "NSURLAuthenticationMethodServerTrust", "NSURLAuthenticationMethodClientCertificate",
            NSURLAuthenticationMethodNTLM, NSURLAuthenticationMethodNegotiate,
        ])
        func aSessionWideChallengeReachesADelegateWithOnlyTheSessionLevelMethod(method: String) async {
            let delegate = SessionLevelOnly(queue: queue)
            let (disposition, user) = await answer(challenge(method), by: delegate)
            #expect(disposition == .useCredential, "the delegate answered, not the default handling")
            #expect(user == "pinned")
            #expect(delegate.calls == [true], "asked once, on the caller's delegate queue")
        }

        @Test func aRequestChallengeDoesNotReachTheSessionLevelMethod() async {
            let delegate = SessionLevelOnly(queue: queue)
            let (disposition, _) = await answer(challenge(NSURLAuthenticationMethodHTTPBasic), by: delegate)
            #expect(disposition == .performDefaultHandling)
            #expect(delegate.calls.isEmpty)
        }

        @Test func aTaskLevelMethodAnswersOnTheCallersQueue() async {
            let delegate = RecordingDelegate(queue: queue)
            let (disposition, user) = await answer(challenge("NSURLAuthenticationMethodServerTrust"), by: delegate)
            #expect(disposition == .useCredential)
            #expect(user == "u")
            #expect(delegate.calls == [true])
        }

        @Test func aDelegateWithNeitherMethodLeavesItToTheDefault() async {
            let (disposition, _) = await answer(challenge("NSURLAuthenticationMethodServerTrust"), by: Silent())
            #expect(disposition == .performDefaultHandling)
        }

        @Test func metricsAreHandedOverOnTheCallersQueue() async throws {
            let delegate = RecordingDelegate(queue: queue)
            let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: queue)
            defer { session.invalidateAndCancel() }
            CallerDelegate(session).metrics(URLSessionTaskMetrics(), task: task)
            try await Stopwatch.wait(atMost: 5) { delegate.metrics.isEmpty }
            #expect(delegate.metrics == [true])
        }

        @Test func aDelegateWithoutAMetricsMethodIsNotAsked() async throws {
            let delegate = SessionLevelOnly(queue: queue)
            let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: queue)
            defer { session.invalidateAndCancel() }
            CallerDelegate(session).metrics(URLSessionTaskMetrics(), task: task)
            // Whatever the caller's queue runs after the forwarding has run the forwarding too.
            await withCheckedContinuation { continuation in queue.addOperation { continuation.resume() } }
            #expect(delegate.calls.isEmpty)
        }

        @Test func aRedirectIsAskedOnTheCallersQueueAndItsAnswerComesBack() async {
            let delegate = RecordingDelegate(queue: queue)
            let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: queue)
            defer { session.invalidateAndCancel() }
            let response = HTTPURLResponse(
                url: URL(string: "http://127.0.0.1/a")!, statusCode: 307, httpVersion: "HTTP/1.1", headerFields: [:])!
            let answer: URLRequest? = await withCheckedContinuation { continuation in
                CallerDelegate(session).redirect(
                    response, to: URLRequest(url: URL(string: "http://127.0.0.1/b")!), task: task
                ) {
                    continuation.resume(returning: $0)
                }
            }
            #expect(answer?.value(forHTTPHeaderField: "X-Tag") == "from-delegate")
            #expect(delegate.calls == [true])
        }
    }
}

/// A challenge sender that is never used: the answer goes through the completion handler.
private final class NoSender: NSObject, URLAuthenticationChallengeSender {
    func use(_ credential: URLCredential, for challenge: URLAuthenticationChallenge) {}
    func continueWithoutCredential(for challenge: URLAuthenticationChallenge) {}
    func cancel(_ challenge: URLAuthenticationChallenge) {}
    func performDefaultHandling(for challenge: URLAuthenticationChallenge) {}
    func rejectProtectionSpaceAndContinue(with challenge: URLAuthenticationChallenge) {}
}

/// How certificate pinning is usually written: only the session-level challenge method.
private final class SessionLevelOnly: QueueRecorder, URLSessionTaskDelegate, @unchecked Sendable {
    func urlSession(
        _ session: URLSession,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        record()
        completionHandler(.useCredential, URLCredential(user: "pinned", password: "p", persistence: .none))
    }
}

private final class Silent: NSObject, URLSessionTaskDelegate, Sendable {}
