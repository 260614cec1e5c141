/// What each of the command's options does with `--queue DIR`: every option given either applies to what the
/// command does there (add, run, or look and steer) or is refused by name, never silently ignored.
extension Options {
    /// What `--queue DIR` is asked to do.
    enum QueueMode {
        /// `-F … URL`: add an upload.
        case add
        /// `--run`: send the queue's uploads.
        case run
        /// `--list`, `--pause ID` and the like: look at or steer the queue.
        case change(QueueChange)
    }

    /// The options each mode applies, by their long names.
    static func optionsApplied(to mode: QueueMode) -> Set<String> {
        let always: Set<String> = ["--queue", "--silent", "--show-error"]
        switch mode {
        case .add:
            // What the upload keeps: its form, its request (but for credentials, refused by name), its key.
            return always.union([
                "--form", "--form-string", "--header", "--user-agent", "--request", "--boundary", "--key", "--again",
            ])
        case .run:
            // What goes with every request, how many at once and how fast, what is said, and the run's bounds.
            return always.union([
                "--run", "--parallel", "--header", "--user", "--user-agent", "--verbose", "--write-out", "--max-time",
                "--speed-limit", "--speed-time", "--limit-rate", "--fail", "--fail-with-body", "--single-request-limit",
            ])
        case .change(.remove):
            // A remove deletes the upload on the server, with the credentials it takes.
            return always.union(["--remove", "--header", "--user", "--user-agent"])
        case .change(let change):
            return always.union([change.option])
        }
    }

    /// Why `option` is refused in `mode`.
    static func refusal(of option: String, in mode: QueueMode) -> String {
        let runOnly: Set<String> = [
            "--run", "--parallel", "--verbose", "--write-out", "--max-time", "--speed-limit", "--speed-time",
            "--limit-rate", "--fail", "--fail-with-body", "--single-request-limit",
        ]
        let kept: Set<String> = ["--form", "--form-string", "--request", "--boundary", "--key", "--again"]
        let changes: Set<String> = [
            "--list", "--retry", "--remove", "--remove-completed", "--pause", "--resume", "--prioritize",
        ]
        switch (option, mode) {
        case ("--user", .add):
            return "a queue never writes a credential to disk: give -H and -u to --queue DIR --run, which sends "
                + "them with every request"
        case (_, .add) where runOnly.contains(option):
            return "it is for --queue DIR --run, which sends the uploads; adding sends nothing"
        case (_, .run) where kept.contains(option):
            return "it is kept with each upload when it is added (--queue DIR -F ... URL), and a run sends each as "
                + "it was added"
        case (_, .change) where kept.contains(option) || runOnly.contains(option):
            return "--list, --retry ID, --remove ID, --remove-completed, --pause, --resume and --prioritize look at "
                + "or steer the queue, and send no upload"
        case (_, .change) where changes.contains(option):
            return "one of --list, --retry ID, --remove ID, --remove-completed, --pause, --resume, --prioritize at "
                + "a time"
        case (_, .add) where changes.contains(option), (_, .run) where changes.contains(option):
            return "it looks at or steers the queue: give it alone with --queue DIR"
        case ("--strategy", _):
            return "a queue's uploads are resumable uploads, streamed; --strategy chooses how one plain upload sends"
        case ("--output", _), ("--include", _):
            return "a queue keeps each upload's answer (its status, headers and first 64 KiB) in its record: "
                + "--queue DIR --list shows how each ended"
        case ("--output-body", _):
            return "--output-body writes one form and sends nothing"
        case ("--continue-at", _), ("--state-dir", _), ("--abandon", _):
            return "a queue's uploads are resumable already and keep their state in the queue's directory"
        case ("--list-saved", _):
            return "--list-saved lists -C -'s saved uploads; --queue DIR --list lists a queue's"
        case ("--location", _), ("--location-trusted", _):
            return "a queue's uploads are resumable, and follow the protocol's redirects (a 307 or 308 from the "
                + "upload resource) by the library's origin rule, whatever -L says"
        case ("--connect-timeout", _), ("--retry-delay", _), ("--retry-max-time", _):
            return "a queue's uploads retry and wait out an outage by the queue's rule; --speed-limit and "
                + "--speed-time bound a stalled one in a run"
        default:
            return "it does nothing there"
        }
    }

    /// `--queue DIR` with `-F` and a URL adds an upload; `--queue DIR --run` sends the queue; `--list` and the like
    /// look at or steer it. Any option the mode does not apply is refused by name.
    mutating func validateQueue() throws(UsageError) {
        guard queue != nil else {
            throw UsageError(
                "--run, --parallel, --key, --again, --list, --remove, --remove-completed, --pause, --resume and "
                    + "--prioritize "
                    + "are about an upload queue: give it with --queue DIR")
        }
        let mode: QueueMode
        if let queueChange {
            mode = .change(queueChange)
        } else if runsQueue {
            mode = .run
        } else {
            mode = .add
        }
        let applied = Self.optionsApplied(to: mode)
        if let refused = given.first(where: { !applied.contains($0.name) }) {
            // `--retry ID` is a change of its own; given with another, it is one change too many.
            throw UsageError("\(refused.typed) with \(mode.description): \(Self.refusal(of: refused.name, in: mode))")
        }
        switch mode {
        case .add:
            guard url != nil, !fields.isEmpty else {
                throw UsageError("--queue DIR adds an upload: give -F and the URL, or --run to send the queue")
            }
        case .run, .change:
            guard url == nil else {
                throw UsageError(
                    "\(url!.absoluteString) with \(mode.description): a URL is kept with each upload when it is "
                        + "added (--queue DIR -F ... URL)")
            }
        }
    }
}

extension Options.QueueMode: CustomStringConvertible {
    var description: String {
        switch self {
        case .add: "--queue DIR adding an upload"
        case .run: "--queue DIR --run"
        case .change(let change): "--queue DIR \(change.option)"
        }
    }
}

extension Options.QueueChange {
    /// The option that asks for the change.
    var option: String {
        switch self {
        case .list: "--list"
        case .retry: "--retry"
        case .remove: "--remove"
        case .removeCompleted: "--remove-completed"
        case .pause: "--pause"
        case .resume: "--resume"
        case .prioritize: "--prioritize"
        }
    }
}
