import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension Command {
    /// `--queue DIR`: adds the form to the upload queue kept in DIR, printing the upload's ID, or with `--run` sends
    /// the queue's uploads (`--parallel N` at a time), saying on stderr how each ends (unless `-s`). Credentials are
    /// given to `--run`, never to the add, which refuses them: a queue never writes one to disk.
    static func queueCommand(_ options: Options, directory path: String) async -> ExitStatus {
        do {
            let queue = try MultipartUploadQueue(
                directory: URL(fileURLWithPath: path), maximumConcurrentUploads: options.parallel ?? 3)
            guard options.runsQueue, let dummy = URL(string: "http://localhost/") else {
                let form = try makeForm(options)
                let id = try await queue.add(form, with: request(to: options.url!, options: options))
                print(id)
                return .success
            }
            return try await send(queue, headers: request(to: dummy, options: options), options: options)
        } catch {
            return ended(by: error, options: options)
        }
    }

    /// Sends the queue; exit 0 when every upload completed, 4 when one failed. Ctrl-C stops it, keeping the uploads
    /// in flight for the next run.
    private static func send(_ queue: MultipartUploadQueue, headers: URLRequest, options: Options) async throws
        -> ExitStatus
    {
        // -H and -u, for every request the queue makes: they go out, and are never written.
        let fields = (headers.allHTTPHeaderFields ?? [:]).filter { $0.value != RequestLog.omitted }
        let silent = options.silent
        // While it runs, a line for each wait; once it ends, one for each upload it ended.
        let watching = Task {
            for await event in queue.events where !silent {
                if case .waiting(let id, let until) = event {
                    printError("multipart: \(id) waits for the network or the server until \(until)")
                }
            }
        }
        let before = Dictionary(uniqueKeysWithValues: await queue.uploads.map { ($0.id, $0.state) })
        Interruption.shared.install()
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let run = Task { try await queue.run(on: session, headers: .fresh { _ in fields }) }
        Interruption.shared.onSignal { run.cancel() }
        let ended = await run.result
        watching.cancel()
        for upload in await queue.uploads where !silent && before[upload.id] != upload.state {
            switch upload.state {
            case .completed(let answer):
                let said = answer.statusCode.map { "HTTP \($0)" } ?? "the server has the form; its answer was lost"
                printError("multipart: \(upload.id) completed: \(said)")
            case .failed(let reason): printError("multipart: \(upload.id) failed: \(reason)")
            default: break
            }
        }
        if let signal = Interruption.shared.caught {
            return signal == SIGINT ? .interrupted : .terminated
        }
        try ended.get()
        let failed = await queue.uploads.filter { if case .failed = $0.state { true } else { false } }
        return failed.isEmpty ? .success : .network
    }
}
