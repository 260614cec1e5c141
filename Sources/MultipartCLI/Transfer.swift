import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One upload as curl's options shape it: redirects followed only with `-L`, each attempt bounded by `--max-time`
/// and `--connect-timeout`, and `--retry` on the failures curl calls transient. Every attempt sends the form from
/// its first byte.
struct Transfer {
    let form: MultipartFormData
    let request: URLRequest
    let options: Options
    /// Where each attempt's answer is written as it arrives.
    let writer: AnswerWriter

    /// The last attempt's answer, whose body is written already.
    struct Answer {
        var response: HTTPURLResponse
    }

    /// HTTP statuses curl's `--retry` retries.
    static let retriedStatuses: Set<Int> = [408, 429, 500, 502, 503, 504]

    /// Runs the attempts and fills `report`; returns the last answer, or throws the last failure.
    func run(report: inout TransferReport) async throws -> Answer {
        let policy = FollowRedirects(options.followRedirects, verboseWith: options.verbose ? form : nil)
        let session = URLSession(configuration: .ephemeral, delegate: policy, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let start = DispatchTime.now().uptimeNanoseconds
        defer { report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }
        var attempt = 0
        while true {
            let progress = ProgressReporter(silent: options.silent)
            writer.beforeWritingToATerminal { progress.endLine() }
            let log =
                options.resumes
                ? ResumableUploadLog(silent: options.silent, verbose: options.verbose, progress: progress) : nil
            let delay: Double
            let problem: String
            do {
                let answer = try await send(with: session, progress: progress, log: log)
                report.statusCode = answer.response.statusCode
                // What went out, resent bytes again; not the form's length when a saved upload resumed.
                report.bytesUploaded = log?.bytesSent ?? progress.bytesSent
                report.effectiveURL = answer.response.url?.absoluteString ?? report.effectiveURL
                report.contentType = answer.response.value(forHTTPHeaderField: "Content-Type")
                let status = answer.response.statusCode
                progress.finish(outcome: "HTTP \(status)")
                // A resumable upload retried what it could itself; another attempt would start the form over.
                let retryAfter = answer.response.value(forHTTPHeaderField: "Retry-After").flatMap(Double.init)
                guard Self.retriedStatuses.contains(status), !options.resumes, attempt < options.retries,
                    retryStartsInTime(since: start, after: retryDelay(attempt: attempt, retryAfter: retryAfter))
                else {
                    return answer
                }
                delay = retryDelay(attempt: attempt, retryAfter: retryAfter)
                problem = "HTTP \(status)"
            } catch let failure as AttemptFailure {
                report.bytesUploaded = log?.bytesSent ?? progress.bytesSent
                progress.finish(outcome: Interruption.shared.caught == nil ? "failed" : "interrupted")
                // A resumable upload has spent its retries on the connection already.
                guard failure.isTransient, !options.resumes, attempt < options.retries,
                    retryStartsInTime(since: start, after: retryDelay(attempt: attempt, retryAfter: nil))
                else {
                    throw failure.commandFailure
                }
                delay = retryDelay(attempt: attempt, retryAfter: nil)
                problem = failure.commandFailure.message
            }
            let left = options.retries - attempt
            if !options.silent {
                Command.printError(
                    "multipart: \(problem); retrying in \(Self.seconds(delay)) s (\(left) "
                        + "\(left == 1 ? "retry" : "retries") left)")
            }
            try await Task.sleep(nanoseconds: UInt64(delay * 1e9))
            attempt += 1
        }
    }

    /// Whether a retry after `delay` seconds starts within `--retry-max-time` of the first attempt (`start`), as
    /// curl's does.
    private func retryStartsInTime(since start: UInt64, after delay: Double) -> Bool {
        guard let most = options.retryMaxTime else { return true }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 + delay <= most
    }

    /// `--retry-delay` when given, else the server's `Retry-After` (up to 10 minutes), else curl's backoff: 1 s,
    /// doubling, at most 10 minutes.
    private func retryDelay(attempt: Int, retryAfter: Double?) -> Double {
        if let delay = options.retryDelay, delay > 0 { return delay }
        if let retryAfter, retryAfter.isFinite, retryAfter >= 0 { return min(retryAfter, 600) }
        return min(Double(1 << min(attempt, 10)), 600)
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(format: "%.2f", value)
    }

    /// How `-C -` resumes: `--retry`, `--retry-delay` and `--retry-max-time` shape its retries, `--speed-limit` and
    /// `--speed-time` its stall rule, and its state is kept under `--state-dir` (else the user's state directory),
    /// unless the form reads standard input into a file, which another run cannot read again.
    static func resumption(
        _ options: Options, log: ResumableUploadLog?,
        heard: @escaping @Sendable (MultipartResumption.Event) -> Void = { _ in }
    ) -> MultipartResumption {
        let givenDelay = options.retryDelay.flatMap { $0 > 0 ? $0 : nil }
        // The policy trusts as the upload does (--location-trusted): `--abandon`'s DELETE has only the policy.
        // The library's ceiling on waits (so that a retry comes within it of the network's return), from curl's 1 s.
        var resumption = MultipartResumption(
            maximumAttempts: options.retries, initialDelay: givenDelay ?? 1,
            maximumDelay: givenDelay ?? MultipartResumption().maximumDelay,
            maximumWaitWithoutProgress: options.retryMaxTime, credentialsToOtherOrigins: options.trustsRedirects)
        if let stall = options.stall { resumption.stall = stall }
        if let limit = options.singleRequestLimit { resumption.singleRequestLimit = limit }
        let readsStandardInput = options.fields.contains { $0.readsStandardInput && $0.isFile }
        if !readsStandardInput {
            resumption.stateDirectory = options.stateDirectoryURL
        }
        resumption.events = { event in
            heard(event)
            log?.record(event)
        }
        return resumption
    }

    /// What `-C -` kept of the request's server (``KnownServers``), for the upload; and what keeps what it finds now,
    /// given the upload's events: that it speaks none, where it was not known so. What it finds to speak the draft
    /// comes through the membership.
    private func servers() -> (ResumableUpload.Membership, @Sendable (MultipartResumption.Event) -> Void) {
        guard let origin = Origin(request.url)?.serialized else { return (ResumableUpload.Membership(), { _ in }) }
        let servers = KnownServers(in: options.stateDirectoryURL)
        let found = servers.finding(for: origin)
        let knownServer: ResumableUpload.KnownServer?
        if case .speaks(let server)? = found { knownServer = server } else { knownServer = nil }
        let knownNone = found.map { if case .speaksNone = $0 { true } else { false } } ?? false
        return (
            ResumableUpload.Membership(
                speaksNone: knownNone, knownServer: knownServer,
                learned: { servers.keep(.speaks($0), for: origin) }),
            { event in
                if event == .notResumable, !knownNone { servers.keep(.speaksNone(since: Date()), for: origin) }
            }
        )
    }

    /// One attempt, cancelled by the `--max-time` and `--connect-timeout` timers, a stall (`--speed-limit`), or
    /// Ctrl-C under `-C -`.
    private func send(with session: URLSession, progress: ProgressReporter, log: ResumableUploadLog?) async throws
        -> Answer
    {
        let watchdog = Watchdog()
        let (form, request) = (form, request)
        let pacing = options.rateLimit.map(MultipartPacing.init(bytesPerSecond:))
        // What an earlier run found the server to speak: a new upload asks nothing it knows.
        let (membership, heard): (ResumableUpload.Membership, @Sendable (MultipartResumption.Event) -> Void) =
            options.resumes ? servers() : (ResumableUpload.Membership(), { _ in })
        let strategy: MultipartUploadStrategy =
            switch (options.resumes, options.strategy ?? .automatic, pacing) {
            case (true, _, _): .resumable(Self.resumption(options, log: log, heard: heard), pacing: pacing)
            case (false, .file, _): .file
            case (false, _, let pacing?): .stream(pacing: pacing)
            case (false, .stream, nil): .stream
            case (false, .automatic, nil): .automatic
            }
        try writer.begin()
        let writer = writer
        let upload = Task {
            try await session.upload(
                form, with: request, strategy: strategy, headers: nil,
                credentialsToOtherOrigins: options.trustsRedirects, acceptableStatusCodes: nil,
                responseBody: .chunks(writer.write),
                progress: { sent in
                    watchdog.sawBody()
                    progress.report(sent)
                }, membership: membership)
        }
        if options.resumes { Interruption.shared.onSignal { upload.cancel() } }
        if let maxTime = options.maxTime {
            DispatchQueue.global().asyncAfter(deadline: .now() + maxTime) {
                if watchdog.expire(.maxTime(maxTime)) { upload.cancel() }
            }
        }
        if let connectTimeout = options.connectTimeout {
            DispatchQueue.global().asyncAfter(deadline: .now() + connectTimeout) {
                if watchdog.expire(.connect(connectTimeout)) { upload.cancel() }
            }
        }
        // Without -C -, a stall ends the attempt as curl's --speed-limit does; with it, the upload sends the part
        // again from where the server stands.
        var stallWatch: Task<Void, Never>?
        if let rule = options.stall, !options.resumes {
            stallWatch = Task {
                do {
                    try await StallWatch(rule: rule, handedOut: { progress.bytesSent }).run()
                } catch {
                    if watchdog.expire(.stalled(rule)) { upload.cancel() }
                }
            }
        }
        defer { stallWatch?.cancel() }
        let url = request.url?.absoluteString ?? ""
        do {
            let (_, response) = try await upload.value
            watchdog.finish()
            guard let http = response as? HTTPURLResponse else {
                throw AttemptFailure(.network, "\(url): the answer is not HTTP", isTransient: false)
            }
            return Answer(response: http)
        } catch let failure as CommandFailure {
            // The output could not take the answer.
            watchdog.finish()
            throw AttemptFailure(failure.status, failure.message, isTransient: false)
        } catch let error as MultipartError {
            watchdog.finish()
            if case .resumeSaved = error.reason, let state = log?.stateFile {
                throw AttemptFailure(
                    .network,
                    error.description + ";\n"
                        + AttemptFailure.howToResume(state: state, command: options.resumingCommand),
                    isTransient: false)
            }
            if error.isLocalStateProblem {
                throw AttemptFailure(.localFile, "-C -: \(error.reason.description)", isTransient: false)
            }
            throw AttemptFailure(
                error.isFileProblem ? .localFile : .network, error.description, isTransient: false)
        } catch {
            if let signal = Interruption.shared.caught, options.resumes {
                watchdog.finish()
                throw AttemptFailure(
                    interruptedBy: signal, sent: progress.bytesSent, of: form, log: log,
                    resumingCommand: options.resumingCommand)
            }
            if let timeout = watchdog.finish() {
                throw AttemptFailure(.network, "\(url): \(timeout)", isTransient: true)
            }
            let transient = FailureMeaning.of(error) == .noAnswer
            throw AttemptFailure(.network, "\(url): \(error.localizedDescription)", isTransient: transient)
        }
    }
}

/// Why an attempt failed, and whether `--retry` may try again.
private struct AttemptFailure: Error {
    var commandFailure: CommandFailure
    var isTransient: Bool

    init(_ status: ExitStatus, _ message: String, isTransient: Bool) {
        commandFailure = CommandFailure(status: status, message: message)
        self.isTransient = isTransient
    }

    /// Where a kept upload's state is, and the command that resumes it (without what is secret).
    static func howToResume(state: URL, command: String?) -> String {
        "its state is in \(state.path).\nRun the same command again to resume it"
            + (command.map { ":\n  \($0)" } ?? " (with its credentials)") + "\n(or add --abandon to give it up)"
    }

    /// Ctrl-C or SIGTERM under `-C -`: how far the upload got, and how to resume it when it was saved.
    init(
        interruptedBy signal: Int32, sent: UInt64, of form: MultipartFormData, log: ResumableUploadLog?,
        resumingCommand: String?
    ) {
        let name = signal == SIGINT ? "interrupted" : "terminated"
        // What is known, as what it is: the bytes handed out to the connection, and the server's own word when
        // it gave one, which may be less than it holds: the next run asks.
        var message =
            "\(name) after handing out \(sent)" + (form.contentLength.map { " of \($0) bytes" } ?? " bytes")
        if let acknowledged = log?.bytesAcknowledged {
            message += " (the server had \(acknowledged) when it last said; it may hold more)"
        }
        if let state = log?.stateFile {
            message += "; the server keeps the upload and " + Self.howToResume(state: state, command: resumingCommand)
        } else {
            message += "; nothing was saved to resume"
        }
        self.init(signal == SIGINT ? .interrupted : .terminated, message, isTransient: false)
    }
}

/// The timers of one attempt: the first to expire wins, and none once the attempt has ended.
private final class Watchdog: @unchecked Sendable {
    // @unchecked: the state is guarded by `lock`; timers and URLSession's thread touch it.
    enum Timeout: CustomStringConvertible {
        case maxTime(Double)
        case connect(Double)
        case stalled(MultipartResumption.Stall)

        var description: String {
            switch self {
            case .maxTime(let seconds): "timed out after \(seconds) s (--max-time)"
            case .connect(let seconds): "no connection within \(seconds) s (--connect-timeout)"
            case .stalled(let rule):
                "operation too slow: fewer than \(rule.bytesPerSecond) bytes a second for \(rule.seconds) s "
                    + "(--speed-limit, --speed-time)"
            }
        }
    }

    private let lock = Lock()
    private var expired: Timeout?
    private var isFinished = false
    private var hasSentBody = false

    /// The server took body bytes: the connection is made.
    func sawBody() {
        lock.withLock { hasSentBody = true }
    }

    /// Whether `timeout` ends the attempt: it is still running, and for a connect timeout, has sent nothing.
    func expire(_ timeout: Timeout) -> Bool {
        lock.withLock {
            guard !isFinished, expired == nil else { return false }
            if case .connect = timeout, hasSentBody { return false }
            expired = timeout
            return true
        }
    }

    /// Ends the attempt; returns the timeout that ended it, if one did.
    @discardableResult
    func finish() -> Timeout? {
        lock.withLock {
            isFinished = true
            return expired
        }
    }
}

/// Follows redirects only with `-L`, as curl does; without it the 3xx is the answer. Where the credentials go is the
/// library's origin rule: with `--location-trusted` the upload is told to trust other origins
/// (`credentialsToOtherOrigins`), and this delegate writes no credential of its own.
private final class FollowRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    let follows: Bool
    /// With `-v`, the form whose request each redirect is said with.
    let verboseForm: MultipartFormData?

    init(_ follows: Bool, verboseWith form: MultipartFormData?) {
        self.follows = follows
        verboseForm = form
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        guard follows else { return completionHandler(nil) }
        if let form = verboseForm {
            Command.printError("< HTTP \(response.statusCode)")
            if let location = response.value(forHTTPHeaderField: "Location") {
                Command.printError("< Location: \(location)")
            }
            // A 301 to 303 turns the upload into a GET without the form, as URLSession sends it.
            let resendsForm = request.httpMethod != "GET"
            if resendsForm {
                RequestLog.print(request, form: form)
            } else {
                Command.printError("> GET \(request.url?.absoluteString ?? "") HTTP/1.1 (the form is not sent again)")
            }
        }
        completionHandler(request)
    }
}
