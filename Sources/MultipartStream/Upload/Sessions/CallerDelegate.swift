import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The caller's session delegate, asked as URLSession would ask it about its own tasks: on the session's delegate
/// queue, only through the methods it has, with the session-level fallback for session-wide challenges. Nothing
/// here waits for that queue (it may be the main queue, busy with the caller): answers come back through handlers.
///
/// Holds the caller's session weakly until ``pin()``, so that a task that is never resumed keeps nothing alive.
final class CallerDelegate: @unchecked Sendable {
    // @unchecked: `pinned` is guarded by `lock`, which only `withPinned` takes; the weak reference is atomic.
    private let lock = Lock()
    private weak var weakSession: URLSession?
    private var pinned: URLSession?

    init(_ session: URLSession) {
        weakSession = session
    }

    /// Applies `change` to the pinned session under the lock: the one place that takes it.
    private func withPinned<Result>(_ change: (inout URLSession?) -> Result) -> Result {
        lock.withLock { change(&pinned) }
    }

    /// The caller's session, while it exists.
    var session: URLSession? {
        withPinned { $0 ?? weakSession }
    }

    /// Keeps the caller's session alive while an upload runs, as URLSession keeps a task's session.
    func pin() {
        withPinned { $0 = $0 ?? weakSession }
    }

    /// Lets the caller's session go: the upload has ended.
    func unpin() {
        withPinned { $0 = nil }
    }

    /// Runs `call` with the session and its delegate on the session's delegate queue, or `otherwise` at once where
    /// there is no delegate to ask.
    private func ask(
        _ call: @escaping @Sendable (URLSession, any URLSessionDelegate) -> Void,
        otherwise: () -> Void
    ) {
        guard let session, let delegate = session.delegate else { return otherwise() }
        session.delegateQueue.addOperation { call(session, delegate) }
    }

    /// ``ask(_:otherwise:)`` for the task-level methods: `otherwise` where the delegate has none.
    private func askTaskDelegate(
        _ call: @escaping @Sendable (URLSession, any URLSessionTaskDelegate) -> Void,
        otherwise: () -> Void
    ) {
        guard let session, let delegate = session.delegate as? URLSessionTaskDelegate else { return otherwise() }
        session.delegateQueue.addOperation { call(session, delegate) }
    }

    // MARK: Redirects

    /// Asks whether to follow a redirect; without an opinion the answer is `request`.
    func redirect(
        _ response: HTTPURLResponse,
        to request: URLRequest,
        task: URLSessionTask,
        answer: @escaping @Sendable (URLRequest?) -> Void
    ) {
        askTaskDelegate { session, delegate in
            #if canImport(Darwin)
                // Delegate methods are optional in Objective-C.
                guard let method = delegate.urlSession(_:task:willPerformHTTPRedirection:newRequest:completionHandler:)
                else { return answer(request) }
                method(session, task, response, request, answer)
            #else
                // In swift-corelibs-foundation the protocol's default follows the redirect.
                delegate.urlSession(
                    session, task: task, willPerformHTTPRedirection: response, newRequest: request,
                    completionHandler: answer)
            #endif
        } otherwise: {
            answer(request)
        }
    }

    // MARK: Challenges

    /// Asks about a challenge (see ``ChallengePolicy/methods(for:implementsTaskLevel:implementsSessionLevel:)``);
    /// `.performDefaultHandling` when no method had an opinion.
    func challenge(
        _ challenge: URLAuthenticationChallenge,
        task: URLSessionTask,
        answer: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        guard let delegate = session?.delegate else { return answer(.performDefaultHandling, nil) }
        let methods = ChallengePolicy.methods(
            for: challenge.protectionSpace.authenticationMethod,
            implementsTaskLevel: Self.implementsTaskLevelChallenge(delegate),
            implementsSessionLevel: Self.implementsSessionLevelChallenge(delegate))
        ask(methods[...], challenge, task: task, answer: answer)
    }

    private func ask(
        _ methods: ArraySlice<ChallengePolicy.Method>,
        _ challenge: URLAuthenticationChallenge,
        task: URLSessionTask,
        answer: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        guard let method = methods.first else { return answer(.performDefaultHandling, nil) }
        let rest = methods.dropFirst()
        let next: @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void = { disposition, credential in
            guard disposition == .performDefaultHandling, !rest.isEmpty else { return answer(disposition, credential) }
            self.ask(rest, challenge, task: task, answer: answer)
        }
        ask { session, delegate in
            switch method {
            case .taskLevel:
                // A delegate without the task-level methods gets no `.taskLevel` from ChallengePolicy.
                guard let delegate = delegate as? URLSessionTaskDelegate else {
                    return next(.performDefaultHandling, nil)
                }
                #if canImport(Darwin)
                    guard let call = delegate.urlSession(_:task:didReceive:completionHandler:) else {
                        return next(.performDefaultHandling, nil)
                    }
                    call(session, task, challenge, next)
                #else
                    delegate.urlSession(session, task: task, didReceive: challenge, completionHandler: next)
                #endif
            case .sessionLevel:
                #if canImport(Darwin)
                    guard let call = delegate.urlSession(_:didReceive:completionHandler:) else {
                        return next(.performDefaultHandling, nil)
                    }
                    call(session, challenge, next)
                #else
                    delegate.urlSession(session, didReceive: challenge, completionHandler: next)
                #endif
            }
        } otherwise: {
            answer(.performDefaultHandling, nil)
        }
    }

    /// Whether the delegate has the task-level challenge method; `nil` where the platform cannot tell.
    private static func implementsTaskLevelChallenge(_ delegate: any URLSessionDelegate) -> Bool? {
        guard let delegate = delegate as? URLSessionTaskDelegate else { return false }
        #if canImport(Darwin)
            return delegate.urlSession(_:task:didReceive:completionHandler:) != nil
        #else
            return nil
        #endif
    }

    /// Whether the delegate has the session-level challenge method; `nil` where the platform cannot tell.
    private static func implementsSessionLevelChallenge(_ delegate: any URLSessionDelegate) -> Bool? {
        #if canImport(Darwin)
            return delegate.urlSession(_:didReceive:completionHandler:) != nil
        #else
            return nil
        #endif
    }

    // MARK: Task events the caller's delegate may want

    /// Hands the task's metrics to the delegate, if it takes them.
    func metrics(_ metrics: URLSessionTaskMetrics, task: URLSessionTask) {
        askTaskDelegate { session, delegate in
            #if canImport(Darwin)
                delegate.urlSession?(session, task: task, didFinishCollecting: metrics)
            #else
                delegate.urlSession(session, task: task, didFinishCollecting: metrics)
            #endif
        } otherwise: {
        }
    }

    #if canImport(Darwin)
        /// Tells the delegate that the task waits for connectivity, if it listens (Apple platforms only: Linux
        /// URLSession neither waits for connectivity nor has the method).
        func waitingForConnectivity(task: URLSessionTask) {
            askTaskDelegate { session, delegate in
                delegate.urlSession?(session, taskIsWaitingForConnectivity: task)
            } otherwise: {
            }
        }
    #endif
}
