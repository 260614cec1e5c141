import Foundation
import MultipartQueue
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension Command {
    /// `--queue DIR`: adds the form to the upload queue kept in DIR (once a `--key`), printing the upload's ID; with
    /// `--run` sends the queue's uploads (`--parallel N` at a time), with a bar for the whole queue on a terminal,
    /// saying on stderr how each ends (unless `-s`);
    /// with `--list`, `--retry ID`, `--remove ID` or `--remove-completed` shows or changes it. Credentials are given
    /// to `--run` (and `--remove`), never to the add, which refuses them: a queue never writes one to disk.
    static func queueCommand(_ options: Options, directory path: String) async -> ExitStatus {
        do {
            // A run hears each upload's requests (-v, and -w's bytes) and keeps --speed-limit's stall rule.
            let bar = ProgressReporter(silent: options.silent)
            let log = QueueRunLog(verbose: options.verbose, bar: bar)
            var resumption = MultipartResumption()
            if options.runsQueue {
                if let stall = options.stall { resumption.stall = stall }
                if let limit = options.singleRequestLimit { resumption.singleRequestLimit = limit }
                resumption.events = { log.record($0, of: MultipartUploadQueue.uploadHeard) }
            }
            let queue = try MultipartUploadQueue(
                directory: URL(fileURLWithPath: path), maximumConcurrentUploads: options.parallel ?? 3,
                resumption: resumption)
            guard let dummy = URL(string: "http://localhost/") else { return .usage }
            // -H and -u, for every request the queue makes (a run's, or a removal's DELETE): they go out, and are
            // never written.
            let fields = (request(to: dummy, options: options).allHTTPHeaderFields ?? [:]).filter {
                $0.value != RequestLog.omitted
            }
            if let change = options.queueChange {
                return try await self.change(queue, change, headers: fields, silent: options.silent)
            }
            guard options.runsQueue else {
                let form = try makeForm(options)
                do {
                    let id = try await queue.add(
                        form, with: request(to: options.url!, options: options), key: options.queueKey,
                        again: options.addsAgain)
                    Command.printOut(id.rawValue)
                    if let key = options.queueKey, let end = await queue.end(ofKey: key), !options.silent {
                        let how = end == .completed ? "completed and was cleared from the queue" : "was removed"
                        printError(
                            "multipart: not added: the upload of key \(key) (\(id.rawValue)) \(how); --again adds it anew"
                        )
                    }
                } catch let error as MultipartError {
                    guard case .credentialNotQueued(let what) = error.reason else { throw error }
                    throw CommandFailure(
                        status: .usage,
                        message: "the upload carries \(what), and a queue never writes a credential to disk: add "
                            + "it without, and give -H and -u to --queue DIR --run, which sends them with every request"
                    )
                }
                return .success
            }
            return try await send(queue, headers: fields, options: options, bar: bar, log: log)
        } catch {
            return ended(by: error, options: options)
        }
    }

    /// `--list`, `--retry ID`, `--remove ID`, `--remove-completed`. An ID the queue does not hold, or a retry of an
    /// upload that has not failed, is said and exits 2.
    private static func change(
        _ queue: MultipartUploadQueue, _ change: Options.QueueChange, headers fields: [String: String], silent: Bool
    ) async throws -> ExitStatus {
        func upload(_ id: String) async throws -> MultipartUploadQueue.Upload {
            guard let upload = await queue.upload(MultipartUploadQueue.ID(rawValue: id)) else {
                throw CommandFailure(status: .usage, message: "no upload \(id) in the queue (--queue DIR --list)")
            }
            return upload
        }
        /// The upload `id`, which has not ended: a pause or a move of one that has is said, and exits 2.
        func going(_ id: String) async throws -> MultipartUploadQueue.ID {
            let upload = try await upload(id)
            switch upload.state {
            case .completed, .failed:
                throw CommandFailure(status: .usage, message: "\(id) has ended: it is \(upload.state)")
            default: return upload.id
            }
        }
        switch change {
        case .list:
            // One line at a time: a hundred thousand are never held at once.
            await queue.forEachUpload { Command.printOut(line($0)) }
        case .retry(let id):
            let upload = try await upload(id)
            guard case .failed = upload.state else {
                throw CommandFailure(status: .usage, message: "\(id) has not failed: it is \(upload.state)")
            }
            try await queue.retry(upload.id)
        case .remove(let id):
            let upload = try await upload(id)
            let removal = await queue.remove(upload.id, headers: .fresh { _ in fields })
            // What the remove could not undo, said (unless -s): the server took the form first, or another process's
            // run has yet to stop it.
            switch removal {
            case .completed(let answer) where !silent:
                if case .completed = upload.state { break }
                printError(
                    "multipart: \(id) completed (\(answer)) before the remove reached it: the server has the form")
            case .asked where !silent:
                printError(
                    "multipart: \(id) is being sent by another process's run, which removes it once it stops it")
            default: break
            }
        case .removeCompleted:
            await queue.removeCompleted()
        case .pause(let id):
            try await queue.pause(try await going(id))
        case .resume(let id):
            let upload = try await upload(id)
            guard upload.state == .paused else {
                throw CommandFailure(status: .usage, message: "\(id) is not paused: it is \(upload.state)")
            }
            try await queue.resume(upload.id)
        case .prioritize(let id):
            try await queue.prioritize(try await going(id))
        }
        return .success
    }

    /// One upload as `--list` prints it: ID, state, length, URL, files, and how often it went again.
    static func line(_ upload: MultipartUploadQueue.Upload) -> String {
        let state = upload.runner.map { "\(upload.state) (process \($0))" } ?? upload.state.description
        var fields = [upload.id.rawValue, state, "\(upload.contentLength) bytes", upload.url.absoluteString]
        if let key = upload.key { fields.append("key \(key)") }
        if !upload.files.isEmpty { fields.append(upload.files.map(\.path).joined(separator: ", ")) }
        if upload.sentAgain > 0 { fields.append("sent again \(upload.sentAgain)") }
        // One line an upload, whatever a reason or a path holds: each CR and LF a space, byte by byte (UTF-8 has
        // them in no other character, and a CR LF is one Character), over the line's bytes once.
        let line = fields.joined(separator: "  ")
        guard line.utf8.contains(where: { $0 == 10 || $0 == 13 }) else { return line }
        return String(decoding: line.utf8.map { $0 == 10 || $0 == 13 ? 32 : $0 }, as: UTF8.self)
    }

    /// Sends the queue, at `--limit-rate` for all its uploads together, within `--max-time`; exit 0 when every
    /// upload completed, 4 when one failed or the time ran out. Ctrl-C stops it, keeping the uploads in flight for
    /// the next run; so does `--max-time`. With `-w`, a report for each upload the run ends, as it ends.
    private static func send(
        _ queue: MultipartUploadQueue, headers fields: [String: String], options: Options, bar: ProgressReporter,
        log: QueueRunLog
    ) async throws -> ExitStatus {
        let silent = options.silent
        // While it runs, a bar for the whole queue on a terminal, with a line above it for each wait; once it ends,
        // one for each upload it ended.
        let progress = queue.progress
        let counted: @Sendable () -> MultipartUploadProgress = {
            MultipartUploadProgress(
                bytesSent: UInt64(clamping: progress.completedUnitCount),
                totalBytes: UInt64(clamping: progress.totalUnitCount))
        }
        // The speed and the time left are this run's: bytes that earlier runs sent are not.
        bar.resumed(at: counted().bytesSent)
        let events = queue.events
        let format = Command.writeOutFormat(options)
        let watching = Task {
            // A frame each tenth of a second at most, however many uploads report, and one at each end.
            var drawn: UInt64 = 0
            var started: [MultipartUploadQueue.ID: UInt64] = [:]
            for await event in events {
                let now = DispatchTime.now().uptimeNanoseconds
                if let format {
                    switch event {
                    case .started(let id): started[id] = started[id] ?? now
                    case .completed(let id, _), .failed(let id, _):
                        let seconds = started[id].map { Double(now - $0) / 1e9 } ?? 0
                        await writeOut(format, for: event, of: queue.upload(id), seconds: seconds, log: log)
                    default: break
                    }
                }
                guard !silent else { continue }
                switch event {
                case .waiting(let id, let until):
                    bar.printAbove(["multipart: \(id) waits for the network or the server until \(until)"])
                case .progress where now - drawn < 100_000_000:
                    continue
                case .progress, .started, .completed, .failed:
                    bar.report(counted())
                    drawn = now
                // What was added and steered, here or in another process, the uploads' lines say as they end.
                case .added, .paused, .resumed, .retried, .prioritized, .removed:
                    break
                }
            }
        }
        let before = Dictionary(uniqueKeysWithValues: await queue.uploads.map { ($0.id, $0.state) })
        Interruption.shared.install()
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let pacing = options.rateLimit.map(MultipartPacing.init(bytesPerSecond:))
        let run = Task { try await queue.run(on: session, headers: .fresh { _ in fields }, pacing: pacing) }
        Interruption.shared.onSignal { run.cancel() }
        let timedOut = LockedValue(false)
        if let maxTime = options.maxTime {
            DispatchQueue.global().asyncAfter(deadline: .now() + maxTime) {
                timedOut.withLock { $0 = true }
                run.cancel()
            }
        }
        let ended = await run.result
        // The watcher's last frame before the run's own: the queue as the run left it, then the lines below it.
        watching.cancel()
        await watching.value
        if !silent { bar.report(counted()) }
        let after = await queue.uploads
        bar.endLine()
        if !silent { sayHowItEnded(after, before: before) }
        if let signal = Interruption.shared.caught {
            if !silent {
                let kept = after.filter { if case .completed = $0.state { false } else { true } }.count
                let uploads = kept == 1 ? "1 upload not completed is" : "\(kept) uploads not completed are"
                printError("multipart: interrupted: \(uploads) kept for the next --run")
            }
            return signal == SIGINT ? .interrupted : .terminated
        }
        if case .failure(is CancellationError) = ended, timedOut.withLock({ $0 }), let maxTime = options.maxTime {
            if !silent || options.showError {
                let kept = after.filter { if case .completed = $0.state { false } else { true } }.count
                printError(
                    "multipart: timed out after \(maxTime) s (--max-time): "
                        + (kept == 1 ? "1 upload not completed is" : "\(kept) uploads not completed are")
                        + " kept for the next --run")
            }
            return .network
        }
        try ended.get()
        let failed = after.filter { if case .failed = $0.state { true } else { false } }
        return failed.isEmpty ? .success : .network
    }

    /// A line for each upload this run completed, one for every upload failed (this run or an earlier one: the exit
    /// status is about them), and a last line with the counts.
    private static func sayHowItEnded(
        _ uploads: [MultipartUploadQueue.Upload], before: [MultipartUploadQueue.ID: MultipartUploadQueue.State]
    ) {
        var (completed, failed, paused, left) = (0, 0, 0, 0)
        for upload in uploads {
            switch upload.state {
            case .completed(let answer):
                completed += 1
                guard before[upload.id] != upload.state else { continue }
                let said = answer.statusCode.map { "HTTP \($0)" } ?? "the server has the form; its answer was lost"
                printError("multipart: \(upload.id) completed: \(said)")
            case .failed(let reason):
                failed += 1
                let files = upload.files.isEmpty ? "" : " (\(upload.files.map(\.path).joined(separator: ", ")))"
                printError("multipart: \(upload.id) failed: \(reason)\(files)")
            case .paused:
                paused += 1
            default:
                left += 1
            }
        }
        let more = (paused > 0 ? ", \(paused) paused" : "") + (left > 0 ? ", \(left) left for the next run" : "")
        printError("multipart: \(completed) completed, \(failed) failed" + more)
    }

    /// `-w` for an upload the run ended with `event`: its status, time, bytes sent this run (resent ones again), the
    /// kept answer's bytes and type, its URL and the exit status it would have alone.
    private static func writeOut(
        _ format: String, for event: MultipartUploadQueue.Event, of upload: MultipartUploadQueue.Upload?,
        seconds: Double, log: QueueRunLog
    ) {
        guard let upload else { return }
        var report = TransferReport(effectiveURL: upload.url.absoluteString)
        report.seconds = seconds
        report.bytesUploaded = log.bytesSent(by: upload.id)
        // The answer that completed the upload, or the one that refused it, as -w shows a plain upload's.
        var answer: MultipartUploadQueue.Answer?
        switch event {
        case .completed(_, let completed): answer = completed
        case .failed(_, let failure):
            answer = failure.answer
            report.exitCode = ExitStatus.network.rawValue
        default: report.exitCode = ExitStatus.network.rawValue
        }
        if let answer {
            report.statusCode = answer.statusCode ?? 0
            report.bytesDownloaded = answer.body.count
            report.contentType = answer.headers.first { $0.key.lowercased() == "content-type" }?.value
        }
        Command.writeOut(format, report)
    }
}
