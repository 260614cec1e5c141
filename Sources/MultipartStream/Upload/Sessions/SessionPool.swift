import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The private sessions that carry uploads: one per caller session, made from its configuration on its first
/// upload and shared by that session's uploads, so that they share its connections; and single-use ones, for a
/// request whose body may go out once only.
///
/// A shared private session closes once it carries no upload that began and either its caller's session is gone
/// or it has been idle for ``idleTimeout``: a session made for one upload and released after it takes its private
/// session's connections and descriptors with it, as plain URLSession's do. Whether a caller's session is gone is
/// seen when the next task is made and by a watch that runs while a private session is idle: URLSession says
/// nothing when it is released or invalidated (a caller's session that is invalidated but still referenced keeps
/// its private session until the idle timeout).
enum SessionPool {
    /// Guards the pool and every private session's routing table: one lock, so that a task's events and the
    /// pool's decisions about its session are never seen out of order.
    static let lock = Lock()
    nonisolated(unsafe) private static var shared: [ObjectIdentifier: TaskEventRouter] = [:]
    nonisolated(unsafe) private static var singleUseCount = 0
    nonisolated(unsafe) private static var isWatching = false
    nonisolated(unsafe) private static var storedIdleTimeout: TimeInterval = 30

    /// How long a private session with no upload in flight stays open for its caller's next one. Node and many
    /// servers close idle connections after 5 seconds; 30 keeps the rest. Tests shorten it.
    static var idleTimeout: TimeInterval {
        get { lock.withLock { storedIdleTimeout } }
        set { lock.withLock { storedIdleTimeout = newValue } }
    }

    /// How often the watch looks at idle private sessions.
    private static let watchInterval: TimeInterval = 0.1

    /// Private sessions not yet closed: shared ones and single-use ones whose task has not ended.
    package static var openCount: Int {
        lock.withLock { shared.count + singleUseCount }
    }

    /// Whether `callerSession` has a shared private session open now.
    static func isOpen(for callerSession: URLSession) -> Bool {
        lock.withLock { shared[ObjectIdentifier(callerSession)]?.callerSession === callerSession }
    }

    /// Whether the caller's session with this identity, alive or gone, has a shared private session open now.
    static func isOpen(forCallerWith key: ObjectIdentifier) -> Bool {
        lock.withLock { shared[key] != nil }
    }

    /// The task that `make` makes on a private session of `callerSession`, whose events go to `upload`; `started`
    /// when the caller resumes it at once (a task handed to the user begins when its first event arrives).
    ///
    /// URLSession is called outside `lock`: making a task waits for URLSession's queue, which a caller stream
    /// blocked in `read` may hold, and every other upload's events must go on meanwhile.
    static func makeTask<Task: URLSessionTask>(
        for upload: any UploadTaskEvents,
        of callerSession: URLSession,
        singleUse: Bool,
        started: Bool,
        _ make: (URLSession) -> Task
    ) -> Task {
        if singleUse { return makeSingleUseTask(for: upload, of: callerSession, make) }
        let router = reserveRouter(for: callerSession)
        let task = make(router.session)
        let toClose = lock.withLock {
            router.pendingTasks -= 1
            router.register(task, of: upload, started: started)
            return becameIdle(router)
        }
        toClose?.close()
        return task
    }

    /// The open private session of `callerSession`, or a new one, reserved (its pending count raised) so that the
    /// watch leaves it open while a task is made on it. Private sessions whose callers are gone close meanwhile.
    private static func reserveRouter(for callerSession: URLSession) -> TaskEventRouter {
        let key = ObjectIdentifier(callerSession)
        func reserveOpen() -> TaskEventRouter? {
            guard let open = shared[key], open.callerSession === callerSession else { return nil }
            open.pendingTasks += 1
            open.idleSince = nil
            return open
        }
        var gone = lock.withLock { removeAbandoned() }
        defer { for router in gone { router.close() } }
        if let open = lock.withLock({ reserveOpen() }) { return open }
        let made = TaskEventRouter(callerSession: callerSession)
        let open = lock.withLock { () -> TaskEventRouter? in
            // Another upload may have made one meanwhile.
            if let open = reserveOpen() { return open }
            // The identifier of a session that is gone can come back for a new one.
            if let stale = shared[key] { gone.append(stale) }
            made.pendingTasks = 1
            shared[key] = made
            return nil
        }
        guard let open else { return made }
        gone.append(made)
        return open
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
        let router = TaskEventRouter(callerSession: callerSession, singleUse: true)
        let task = make(router.session)
        lock.withLock {
            singleUseCount += 1
            router.register(task, of: upload, started: true)
        }
        router.session.finishTasksAndInvalidate()
        return task
    }

    /// A task of `router` ended (guarded by `lock`): the router to close now, if its caller is gone.
    static func taskEnded(in router: TaskEventRouter) -> TaskEventRouter? {
        if router.isSingleUse {
            singleUseCount -= 1
            return nil
        }
        return becameIdle(router)
    }

    /// Records that `router` has become idle, if it has (guarded by `lock`), and starts the watch. Returns it when
    /// it should close at once: its caller's session is gone.
    private static func becameIdle(_ router: TaskEventRouter) -> TaskEventRouter? {
        guard router.isIdle, router.idleSince == nil else { return nil }
        if router.callerSession == nil, shared[router.key] === router {
            shared[router.key] = nil
            return router
        }
        router.idleSince = DispatchTime.now().uptimeNanoseconds
        if !isWatching {
            isWatching = true
            DispatchQueue.global().asyncAfter(deadline: .now() + watchInterval, execute: watch)
        }
        return nil
    }

    /// Closes idle private sessions whose callers are gone or whose idle time is up, and looks again later while
    /// any is idle.
    @Sendable private static func watch() {
        let toClose = lock.withLock { () -> [TaskEventRouter] in
            let now = DispatchTime.now().uptimeNanoseconds
            let timeout = UInt64(max(0, storedIdleTimeout) * 1e9)
            var toClose = removeAbandoned()
            for (key, router) in shared {
                guard let since = router.idleSince, router.isIdle, now - since >= timeout else { continue }
                shared[key] = nil
                toClose.append(router)
            }
            isWatching = shared.values.contains { $0.idleSince != nil }
            if isWatching {
                DispatchQueue.global().asyncAfter(deadline: .now() + watchInterval, execute: watch)
            }
            return toClose
        }
        for router in toClose { router.close() }
    }

    /// Removes the idle private sessions whose callers' sessions are gone (guarded by `lock`), for closing.
    private static func removeAbandoned() -> [TaskEventRouter] {
        var abandoned: [TaskEventRouter] = []
        for (key, router) in shared where router.isIdle && router.callerSession == nil {
            shared[key] = nil
            abandoned.append(router)
        }
        return abandoned
    }
}
