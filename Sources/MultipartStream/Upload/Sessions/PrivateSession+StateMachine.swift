extension PrivateSession {
    /// A private session's tasks and lifetime: in use while a task is being made or has begun, idle (and watched)
    /// while none has, closed once its caller's session is gone or its idle time is up. Every event returns what the
    /// shell does next; the tasks table is kept in every state, since a task made but never resumed may still run
    /// after its session closed, and its events must reach its upload.
    struct StateMachine {
        /// The uploads of the session's tasks, and which tasks have begun.
        struct Tasks {
            var uploads: [Int: any UploadTaskEvents] = [:]
            /// Tasks resumed by their upload, or seen to send; one never resumed keeps nothing open.
            var started: Set<Int> = []
            /// Tasks being made on the session now, outside the lock.
            var pending = 0

            var isIdle: Bool { started.isEmpty && pending == 0 }
        }

        enum State {
            /// A task is being made or has begun; `watched` while a watch scheduled when it was last idle is still
            /// to come (it then finds the session in use and stops).
            case inUse(Tasks, watched: Bool)
            /// No task has begun since `since` (uptime nanoseconds); a watch is scheduled.
            case idle(Tasks, since: UInt64)
            /// Invalidated: no new task is made on it.
            case closed(Tasks)
        }

        /// What the shell does after an event.
        enum Action: Equatable {
            case none
            /// Look at the session again after the watch interval (``watchFired(now:callerGone:)``).
            case watch
            /// Invalidate the session once its tasks end (and, for a shared one, take it out of its registry).
            case close
        }

        private(set) var state: State
        /// Whether the session carries one task only, on a connection of its own: it is invalidated as soon as the
        /// task is made, and closed when the task ends.
        let isSingleUse: Bool
        /// How long the session may stay idle, in nanoseconds; tests shorten it for sessions already open.
        var idleTimeout: UInt64

        init(singleUse: Bool, idleTimeout: UInt64) {
            isSingleUse = singleUse
            self.idleTimeout = idleTimeout
            // Made for a task about to be made on it.
            var tasks = Tasks()
            tasks.pending = 1
            state = .inUse(tasks, watched: false)
        }

        private var tasks: Tasks {
            switch state {
            case .inUse(let tasks, _), .idle(let tasks, _), .closed(let tasks): tasks
            }
        }

        /// Whether the session has been closed.
        var isClosed: Bool {
            if case .closed = state { return true }
            return false
        }

        /// Another task is to be made on the session: `false` when it has closed, and a new one must be made.
        mutating func reserve() -> Bool {
            switch state {
            case .inUse(var tasks, let watched):
                tasks.pending += 1
                state = .inUse(tasks, watched: watched)
            case .idle(var tasks, _):
                tasks.pending += 1
                // The watch scheduled when it became idle is still to come.
                state = .inUse(tasks, watched: true)
            case .closed:
                return false
            }
            return true
        }

        /// A task reserved for was made; its events go to `upload`. `started` when its upload resumes it at once.
        mutating func taskMade(_ id: Int, of upload: any UploadTaskEvents, started: Bool, now: UInt64) -> Action {
            var tasks = tasks
            tasks.pending = max(0, tasks.pending - 1)
            tasks.uploads[id] = upload
            if started { tasks.started.insert(id) }
            return settle(tasks, now: now)
        }

        /// An event of task `id` arrived: its upload, and whether this is the task's first (it began now).
        mutating func taskEvent(_ id: Int) -> (upload: (any UploadTaskEvents)?, began: Bool) {
            var tasks = tasks
            let began = tasks.started.insert(id).inserted
            switch state {
            case .inUse(_, let watched): state = .inUse(tasks, watched: watched)
            case .idle: state = .inUse(tasks, watched: true)
            case .closed: state = .closed(tasks)
            }
            return (tasks.uploads[id], began)
        }

        /// The upload of task `id`, while the task has not ended.
        func uploadOf(task id: Int) -> (any UploadTaskEvents)? {
            tasks.uploads[id]
        }

        /// Task `id` ended. `callerGone`: the caller's session no longer exists, so an idle session closes now.
        mutating func taskEnded(_ id: Int, callerGone: Bool, now: UInt64) -> Action {
            var tasks = tasks
            tasks.uploads[id] = nil
            tasks.started.remove(id)
            if isSingleUse, !isClosed {
                // Invalidated when its task was made; this is its end.
                state = .closed(tasks)
                return .close
            }
            if callerGone, tasks.isIdle, !isClosed {
                state = .closed(tasks)
                return .close
            }
            return settle(tasks, now: now)
        }

        /// The watch looks at the session: it closes if idle past its timeout or if its caller's session is gone.
        mutating func watchFired(now: UInt64, callerGone: Bool) -> Action {
            switch state {
            case .idle(let tasks, let since):
                if callerGone || now &- since >= idleTimeout {
                    state = .closed(tasks)
                    return .close
                }
                return .watch
            case .inUse(let tasks, _):
                state = .inUse(tasks, watched: false)
                return .none
            case .closed:
                return .none
            }
        }

        /// The caller's session is gone: an idle session closes at once, one in use when its last task ends.
        mutating func callerGone() -> Action {
            guard case .idle(let tasks, _) = state else { return .none }
            state = .closed(tasks)
            return .close
        }

        /// Puts `tasks` back in the state they make: idle (watched) once nothing has begun.
        private mutating func settle(_ tasks: Tasks, now: UInt64) -> Action {
            switch state {
            case .closed:
                state = .closed(tasks)
                return .none
            case .idle(_, let since):
                if tasks.isIdle {
                    state = .idle(tasks, since: since)
                    return .none
                }
                state = .inUse(tasks, watched: true)
                return .none
            case .inUse(_, let watched):
                guard tasks.isIdle, !isSingleUse else {
                    state = .inUse(tasks, watched: watched)
                    return .none
                }
                state = .idle(tasks, since: now)
                return watched ? .none : .watch
            }
        }
    }
}
