import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a ``PrivateSession`` hands a task's events to: the upload that made the task. The delegate methods are
/// declared once, by the private session; an upload answers in its own terms.
protocol UploadTaskEvents: AnyObject, Sendable {
    /// The task, which its upload did not start itself, sent its first event: it keeps the caller's session alive
    /// from now on.
    func taskBegan()
    /// A new body for the task, which URLSession asks for when it starts and when it resends by itself.
    func bodyStream(for task: URLSessionTask) -> InputStream
    /// URLSession's own count of body bytes sent.
    func sentBody(totalBytesSent: Int64)
    /// A response began (a 401's or a redirect's, or the one that counts).
    func receivedResponse(_ response: URLResponse)
    /// Response body bytes.
    func received(_ data: Data, task: URLSessionTask)
    /// A redirect: `answer` the request to send, or `nil` to keep the 3xx as the answer, within `seconds` (see
    /// ``RedirectDeadline``).
    func redirect(
        task: URLSessionTask, response: HTTPURLResponse, proposed: URLRequest, within seconds: TimeInterval,
        answer: @escaping @Sendable (URLRequest?) -> Void)
    /// An authentication challenge, with the session's credential storage for the default answer.
    func challenge(
        _ challenge: URLAuthenticationChallenge, task: URLSessionTask, storage: URLCredentialStorage?,
        answer: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void)
    /// The task's metrics.
    func collected(_ metrics: URLSessionTaskMetrics, task: URLSessionTask)
    #if canImport(Darwin)
        /// The task waits for connectivity.
        func waitingForConnectivity(task: URLSessionTask)
    #endif
    /// The task ended.
    func taskCompleted(_ task: URLSessionTask, error: (any Error)?)
    /// The caller asks to cancel `task`, which it was handed: `false` when it is not this upload's task.
    func cancel(handedOut task: URLSessionTask) -> Bool
}
