import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The delegate of one private session: hands each task's events to the upload that made the task.
///
/// Private, because Linux URLSession sends task events only to the session's delegate (a task's own delegate hears
/// nothing but `needNewBodyStream`), and an upload needs them all. Its tables are guarded by ``SessionPool/lock``.
final class TaskEventRouter: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: the mutable properties are guarded by SessionPool.lock; the rest are constants.
    /// The caller's session, whose configuration this session was made from; weak, so that dropping it is enough.
    private(set) weak var callerSession: URLSession?
    /// The pool's key: the caller session's identity, kept after the session itself is gone.
    let key: ObjectIdentifier
    /// Whether this session carries one task only, on a connection of its own, and is in no pool.
    let isSingleUse: Bool
    /// Set right after `init`, since it needs `self` as its delegate; it holds this delegate until invalidated.
    private var madeSession: URLSession?
    /// The session.
    var session: URLSession { madeSession! }

    private var uploads: [Int: any UploadTaskEvents] = [:]
    /// The tasks that have begun (resumed by their upload, or seen to send); a task that is never resumed keeps the
    /// session open no more than it keeps the caller's session alive.
    private var startedTasks: Set<Int> = []
    /// Tasks being made on the session now, outside the lock.
    var pendingTasks = 0
    /// When the session last became idle, in uptime nanoseconds; `nil` while it is not.
    var idleSince: UInt64?

    init(callerSession: URLSession, singleUse: Bool = false) {
        self.callerSession = callerSession
        key = ObjectIdentifier(callerSession)
        isSingleUse = singleUse
        super.init()
        // A background configuration only reaches here for a form that fails when resumed (its appendError says
        // why); such a session cannot carry stream uploads.
        let configuration = callerSession.configuration.identifier == nil ? callerSession.configuration : .ephemeral
        madeSession = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
    }

    /// Whether no task has begun and none is being made (guarded by `lock`).
    var isIdle: Bool { startedTasks.isEmpty && pendingTasks == 0 }

    /// Routes `task`'s events to `upload` (guarded by `lock`).
    func register(_ task: URLSessionTask, of upload: any UploadTaskEvents, started: Bool) {
        uploads[task.taskIdentifier] = upload
        if started {
            startedTasks.insert(task.taskIdentifier)
            idleSince = nil
        }
    }

    /// Invalidates the session once its tasks end; it then lets go of this delegate. Tasks that never began may
    /// still be resumed: URLSession runs them, and their events still come here.
    func close() {
        session.finishTasksAndInvalidate()
    }

    /// The upload of `task`; the first event of a task that was not started by its upload (one handed to the
    /// user) tells the upload it began.
    private func upload(for task: URLSessionTask) -> (any UploadTaskEvents)? {
        let (upload, isFirstEvent) = SessionPool.lock.withLock { () -> ((any UploadTaskEvents)?, Bool) in
            let isFirstEvent = startedTasks.insert(task.taskIdentifier).inserted
            if isFirstEvent { idleSince = nil }
            return (uploads[task.taskIdentifier], isFirstEvent)
        }
        if isFirstEvent { upload?.taskBegan() }
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
        upload.receivedResponse()
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        upload(for: dataTask)?.received(data)
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        guard let upload = upload(for: task) else { return completionHandler(nil) }
        upload.redirect(task: task, response: response, proposed: request, answer: completionHandler)
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
        let toClose = SessionPool.lock.withLock { () -> TaskEventRouter? in
            uploads[task.taskIdentifier] = nil
            startedTasks.remove(task.taskIdentifier)
            return SessionPool.taskEnded(in: self)
        }
        toClose?.close()
    }
}
