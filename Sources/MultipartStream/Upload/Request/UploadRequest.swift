import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One request an upload sends (the whole form, an append, or a bodiless `OPTIONS`, `HEAD` or `DELETE` of the
/// resumable protocol), over one or more tasks (a redirect it follows itself makes a new one) on its caller session's
/// ``PrivateSession``, which hands it its tasks' events.
///
/// The shell of its ``StateMachine``: every event goes through ``modify(_:)``, the one place that takes the lock,
/// and the action that comes back is carried out after it is released: making tasks and streams, writing the
/// temporary file, making a redirect's request (``RequestMaker``), asking the caller's delegate
/// (``CallerDelegate``), reporting progress, closing, telling the caller. The machine holds values; the shell keeps
/// the streams and tells the machine what they handed out.
final class UploadRequest: UploadTaskEvents, @unchecked Sendable {
    // @unchecked: `machine`, `streams` and `task` are guarded by `lock`; the rest are constants.
    typealias Completion = @Sendable (Result<(Data, URLResponse), any Error>) -> Void

    private let form: MultipartFormData
    /// Where an append of a form of unknown length reads its bytes, held in memory since the form cannot be read
    /// again.
    private let buffered: AppendBuffer?
    /// The form's length; for a form of unknown length, the end of the bytes this upload sends.
    private let contentLength: UInt64
    private let progress: ProgressCoalescer?
    /// How fast the form's streams hand out bytes.
    private let pacer: MultipartPacer?
    /// Makes a redirect's request: the caller's fresh headers, then the origin rule.
    private let requests: RequestMaker
    /// The caller's session and its delegate, which decides redirects and challenges first.
    let caller: CallerDelegate
    private let completion: Completion
    /// How the answers' bodies are kept (the machine's, read without its lock).
    private let reception: ResponseReception

    private let lock = Lock()
    private var machine: StateMachine
    /// The current task's body streams; the last is the one the last request read.
    private var streams: [MultipartBodyStream] = []
    /// The current task: the machine holds values, and only knows that it exists.
    private var task: URLSessionTask?
    /// What every cancel of the current task passes through, so that none races its end.
    private var gate = CancelGate()
    /// The current task's redirect, waiting for its answer. Linux URLSession traps ("Received callback for HTTP
    /// redirection, but we're not waiting for it") when that answer comes after a cancel stopped the task, so it is
    /// given at most once, under the lock, and a cancel while it waits refuses it in place of cancelling the task.
    private var redirectAnswer: (@Sendable (URLRequest?) -> Void)?
    /// Whether the current task was cancelled: its redirect is then never answered.
    private var taskCancelled = false
    /// Whether the current task's redirect was refused: the task then ends by itself, and is never cancelled.
    private var taskRefused = false
    /// Counts the redirects met, so that a deadline answers only the redirect it was set for.
    private var redirectsMet = 0

    init(
        form: MultipartFormData,
        buffered: AppendBuffer? = nil,
        role: Role,
        callerSession: URLSession,
        requests: RequestMaker,
        pacer: MultipartPacer? = nil,
        reception: ResponseReception = .protocolAnswer,
        progress: ProgressCoalescer?,
        completion: @escaping Completion
    ) {
        self.form = form
        self.buffered = buffered
        self.pacer = pacer
        self.requests = requests
        // A form of unknown length goes out only in appends of bytes held in memory, which end where they end.
        let end: UInt64 = if case .append(_, let end, _) = role { end } else { 0 }
        contentLength = form.contentLength ?? end
        machine = StateMachine(
            role: role, contentLength: contentLength, contentType: form.contentType, oneShot: form.resendFailure,
            reception: reception)
        caller = CallerDelegate(callerSession)
        self.reception = reception
        self.progress = progress
        self.completion = completion
    }

    /// Applies an event to the machine under the lock, and returns its action for the caller to carry out.
    private func modify<Action>(_ event: (inout StateMachine) -> Action) -> Action {
        lock.withLock { event(&machine) }
    }

    /// What the current task's streams handed out, read outside the lock.
    private func bodyCount() -> StateMachine.BodyCount {
        let streams: [MultipartBodyStream] = lock.withLock { self.streams }
        return StateMachine.BodyCount(
            last: streams.last?.bytesRead ?? 0, furthest: streams.map(\.bytesRead).max() ?? 0,
            failure: streams.lazy.compactMap(\.failure).first)
    }

    /// Closes the current task's streams, which closes the file being read; `forgetting` them once their counts
    /// are of no more use (the machine has its last count, or a new task starts), else they still count.
    private func closeStreams(forgetting: Bool) {
        for stream in lock.withLock({ () -> [MultipartBodyStream] in
            defer { if forgetting { streams = [] } }
            return streams
        }) {
            stream.close()
        }
    }

    // MARK: Tasks

    /// A task that sends `request` on the caller session's private session, resumed by the caller of this method
    /// when the upload owns it; `nil` when the caller's session is gone.
    func makeTask(for request: URLRequest) -> URLSessionTask? {
        guard let session = caller.session else { return nil }
        let plan = modify { $0.plan(for: request) }
        if let start = plan.bodyStart { progress?.restart(at: start) }
        var request = plan.request
        if case .data(streamed: true) = plan.kind {
            request = RequestMaker.streaming(request, from: makeStream(modify { $0.bodyRequested() }))
        }
        let task = PrivateSessions.shared.makeTask(
            for: self, of: session, singleUse: plan.singleUse, started: plan.startsNow
        ) { session -> URLSessionTask in
            switch plan.kind {
            case .data: session.dataTask(with: request)
            case .streamedUpload: session.uploadTask(withStreamedRequest: request)
            case .uploadFromFile(let file): session.uploadTask(with: request, fromFile: file)
            }
        }
        let made = lock.withLock {
            self.task = task
            gate = CancelGate()
            (redirectAnswer, taskCancelled, taskRefused) = (nil, false, false)
            return machine.taskMade()
        }
        act(on: made, task: task)
        return task
    }

    /// ``makeTask(for:)`` for a task handed to the caller, which is always an upload task.
    func makeUploadTask(for request: URLRequest) -> URLSessionUploadTask? {
        makeTask(for: request) as? URLSessionUploadTask
    }

    private func act(on action: StateMachine.TaskMadeAction, task: URLSessionTask) {
        switch action {
        case .pinCaller: caller.pin()
        case .cancel: cancelTask(task)
        case .none: break
        }
    }

    /// The task, which the upload did not start itself, began: from now on it keeps the caller's session alive,
    /// as URLSession keeps a task's session.
    func taskBegan() {
        if case .pinCaller = modify({ $0.taskBegan() }) { caller.pin() }
    }

    /// Stops progress (when it is this upload's own), closes every body stream at once, which closes the file being
    /// read, and cancels the task. Returns at once, and no progress is reported after it returns: Linux URLSession
    /// cancels a task on the queue that reads the body, which a caller stream blocked in `read` holds until it
    /// returns, so the task is cancelled from another thread.
    func cancel() {
        // The task read under the same lock as the machine's answer, which says whether there is one.
        let (action, task) = lock.withLock { () -> (StateMachine.CancelAction, URLSessionTask?) in
            (machine.cancel(), self.task)
        }
        guard case .cancel(let hasTask, let endsProgress) = action else { return }
        if endsProgress { progress?.finish() }
        // Still counted: how far they reached bounds what the server may say it has.
        closeStreams(forgetting: false)
        if hasTask { cancelOffQueue(task) }
    }

    func cancel(handedOut task: URLSessionTask) -> Bool {
        guard lock.withLock({ task === self.task }) else { return false }
        cancel()
        return true
    }

    // MARK: Body

    /// A body for the task, which asks for one when it starts and again when URLSession resends it by itself (a
    /// 401 answered, or on Linux a reused connection that died).
    func bodyStream(for task: URLSessionTask) -> InputStream {
        makeStream(modify { $0.bodyRequested() })
    }

    /// The stream the machine asks for, the temporary file written first where it must be: outside the lock, which
    /// cancel() must never wait for; the delegate queue is serial, so a second ask (a resend) comes after this one.
    private func makeStream(_ action: StateMachine.BodyAction) -> MultipartBodyStream {
        let source: StateMachine.StreamSource
        switch action {
        case .makeStream(let made):
            source = made
        case .writeFile(let url):
            var failure: MultipartError?
            do throws(MultipartError) {
                // A cancel stops the write at its next chunk; the task it was for is ending.
                _ = try TemporaryBody.write(form, to: url, until: { [self] in modify { $0.isCancelled } })
            } catch {
                failure = error
            }
            source = modify { $0.fileWritten(failure) }
        }
        let stream: MultipartBodyStream
        switch source {
        case .form(let range):
            var report: (@Sendable (UInt64) -> Void)?
            progress?.restart(at: range.lowerBound)
            if let progress { report = { progress.report(range.lowerBound + $0) } }
            stream = MultipartBodyStream(
                buffered.map { .buffered($0, range) } ?? .form(form, offset: range.lowerBound, end: range.upperBound),
                pacer: pacer, progressHandler: report)
        case .encodedFile(let url):
            progress?.restart(at: 0)
            stream = MultipartBodyStream(
                .encodedFile(url, length: contentLength), progressHandler: progress.map { $0.report })
        case .failing(let error):
            stream = MultipartBodyStream(.failing(error))
        }
        let made = lock.withLock {
            streams.append(stream)
            return machine.streamMade()
        }
        if case .close = made { stream.close() }
        return stream
    }

    /// URLSession's count of body bytes sent, which only a body it reads itself needs.
    func sentBody(totalBytesSent: Int64) {
        if case .report(let sent) = modify({ $0.sentBody(totalBytesSent: totalBytesSent) }) { progress?.report(sent) }
    }

    /// How far into the form the upload's bodies reached, from the form's first byte: the most of it a server can
    /// have.
    var furthestHandedOut: UInt64 {
        let count = bodyCount()
        return modify { $0.furthestHandedOut(count) }
    }

    /// How far into the form the upload had handed out bytes when the head of its answer came, once it has ended
    /// with one: the most of the form the server can have had when it answered, which its answer was judged on.
    var handedOutAtAnswer: UInt64? {
        modify { $0.handedOutAtAnswer }
    }

    // MARK: Response

    func receivedResponse(_ response: URLResponse) {
        let count = bodyCount()
        modify { $0.responseBegan(count, response: response) }
    }

    /// Keeps, delivers or stops at a piece of the answer's body, as its reception says.
    func received(_ data: Data, task: URLSessionTask) {
        switch modify({ $0.received(data) }) {
        case .none:
            break
        case .deliver(let data):
            do {
                guard let sink = reception.sink, let response = task.response as? HTTPURLResponse else {
                    return
                }
                try sink.write(data, of: response, by: ObjectIdentifier(self))
            } catch {
                if modify({ $0.sinkFailed(because: error) }) { cancelOffQueue(task) }
            }
        case .stop:
            // The caller is told when the task has stopped, not before: a request made meanwhile (a resumable
            // upload's next) would open another connection while this one is still read, on the one thread that
            // must also stop it.
            cancelOffQueue(task)
        }
    }

    /// Cancels `task` from another thread: Linux URLSession cancels on its own thread, which may be waiting for the
    /// delegate queue (``PacedDelegateQueue``) or held by a caller stream blocked in `read`.
    private func cancelOffQueue(_ task: URLSessionTask?) {
        guard let task, let gate = needsCancel(task) else { return }
        DispatchQueue.global().async { gate.cancel(task) }
    }

    private func cancelTask(_ task: URLSessionTask) {
        needsCancel(task)?.cancel(task)
    }

    /// Stops `task` as far as the upload can without cancelling it, and returns the gate to cancel it through when
    /// it must still be: not when it is no longer the current task (whose end was heard, since only that makes the
    /// next), nor when its redirect waits for its answer or was refused. Linux URLSession ends a task at once when
    /// its redirect is refused (the 3xx becomes its answer, which a cancelled upload does not take), and traps when a
    /// redirect's answer comes after a cancel.
    private func needsCancel(_ task: URLSessionTask) -> CancelGate? {
        lock.withLock {
            guard task === self.task else { return nil }
            giveRedirectAnswer(nil)
            taskCancelled = true
            return taskRefused ? nil : gate
        }
    }

    /// Gives the current task's waiting redirect its answer, unless a cancel came first.
    private func answerRedirect(_ request: URLRequest?) {
        lock.withLock { giveRedirectAnswer(request) }
    }

    /// Gives the waiting redirect `request`, under the lock: an answer taken out and given outside it could reach
    /// URLSession after a cancel made meanwhile on another thread (which finds no answer left to give first), and a
    /// stopped task's answer traps the process. Giving it only queues it on the task's own queue, which never waits
    /// for this lock; the cancel, which may wait for that queue, is made after the lock is let go.
    private func giveRedirectAnswer(_ request: URLRequest?) {
        guard let answer = redirectAnswer else { return }
        redirectAnswer = nil
        if request == nil { taskRefused = true }
        answer(request)
    }

    /// The redirect's request is made as every request is (``RequestMaker``: the fresh headers, then the origin
    /// rule); then the caller's delegate decides, as it would for its own tasks, on that request.
    func redirect(
        task: URLSessionTask,
        response: HTTPURLResponse,
        proposed: URLRequest,
        within seconds: TimeInterval,
        answer: @escaping @Sendable (URLRequest?) -> Void
    ) {
        let sent = task.currentRequest ?? task.originalRequest
        let location = response.value(forHTTPHeaderField: "Location")
        // A task already cancelled ends by that cancel; an answer now would reach it stopped.
        let waiting = lock.withLock { () -> Int? in
            guard task === self.task, !taskCancelled else { return nil }
            redirectAnswer = answer
            redirectsMet += 1
            return redirectsMet
        }
        guard let waiting else { return }
        // Weak: an upload that ended meanwhile is not kept for the deadline's sake.
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [weak self] in
            guard let self else { return }
            lock.withLock {
                guard redirectsMet == waiting, redirectAnswer != nil else { return }
                machine.redirectFailed(because: RedirectDeadline.timedOut(after: seconds, url: sent?.url))
                giveRedirectAnswer(nil)
            }
        }
        guard
            case .make(let resolved) = modify({
                $0.redirectMet(proposed: proposed, location: location, from: sent?.url)
            }
            )
        else { return answerRedirect(nil) }
        let ask: @Sendable (URLRequest) -> Void = { proposal in
            self.caller.redirect(response, to: proposal, task: task) { request in
                switch self.modify({ $0.redirectAnswered(statusCode: response.statusCode, answer: request, sent: sent) }
                )
                {
                case .follow(let request): self.answerRedirect(request)
                case .refuse: self.answerRedirect(nil)
                }
            }
        }
        guard requests.asksHook else {
            // Nothing to wait for: made here, on URLSession's queue, as URLSession's own redirects are.
            return ask(requests.judged(resolved))
        }
        // The hook may wait: asked off URLSession's queue. A cancel meanwhile cancels the task, which then ends.
        Task {
            do {
                ask(try await requests.make(resolved, .asProposed, for: .redirect(response)))
            } catch {
                modify { $0.redirectFailed(because: error) }
                answerRedirect(nil)
            }
        }
    }

    /// The caller's delegate answers first; what it leaves to the default, ``ChallengePolicy`` answers.
    func challenge(
        _ challenge: URLAuthenticationChallenge,
        task: URLSessionTask,
        storage: URLCredentialStorage?,
        answer: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        caller.challenge(challenge, task: task) { disposition, credential in
            let fallback = ChallengePolicy.defaultAnswer(to: challenge, storage: storage)
            let chosen = self.modify {
                $0.challengeAnswered(
                    caller: .init(disposition: disposition, credential: credential),
                    fallback: .init(disposition: fallback.0, credential: fallback.1))
            }
            answer(chosen.disposition, chosen.credential)
        }
    }

    func collected(_ metrics: URLSessionTaskMetrics, task: URLSessionTask) {
        caller.metrics(metrics, task: task)
    }

    #if canImport(Darwin)
        func waitingForConnectivity(task: URLSessionTask) {
            caller.waitingForConnectivity(task: task)
        }
    #endif

    // MARK: Completion

    /// No task will be made for the upload (cancelled first, or the caller's session is gone): it ends now, its
    /// temporary body removed, where nothing else would end it.
    func taskNotMade() {
        if case .finish(let finish) = modify({ $0.taskNotMade() }) { self.finish(finish) }
    }

    /// The task ended: send the form again, or tell the caller, as the machine says.
    func taskCompleted(_ task: URLSessionTask, error: (any Error)?) {
        // First, while URLSession still holds the task: a cancel under way then ends before URLSession lets it go.
        lock.withLock { task === self.task ? gate : nil }?.taskEnded(task)
        let count = bodyCount()
        switch modify({ $0.taskEnded(error: error, response: task.response, body: count) }) {
        case .resend(let request):
            // Made already, when the redirect was met: the fresh headers were asked then.
            closeStreams(forgetting: true)
            resend(request)
        case .finish(let finish):
            self.finish(finish)
        case .none:
            break
        }
    }

    /// Sends the form again with `request` on a new task.
    private func resend(_ request: URLRequest) {
        if let next = makeTask(for: request) { return next.resume() }
        if case .finish(let finish) = modify({ $0.resendFailed() }) { self.finish(finish) }
    }

    private func finish(_ finish: StateMachine.Finish) {
        var finish = finish
        if let sink = reception.sink {
            finish.result = handing(finish.result, to: sink, holding: finish.answerGoesToSink)
        }
        closeStreams(forgetting: true)
        progress?.settle(at: finish.bytesSent)
        if finish.endsProgress { progress?.finish() }
        caller.unpin()
        if let file = finish.removing { try? FileManager.default.removeItem(at: file) }
        completion(finish.result)
    }

    /// The result once the sink has the answer: a body held in memory (an answer another might have followed)
    /// goes to it now that it is the answer; the caller gets no bytes of it.
    private func handing(
        _ result: Result<(Data, URLResponse), any Error>, to sink: ResponseSink, holding goesToSink: Bool
    ) -> Result<(Data, URLResponse), any Error> {
        guard case .success(let (data, response)) = result else {
            if case .failure(let error) = result { sink.ended(by: ObjectIdentifier(self), error: error) }
            return result
        }
        let http = response as? HTTPURLResponse
        guard goesToSink else { return result }
        do {
            if let http, !data.isEmpty { try sink.write(data, of: http, by: ObjectIdentifier(self)) }
            return .success((Data(), response))
        } catch {
            return modify { $0.answerRefused(because: error, response: response) }
        }
    }
}
