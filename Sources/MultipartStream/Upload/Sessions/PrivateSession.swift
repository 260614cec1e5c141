import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A private session that carries uploads of one caller's session, and its delegate: hands each task's events to
/// the upload that made the task, and closes itself when its ``StateMachine`` says so.
///
/// Private, because Linux URLSession sends task events only to the session's delegate (a task's own delegate hears
/// nothing but `needNewBodyStream`), and an upload needs them all. Its lock is its own: the uploads of another
/// caller's session never take it.
final class PrivateSession: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: `machine` is guarded by `lock`, which only `modify` takes; the rest are constants, and the weak
    // reference is atomic.
    /// The caller's session, whose configuration this session was made from; weak, so that dropping it is enough.
    private(set) weak var callerSession: URLSession?
    /// The caller session's identity, kept after the session itself is gone.
    let key: ObjectIdentifier
    /// The registry that made it, told when it closes.
    private let registry: PrivateSessions
    /// Whether the session carries one task only, on a connection of its own, and is in no registry.
    let isSingleUse: Bool
    /// Set right after `init`, since it needs `self` as its delegate; it holds this delegate until invalidated.
    private var madeSession: URLSession?
    /// The session.
    var session: URLSession { madeSession! }

    private let lock = Lock()
    private var machine: StateMachine

    /// How often an idle session looks at its caller and its idle time: a caller's session says nothing when it is
    /// released or invalidated.
    private static let watchInterval: TimeInterval = 0.1

    /// A session made from `callerSession`'s configuration, reserved for one task about to be made on it.
    init(callerSession: URLSession, registry: PrivateSessions, singleUse: Bool = false) {
        self.callerSession = callerSession
        key = ObjectIdentifier(callerSession)
        self.registry = registry
        isSingleUse = singleUse
        machine = StateMachine(singleUse: singleUse, idleTimeout: Self.nanoseconds(registry.idleTimeout))
        super.init()
        // A background configuration only reaches here for a task whose body fails when resumed, saying why; such a
        // session cannot carry stream uploads.
        let callers = callerSession.configuration.identifier == nil ? callerSession.configuration : .ephemeral
        // No cache: an upload's answers (the form's, an offset, a completion) are never to be taken from one, and on
        // Linux a task of a session with one waits for it on a thread of the lowest priority before it starts, which
        // also delays the second step of a cancel past the task's end (``CancelGate`` waits for it all the same).
        let configuration = (callers.copy() as? URLSessionConfiguration) ?? callers
        if configuration !== callers { configuration.urlCache = nil }
        #if canImport(FoundationNetworking)
            let queue: OperationQueue? = PacedDelegateQueue()
        #else
            let queue: OperationQueue? = nil
        #endif
        madeSession = URLSession(configuration: configuration, delegate: self, delegateQueue: queue)
    }

    private static func nanoseconds(_ interval: TimeInterval) -> UInt64 {
        UInt64(max(0, interval) * 1e9)
    }

    private static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// Applies an event to the machine under the lock, and returns its action for the caller to carry out.
    private func modify<Action>(_ event: (inout StateMachine) -> Action) -> Action {
        lock.withLock { event(&machine) }
    }

    private func act(on action: StateMachine.Action) {
        switch action {
        case .none:
            break
        case .watch:
            DispatchQueue.global().asyncAfter(deadline: .now() + Self.watchInterval) { [weak self] in
                guard let self else { return }
                let callerGone = callerSession == nil
                act(on: modify { $0.watchFired(now: Self.now(), callerGone: callerGone) })
            }
        case .close:
            registry.closed(self)
            // A single-use session was invalidated when its task was made.
            if !isSingleUse { session.finishTasksAndInvalidate() }
        }
    }

    // MARK: What the registry asks

    /// Another task is to be made on the session: `false` when it has closed, and a new one must be made.
    func reserve() -> Bool {
        modify { $0.reserve() }
    }

    /// Routes the events of `task`, made after ``reserve()`` (or `init`), to `upload`; `started` when its upload
    /// resumes it at once (a task handed to the user begins when its first event arrives). A single-use session is
    /// invalidated now, so that it ends with its task.
    func taskMade(_ task: URLSessionTask, of upload: any UploadTaskEvents, started: Bool) {
        act(on: modify { $0.taskMade(task.taskIdentifier, of: upload, started: started, now: Self.now()) })
        if isSingleUse { session.finishTasksAndInvalidate() }
    }

    /// The caller's session is gone: closes now if idle, else once its last task ends.
    func callerGone() {
        act(on: modify { $0.callerGone() })
    }

    /// Cancels the upload of `task`, which the caller was handed, as its upload cancels: `false` when `task` is not
    /// one of this session's.
    func cancel(handedOut task: URLSessionTask) -> Bool {
        modify { $0.uploadOf(task: task.taskIdentifier) }?.cancel(handedOut: task) ?? false
    }

    /// Tests shorten the idle timeout of sessions already open.
    func setIdleTimeout(_ interval: TimeInterval) {
        modify { $0.idleTimeout = Self.nanoseconds(interval) }
    }

    /// The upload of `task`; the first event of a task that was not started by its upload (one handed to the
    /// user) tells the upload it began.
    private func upload(for task: URLSessionTask) -> (any UploadTaskEvents)? {
        let (upload, began) = modify { $0.taskEvent(task.taskIdentifier) }
        if began { upload?.taskBegan() }
        return upload
    }

    // MARK: Events, each handed to the upload of its task

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void
    ) {
        completionHandler(upload(for: task)?.bodyStream(for: task))
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        upload(for: task)?.sentBody(totalBytesSent: totalBytesSent)
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        guard let upload = upload(for: dataTask) else { return completionHandler(.cancel) }
        upload.receivedResponse(response)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        upload(for: dataTask)?.received(data, task: dataTask)
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        let answer = task.redirectAnswer(completionHandler)
        guard let upload = upload(for: task) else { return answer(nil) }
        upload.redirect(
            task: task, response: response, proposed: request,
            within: RedirectDeadline.seconds(for: task, in: session.configuration), answer: answer)
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        guard let upload = upload(for: task) else { return completionHandler(.cancelAuthenticationChallenge, nil) }
        upload.challenge(
            challenge, task: task, storage: session.configuration.urlCredentialStorage, answer: completionHandler)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        upload(for: task)?.collected(metrics, task: task)
    }

    #if canImport(Darwin)
        func urlSession(_ session: URLSession, taskIsWaitingForConnectivity task: URLSessionTask) {
            upload(for: task)?.waitingForConnectivity(task: task)
        }
    #endif

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        // The upload may start its next task (a redirect) first, so the session is never idle in between.
        upload(for: task)?.taskCompleted(task, error: error)
        let callerGone = callerSession == nil
        act(on: modify { $0.taskEnded(task.taskIdentifier, callerGone: callerGone, now: Self.now()) })
    }
}
