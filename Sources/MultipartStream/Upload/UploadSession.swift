import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The private session that carries every upload made through one caller's session, so that they share its
/// connections, and that hands each task's events to the upload that made the task.
///
/// Private, because Linux URLSession sends task events only to the session's delegate (a task's own delegate hears
/// nothing but `needNewBodyStream`), and an upload needs them all. Made from the caller's configuration when its
/// first upload starts; invalidated once it has carried no upload for ``idleTimeout``, so it never outlives the
/// caller's use of it by more than that, whether or not the caller's session was invalidated.
final class UploadSession: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: all mutable state, of every instance and of the registry, is guarded by `lock`.
    private static let lock = Lock()
    nonisolated(unsafe) private static var registry: [ObjectIdentifier: UploadSession] = [:]
    /// How long a session with no upload in flight stays open for the next one. Node and many servers close idle
    /// connections after 5 seconds; 30 keeps the rest. Tests shorten it, from other threads than URLSession's.
    static var idleTimeout: TimeInterval {
        get { lock.withLock { storedIdleTimeout } }
        set { lock.withLock { storedIdleTimeout = newValue } }
    }
    nonisolated(unsafe) private static var storedIdleTimeout: TimeInterval = 30

    /// The caller's session, whose delegate hears authentication challenges; weak, so that dropping it is enough.
    private(set) weak var callerSession: URLSession?
    /// The registry's key: the caller session's identity, kept after the session itself is gone.
    private let key: ObjectIdentifier
    /// Set right after `init`, since it needs `self` as its delegate; it holds this delegate until invalidated.
    private var madeSession: URLSession?
    private var session: URLSession { madeSession! }
    /// Tasks being made now, outside the lock: the session is not idle while there are any.
    private var pendingTasks = 0
    private var uploads: [Int: any UploadTaskEvents] = [:]
    /// The tasks that have begun (resumed by the upload, or seen to send); a task that is never resumed keeps the
    /// session from closing no more than it keeps the caller's session alive.
    private var startedTasks: Set<Int> = []
    /// Changes whenever an upload starts or the last one ends, so that an idle timer knows it is stale.
    private var generation = 0

    /// Whether this session carries one task only, on a connection of its own, and is in no registry.
    private var isSingleUse = false

    private init(callerSession: URLSession) {
        self.callerSession = callerSession
        key = ObjectIdentifier(callerSession)
    }

    /// A new private session for `callerSession`.
    private static func makeSession(for callerSession: URLSession) -> UploadSession {
        let uploadSession = UploadSession(callerSession: callerSession)
        // A background configuration only reaches here for a form that fails when resumed (its appendError says
        // why); such a session cannot carry stream uploads.
        let configuration =
            callerSession.configuration.identifier == nil ? callerSession.configuration : .ephemeral
        uploadSession.madeSession = URLSession(
            configuration: configuration, delegate: uploadSession, delegateQueue: nil)
        return uploadSession
    }

    /// The task that `make` makes on the private session of `callerSession`, whose events go to `upload`;
    /// `started` when the upload resumes it at once.
    ///
    /// URLSession is called outside `lock`: making a task waits for URLSession's queue, which a caller stream
    /// blocked in `read` may hold, and every other upload's events must go on meanwhile.
    static func makeTask<Task: URLSessionTask>(
        for upload: any UploadTaskEvents,
        of callerSession: URLSession,
        started: Bool,
        _ make: (URLSession) -> Task
    ) -> Task {
        if upload.sendsBodyOnce { return makeSingleUseTask(for: upload, of: callerSession, make) }
        let key = ObjectIdentifier(callerSession)
        /// The caller's open session, reserved so that the idle timer leaves it open; `nil` if there is none.
        func reserveOpenSession() -> UploadSession? {
            guard let existing = registry[key], existing.callerSession === callerSession else { return nil }
            existing.pendingTasks += 1
            existing.generation += 1
            return existing
        }
        var uploadSession: UploadSession
        if let open = lock.withLock({ reserveOpenSession() }) {
            uploadSession = open
        } else {
            let made = makeSession(for: callerSession)
            let (open, stale) = lock.withLock { () -> (UploadSession?, UploadSession?) in
                // Another upload may have made one meanwhile.
                if let open = reserveOpenSession() { return (open, nil) }
                // The identifier of a session that is gone can come back for a new one.
                let stale = registry[key]
                made.pendingTasks = 1
                registry[key] = made
                return (nil, stale)
            }
            stale?.session.finishTasksAndInvalidate()
            if let open {
                made.session.finishTasksAndInvalidate()
                uploadSession = open
            } else {
                uploadSession = made
            }
        }
        let task = make(uploadSession.session)
        let idleGeneration = lock.withLock {
            uploadSession.pendingTasks -= 1
            uploadSession.uploads[task.taskIdentifier] = upload
            if started { uploadSession.startedTasks.insert(task.taskIdentifier) }
            return uploadSession.idleGeneration()
        }
        if started { upload.taskStarted() }
        if let idleGeneration { uploadSession.closeWhenIdle(since: idleGeneration) }
        return task
    }

    /// A task on a private session of its own, whose connection no other request used before: libcurl sends a
    /// request again by itself when a reused connection dies under it, and a part of a resumable upload sent again
    /// at an offset the server has moved past is a conflict that makes a server (SwiftNIO's) drop the whole upload.
    /// The session is invalidated at once, so that it ends with its task.
    private static func makeSingleUseTask<Task: URLSessionTask>(
        for upload: any UploadTaskEvents,
        of callerSession: URLSession,
        _ make: (URLSession) -> Task
    ) -> Task {
        let single = makeSession(for: callerSession)
        single.isSingleUse = true
        let task = make(single.session)
        lock.withLock {
            single.uploads[task.taskIdentifier] = upload
            single.startedTasks.insert(task.taskIdentifier)
        }
        upload.taskStarted()
        single.session.finishTasksAndInvalidate()
        return task
    }

    /// Whether `callerSession` has a private session open now.
    static func isOpen(for callerSession: URLSession) -> Bool {
        lock.withLock { registry[ObjectIdentifier(callerSession)]?.callerSession === callerSession }
    }

    /// The upload of `task`, which has begun if it sends events; the first event of a caller's task pins the
    /// caller's session for the upload.
    private func upload(for task: URLSessionTask) -> (any UploadTaskEvents)? {
        let (upload, isFirstEvent) = Self.lock.withLock {
            (uploads[task.taskIdentifier], startedTasks.insert(task.taskIdentifier).inserted)
        }
        if isFirstEvent { upload?.taskStarted() }
        return upload
    }

    /// A new generation if no task has begun and none is being made (guarded by `lock`), else `nil`.
    private func idleGeneration() -> Int? {
        guard startedTasks.isEmpty, pendingTasks == 0 else { return nil }
        generation += 1
        return generation
    }

    /// Forgets the task's upload; once no task is left that began, closes the session after ``idleTimeout``.
    private func taskEnded(_ task: URLSessionTask) {
        let generation: Int? = Self.lock.withLock {
            uploads[task.taskIdentifier] = nil
            startedTasks.remove(task.taskIdentifier)
            return isSingleUse ? nil : idleGeneration()
        }
        if let generation { closeWhenIdle(since: generation) }
    }

    /// Closes the session after ``idleTimeout`` unless a task is made or begins first. Tasks that never began stay
    /// registered: URLSession lets them run if they are resumed later, and their events still come here.
    private func closeWhenIdle(since generation: Int) {
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.idleTimeout) { [self] in
            let isIdle = Self.lock.withLock {
                guard self.generation == generation, startedTasks.isEmpty, pendingTasks == 0 else { return false }
                if Self.registry[key] === self { Self.registry[key] = nil }
                return true
            }
            // Invalidated outside the lock; the session then lets go of this delegate.
            if isIdle { session.finishTasksAndInvalidate() }
        }
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
        taskEnded(task)
    }
}

/// What ``UploadSession`` hands a task's events to: the upload that made the task. The delegate methods are
/// declared once, by the session; an upload answers in its own terms.
protocol UploadTaskEvents: AnyObject, Sendable {
    /// Whether each of its task's bodies may go out once only: its tasks then get a session of their own.
    var sendsBodyOnce: Bool { get }
    /// The task began: it keeps the caller's session alive from now on.
    func taskStarted()
    /// A new body for the task, which URLSession asks for when it starts and when it resends by itself.
    func bodyStream(for task: URLSessionTask) -> InputStream
    /// URLSession's own count of body bytes sent.
    func sentBody(totalBytesSent: Int64)
    /// A response began (a 401's or a redirect's, or the one that counts).
    func receivedResponse()
    /// Response body bytes.
    func received(_ data: Data)
    /// A redirect: `answer` the request to send, or `nil` to keep the 3xx as the answer.
    func redirect(
        task: URLSessionTask, response: HTTPURLResponse, proposed: URLRequest,
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
}

extension MultipartUpload: UploadTaskEvents {}
