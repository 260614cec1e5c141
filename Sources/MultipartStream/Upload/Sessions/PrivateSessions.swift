import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Finds the private session of a caller's session: one per caller session, made from its configuration on its
/// first upload and shared by that session's uploads, so that they share its connections; and makes single-use
/// ones, for a request whose body may go out once only.
///
/// Each ``PrivateSession`` keeps its tasks, its idle time and its closing under a lock of its own, and closes
/// itself (when its caller's session is gone or it has been idle for ``idleTimeout``: a session made for one upload
/// and released after it takes its private session's connections and descriptors with it, as plain URLSession's
/// do). This registry's lock guards only the table from caller session to private session: it is taken once when
/// an upload makes a task and once when a private session closes, never by a task's events. Linux Foundation has
/// no per-object storage to hang a private session on its caller's `URLSession`, so the table is what finds it.
final class PrivateSessions: @unchecked Sendable {
    // @unchecked: `table` is guarded by `lock`, which only `modify` takes.
    /// The registry of every caller session of the process.
    static let shared = PrivateSessions()

    /// A caller session's private session; `caller` is weak, so that dropping the caller's session is enough.
    private struct Entry {
        weak var caller: URLSession?
        let session: PrivateSession
    }

    /// The table from caller session to private session, and the count of private sessions open.
    private struct Table {
        var sessions: [ObjectIdentifier: Entry] = [:]
        /// Private sessions made and not yet closed: shared ones (also those whose callers are gone, until their
        /// last task ends) and single-use ones.
        var open = 0
        var idleTimeout: TimeInterval = 30

        /// The private session listed for `callerSession`.
        func listed(for callerSession: URLSession) -> PrivateSession? {
            sessions[ObjectIdentifier(callerSession)].flatMap { $0.caller === callerSession ? $0.session : nil }
        }

        /// Takes the entries whose callers' sessions are gone out of the table, for telling.
        mutating func removeAbandoned() -> [PrivateSession] {
            var abandoned: [PrivateSession] = []
            for (key, entry) in sessions where entry.caller == nil {
                sessions[key] = nil
                abandoned.append(entry.session)
            }
            return abandoned
        }

        /// Takes `session` out of the table, if it is the one listed under `key`.
        mutating func unlist(_ session: PrivateSession, key: ObjectIdentifier) {
            if sessions[key]?.session === session { sessions[key] = nil }
        }
    }

    private let lock = Lock()
    private var table = Table()

    /// Applies `change` to the table under the lock: the one place that takes it.
    private func modify<Result>(_ change: (inout Table) -> Result) -> Result {
        lock.withLock { change(&table) }
    }

    /// How long a private session with no upload in flight stays open for its caller's next one. Node and many
    /// servers close idle connections after 5 seconds; 30 keeps the rest. Tests shorten it, also for the private
    /// sessions open now.
    var idleTimeout: TimeInterval {
        get { modify { $0.idleTimeout } }
        set {
            let listed = modify {
                $0.idleTimeout = newValue
                return $0.sessions.values.map(\.session)
            }
            for session in listed { session.setIdleTimeout(newValue) }
        }
    }

    /// Private sessions not yet closed.
    package var openCount: Int {
        modify { $0.open }
    }

    /// The shared private session of `callerSession` open now, if any.
    func privateSession(of callerSession: URLSession) -> PrivateSession? {
        modify { $0.listed(for: callerSession) }
    }

    /// Cancels the upload of `task`, a task handed to the caller of `callerSession`: `false` when it is none of
    /// them.
    func cancel(handedOut task: URLSessionTask, of callerSession: URLSession) -> Bool {
        privateSession(of: callerSession)?.cancel(handedOut: task) ?? false
    }

    /// Whether `callerSession` has a shared private session open now.
    func isOpen(for callerSession: URLSession) -> Bool {
        privateSession(of: callerSession) != nil
    }

    /// Whether the caller's session with this identity, alive or gone, has a shared private session open now.
    func isOpen(forCallerWith key: ObjectIdentifier) -> Bool {
        modify { $0.sessions[key] != nil }
    }

    /// The task that `make` makes on a private session of `callerSession`, whose events go to `upload`; `started`
    /// when the caller resumes it at once (a task handed to the user begins when its first event arrives).
    ///
    /// URLSession is called outside every lock: making a task waits for URLSession's queue, which a caller stream
    /// blocked in `read` may hold, and every other upload's events must go on meanwhile.
    func makeTask<Task: URLSessionTask>(
        for upload: any UploadTaskEvents,
        of callerSession: URLSession,
        singleUse: Bool,
        started: Bool,
        _ make: (URLSession) -> Task
    ) -> Task {
        let session =
            singleUse
            ? made(PrivateSession(callerSession: callerSession, registry: self, singleUse: true))
            : reserved(for: callerSession)
        let task = make(session.session)
        session.taskMade(task, of: upload, started: started || singleUse)
        return task
    }

    private func made(_ session: PrivateSession) -> PrivateSession {
        modify { $0.open += 1 }
        return session
    }

    /// The open private session of `callerSession`, or a new one, reserved for a task about to be made on it.
    /// Private sessions whose callers are gone are told so meanwhile (the identifier of a session that is gone can
    /// come back for a new one).
    private func reserved(for callerSession: URLSession) -> PrivateSession {
        let key = ObjectIdentifier(callerSession)
        while true {
            let (found, gone) = modify { ($0.listed(for: callerSession), $0.removeAbandoned()) }
            for session in gone { session.callerGone() }
            if let found {
                if found.reserve() { return found }
                // It closed meanwhile; ``closed(_:)`` takes it out of the table, if it has not yet.
                modify { $0.unlist(found, key: key) }
                continue
            }
            let made = PrivateSession(callerSession: callerSession, registry: self)
            let isListed = modify { table -> Bool in
                // Another upload may have made one meanwhile.
                if table.listed(for: callerSession) != nil { return false }
                table.sessions[key] = Entry(caller: callerSession, session: made)
                table.open += 1
                return true
            }
            if isListed { return made }
            made.session.finishTasksAndInvalidate()
        }
    }

    /// `session` closed.
    func closed(_ session: PrivateSession) {
        modify {
            $0.open -= 1
            $0.unlist(session, key: session.key)
        }
    }
}
