import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UploadRequest {
    /// The decisions of one upload across its tasks, without I/O: every event (a task made, a body asked for, a
    /// redirect or challenge answered, a cancel, the task's end) goes in, and the action the shell carries out comes
    /// out. The fixed facts (the role, the form's length) are given once. It holds values only: the shell keeps the
    /// body streams and tells it what they handed out (``BodyCount``).
    struct StateMachine {
        /// What the current task's body streams handed out, read by the shell: the machine never touches a stream.
        struct BodyCount {
            /// Bytes the latest stream handed out (the one the last request read).
            var last: UInt64 = 0
            /// The most bytes any of the task's streams handed out: a resend may hand out fewer than the request
            /// before it, which the server may have read.
            var furthest: UInt64 = 0
            /// The first stream's failure, naming the part; URLSession only says the upload was aborted.
            var failure: MultipartError?
            /// Whether the latest stream had handed out its last byte: what says a body of unknown length is whole.
            var lastByte = false
        }

        /// The current task's exchange: what it was given and what came back.
        struct Exchange {
            /// Tasks started after the first one, to send the form again.
            var resends: Int
            /// Whether the exchange's task was made: the shell holds it, the machine only knows it exists.
            var hasTask = false
            /// How many body streams the task was given.
            var streamsMade = 0
            /// The latest response's body, within its bound: a 401's or a redirect's is dropped when the next
            /// response begins.
            var answer = ReceivedBody()
            /// Body bytes URLSession reported sent, where it reads the body itself.
            var fileBytesSent: UInt64 = 0
            /// The form's bytes handed out when the latest response's head arrived: a server cannot have read more
            /// than this before it answered, whatever it reads (and discards) afterwards.
            var bytesAtResponse: UInt64?
            /// Whether the body had handed out its last byte when the latest response's head arrived.
            var lastByteAtResponse = false
            /// The upload cancelled a challenge for want of a credential: the 401 or 407 is then the answer.
            var gaveUpChallenge = false
            /// Challenges answered with a credential: each lets URLSession send a body that goes out once again,
            /// since a server applies no part of a request it refused for want of a credential.
            var answeredChallenges = 0
            /// The redirect this task sends the form again for: its request and status.
            var resending: (request: URLRequest, statusCode: Int)?
            /// The temporary file of a `.fileToWrite` body once written (`.file`), or the failure to write it
            /// (`.failed`), which every later ask for the body gets.
            var written: UploadBody?

            /// The body bytes handed out: what URLSession reported sent where it reads the body itself, else what
            /// the latest stream handed out (the one the last request read; after a 301-303 the first request's,
            /// since the GET reads none).
            func bodyBytesHandedOut(_ count: BodyCount, countedByURLSession: Bool) -> UInt64 {
                countedByURLSession ? fileBytesSent : count.last
            }

            /// The most body bytes any of the task's streams handed out.
            func furthestBodyBytes(_ count: BodyCount, countedByURLSession: Bool) -> UInt64 {
                countedByURLSession ? fileBytesSent : count.furthest
            }
        }

        enum State {
            /// No task yet.
            case idle
            /// A task sends the request.
            case sending(Exchange)
            /// The task was stopped so that the form goes again with this request, once it ends; `statusCode` is
            /// the redirect's.
            case awaitingResend(URLRequest, statusCode: Int, Exchange)
            /// The task was stopped (a redirect that cannot be followed, the headers hook's error), and the upload
            /// fails with this reason.
            case stopping(any Error, Exchange)
            /// The caller cancelled; the task ends by itself.
            case cancelled(Exchange)
            /// The caller has been told; `furthest` is how far into the form the upload's bodies reached, `atAnswer`
            /// how far when the last answer's head came.
            case finished(furthest: UInt64, atAnswer: UInt64?)
            /// Held only while an exchange changes in place (``modifyExchange(_:)``), so that its response body is
            /// the one reference to its buffer; never seen by an event.
            case modifying
        }

        let role: Role
        let contentLength: UInt64
        /// The form's `Content-Type`.
        let contentType: String
        /// The first byte of the form the body holds, and how many bytes it holds.
        let bodyStart: UInt64
        let bodyLength: UInt64
        /// The body the role sends; a file to write is written once its task asks for it (``Exchange/written``).
        let body: UploadBody
        /// Why the form cannot be sent again, where it cannot: its one-shot part, named.
        let oneShot: MultipartError?
        /// How the answers' bodies are kept.
        let reception: ResponseReception
        /// Whether the body's length is known: a caller's stream of unknown length (which only the streamed delegate
        /// sends, chunked) is whole once it handed out its last byte.
        let lengthIsKnown: Bool
        private(set) var state = State.idle

        init(
            role: Role, contentLength: UInt64, contentType: String, oneShot: MultipartError? = nil,
            reception: ResponseReception = .protocolAnswer, lengthIsKnown: Bool = true
        ) {
            self.role = role
            self.lengthIsKnown = lengthIsKnown
            self.reception = reception
            self.oneShot = oneShot
            self.contentLength = contentLength
            self.contentType = contentType
            body = role.body
            switch role.body {
            case .none:
                (bodyStart, bodyLength) = (0, 0)
            case .part(let range):
                bodyStart = min(range.lowerBound, contentLength)
                bodyLength = min(range.upperBound, contentLength) - bodyStart
            default:
                (bodyStart, bodyLength) = (0, contentLength)
            }
        }

        // MARK: Tasks

        /// The kind of task that sends the body.
        enum TaskKind: Equatable {
            /// A data task whose request carries a new body stream: an upload the upload owns.
            case data(streamed: Bool)
            /// An upload task that asks its delegate for a body stream.
            case streamedUpload
            /// An upload task that URLSession reads from this file itself.
            case uploadFromFile(URL)
        }

        /// How to make a task for a request.
        struct TaskPlan {
            var kind: TaskKind
            /// The request as the body's: its method, headers and length.
            var request: URLRequest
            /// Whether the task gets a session of its own.
            var singleUse: Bool
            /// Whether the upload resumes the task at once, rather than the caller whenever it likes.
            var startsNow: Bool
            /// Where in the form the task's body starts, for a task that carries one: progress goes back there.
            var bodyStart: UInt64?
        }

        /// The task to make for `request`.
        func plan(for request: URLRequest) -> TaskPlan {
            let kind: TaskKind
            if body.isReadByURLSession, let file = body.temporaryFile {
                kind = .uploadFromFile(file)
            } else if role.ownsTask {
                kind = .data(streamed: body.carriesForm && body.bytes == nil)
            } else {
                kind = .streamedUpload
            }
            return TaskPlan(
                kind: kind, request: framed(request), singleUse: role.ownsConnection, startsNow: role.ownsTask,
                bodyStart: body.carriesForm ? bodyStart : nil)
        }

        /// `request` framed as the form's (``RequestMaker/framed(_:contentType:body:)``); a request without a body of
        /// the form is sent as it is.
        private func framed(_ request: URLRequest) -> URLRequest {
            guard body.carriesForm else { return request }
            return RequestMaker.framed(
                request, contentType: role.contentType(ofForm: contentType),
                body: body.bytes.map { .bytes($0) } ?? .length(bodyLength))
        }

        enum TaskMadeAction {
            /// The task is the upload's: keep the caller's session alive while it runs.
            case pinCaller
            /// The upload was cancelled meanwhile: cancel the new task at once (it would otherwise run).
            case cancel
            /// A task handed to the caller: nothing until it begins.
            case none
        }

        /// A task was made for the upload.
        mutating func taskMade() -> TaskMadeAction {
            switch state {
            case .idle:
                state = .sending(Exchange(resends: 0, hasTask: true))
            case .sending(var exchange):
                // The resend's task, made after `taskEnded` said so.
                exchange.hasTask = true
                state = .sending(exchange)
            case .cancelled(var exchange):
                exchange.hasTask = true
                state = .cancelled(exchange)
                return .cancel
            case .awaitingResend, .stopping, .finished:
                return .cancel
            case .modifying:
                Self.changing()
            }
            return role.ownsTask ? .pinCaller : .none
        }

        /// The caller's task sent its first event: it keeps the caller's session alive from now on.
        func taskBegan() -> TaskMadeAction {
            if case .finished = state { return .none }
            return .pinCaller
        }

        // MARK: Bodies

        /// Where a new body stream reads from.
        enum StreamSource {
            /// The form's bytes in this range.
            case form(Range<UInt64>)
            /// The temporary file the form was written to.
            case encodedFile(URL)
            /// A stream that fails at once with this error.
            case failing(MultipartError)
        }

        enum BodyAction {
            /// Make a stream of this source and hand it over.
            case makeStream(StreamSource)
            /// Write the form to this temporary file first, outside the lock, then tell ``fileWritten(_:)``.
            case writeFile(URL)
        }

        /// The task asks for a body: when it starts, and again when URLSession resends by itself (a 401 answered,
        /// or on Linux a reused connection that died).
        func bodyRequested() -> BodyAction {
            if role.sendsBodyOnce, case .sending(let exchange) = state,
                exchange.streamsMade > exchange.answeredChallenges
            {
                // A part of a resumable upload must not go out twice at the same offset: that resend fails, and
                // the upload asks the server instead; unless the server refused it for want of a credential,
                // which has now been given.
                return .makeStream(.failing(MultipartError(.appendResent)))
            }
            if case .fileToWrite(let url) = body {
                guard let written = exchange?.written else { return .writeFile(url) }
                return .makeStream(source(of: written))
            }
            return .makeStream(source(of: body))
        }

        /// The temporary file was written, or failed (`error`): the failure is kept for every later ask.
        mutating func fileWritten(_ error: MultipartError?) -> StreamSource {
            guard case .fileToWrite(let url) = body else { return source(of: body) }
            let written = error.map(UploadBody.failed) ?? .file(url)
            if case .idle = state {
                // Asked for before its task was made, as a data task's body is.
                state = .sending(Exchange(resends: 0, written: written))
            } else {
                modifyExchange { $0.written = written }
            }
            return source(of: written)
        }

        private func source(of body: UploadBody) -> StreamSource {
            switch body {
            case .none, .stream, .inMemory, .fileToWrite:
                .form(0..<contentLength)
            case .part(let range):
                .form(range)
            case .file(let url):
                .encodedFile(url)
            case .failed(let error):
                .failing(error)
            }
        }

        enum StreamMadeAction {
            case hand
            /// The upload was cancelled: close the stream before handing it over.
            case close
        }

        /// A body stream was made for the current task.
        mutating func streamMade() -> StreamMadeAction {
            switch state {
            case .idle:
                // The body of a data task's request, made before its task.
                state = .sending(Exchange(resends: 0, streamsMade: 1))
                return .hand
            case .finished:
                return .close
            case .modifying:
                Self.changing()
            case .sending, .awaitingResend, .stopping, .cancelled:
                modifyExchange { $0.streamsMade += 1 }
                if case .cancelled = state { return .close }
                return .hand
            }
        }

        enum SentBodyAction: Equatable {
            /// Report this count of the form's bytes as the upload's progress.
            case report(UInt64)
            /// Nothing: the body's streams count and report their own.
            case none
        }

        /// URLSession's count of body bytes sent, which is the body's count only where URLSession reads the body
        /// itself (streams count their own, since URLSession's counts for them are 0 on Linux).
        mutating func sentBody(totalBytesSent: Int64) -> SentBodyAction {
            guard body.isReadByURLSession else { return .none }
            // Linux URLSession goes on counting when it sends the bytes again after a 401, on the same task.
            let sent = min(UInt64(max(0, totalBytesSent)), bodyLength)
            modifyExchange { $0.fileBytesSent = sent }
            return .report(bodyStart + sent)
        }

        /// How far into the form the upload's bodies reached, the task's streams having handed out `count`: the
        /// most of it a server can have, as the bound of a resumable upload's offsets and the count its stall watch
        /// reads.
        func furthestHandedOut(_ count: BodyCount) -> UInt64 {
            switch state {
            case .finished(let furthest, _): furthest
            default: exchange.map { furthestHandedOut(by: $0, count) } ?? bodyStart
            }
        }

        /// The current task's exchange, in whichever state holds it.
        private var exchange: Exchange? {
            switch state {
            case .sending(let exchange), .awaitingResend(_, _, let exchange), .stopping(_, let exchange),
                .cancelled(let exchange):
                exchange
            case .idle, .finished: nil
            case .modifying: Self.changing()
            }
        }

        // MARK: Response

        /// A response began (`nil`: no head to judge), the task's streams having handed out `count`; a 401's or a
        /// redirect's body comes before the response that counts.
        mutating func responseBegan(_ count: BodyCount = BodyCount(), response: URLResponse? = nil) {
            let (start, countedByURLSession, reception) = (bodyStart, body.isReadByURLSession, reception)
            modifyExchange {
                let handedOut = start + $0.bodyBytesHandedOut(count, countedByURLSession: countedByURLSession)
                $0.answer = ReceivedBody(response, handedOut: handedOut, as: reception)
                $0.bytesAtResponse = handedOut
                $0.lastByteAtResponse = count.lastByte
            }
        }

        enum ReceivedAction {
            /// Kept, or dropped past the bound: nothing to do.
            case none
            /// Hand these bytes to the sink.
            case deliver(Data)
            /// Stop the task: the answer's bound is reached, and nothing more of it is needed. Its end, with the
            /// cancel's error, is judged as the answer so far (``ReceivedBody/cutShort``).
            case stop
        }

        /// A piece of the response's body arrived.
        mutating func received(_ data: Data) -> ReceivedAction {
            var action = ReceivedAction.none
            // In place: a copy of the exchange would copy its body on every piece.
            modifyExchange { exchange in
                switch exchange.answer.take(data) {
                case .kept: break
                case .deliver: action = .deliver(data)
                case .stop: action = .stop
                }
            }
            return action
        }

        /// The sink could not take the answer (`error`): the task stops, and the upload fails with that error.
        /// Returns whether the task is to be stopped.
        mutating func sinkFailed(because error: any Error) -> Bool {
            switch state {
            case .sending(let exchange):
                state = .stopping(error, exchange)
                return true
            case .idle: Self.impossible("the sink's failure")
            case .modifying: Self.changing()
            // A cancel, or another stop, came first: the task ends by it.
            case .awaitingResend, .stopping, .cancelled, .finished: return false
            }
        }

        enum RedirectAction: Equatable {
            /// Hand this request to URLSession.
            case follow(URLRequest)
            /// Answer `nil`: the 3xx is the answer, or the task stops (to resend, or to fail).
            case refuse
        }

        enum RedirectMetAction: Equatable {
            /// Make this request, URLSession's with its URL resolved by RFC 3986, into the next one (the headers
            /// hook, the origin rule: ``RequestMaker``), then ask the caller's delegate about it (it may put
            /// credentials back on purpose).
            case make(URLRequest)
            /// Answer `nil` at once: the 3xx is the answer.
            case keepResponse
        }

        /// The task met a redirect to `location` (its `Location` field) from `sent`, which URLSession proposes to
        /// follow with `proposed`.
        func redirectMet(proposed: URLRequest, location: String?, from sent: URL?) -> RedirectMetAction {
            guard role.followsRedirects else { return .keepResponse }
            // Aimed at its `Location` as RFC 3986 resolves it, where it can be: URLSession's URL otherwise.
            return .make(RequestMaker.aimed(proposed, .init(url: RedirectPolicy.target(of: location, from: sent))))
        }

        /// The redirect's request could not be made (the headers hook failed with `error`): the task stops, and the
        /// upload fails with that error.
        mutating func redirectFailed(because error: any Error) {
            switch state {
            case .sending(let exchange): state = .stopping(error, exchange)
            case .idle: Self.impossible("a redirect's failure")
            case .modifying: Self.changing()
            // The hook failed after a cancel, after the deadline stopped the task, or after the task ended.
            case .awaitingResend, .stopping, .cancelled, .finished: break
            }
        }

        /// The caller's delegate answered a redirect with `answer` (or `nil`), after a `statusCode` answer to
        /// `sent`.
        mutating func redirectAnswered(statusCode: Int, answer: URLRequest?, sent: URLRequest?) -> RedirectAction {
            let exchange: Exchange
            switch state {
            case .sending(let running): exchange = running
            case .idle: Self.impossible("a redirect's answer")
            case .modifying: Self.changing()
            // The caller's delegate answered after a cancel, after the deadline, or after the task ended.
            case .awaitingResend, .stopping, .cancelled, .finished: return .refuse
            }
            let canResend = role.ownsTask && exchange.resends < RedirectPolicy.maximumResends
            switch RedirectPolicy.decide(statusCode: statusCode, answer: answer, sent: sent, canResend: canResend) {
            case .follow(let answer, let edit):
                return .follow(RequestMaker.following(answer, edit))
            case .keepResponse:
                return .refuse
            case .resend(let answer, let edit):
                let request = RequestMaker.following(answer, edit)
                // Known before any request goes out: a one-shot part was read by this request already.
                if let oneShot {
                    state = .stopping(oneShot, exchange)
                } else {
                    state = .awaitingResend(request, statusCode: statusCode, exchange)
                }
                return .refuse
            case .fail(let error):
                state = .stopping(error, exchange)
                return .refuse
            }
        }

        /// How a challenge is answered.
        struct ChallengeAnswer {
            var disposition: URLSession.AuthChallengeDisposition
            var credential: URLCredential?
        }

        /// The caller's delegate answered a challenge with `caller`; `fallback` is the answer where it left it to
        /// the default. A challenge cancelled for want of a credential makes the 401 or 407 the answer; one answered
        /// with a credential lets URLSession send the request again.
        mutating func challengeAnswered(caller: ChallengeAnswer, fallback: ChallengeAnswer) -> ChallengeAnswer {
            guard caller.disposition == .performDefaultHandling else { return counted(caller) }
            if fallback.disposition == .cancelAuthenticationChallenge { modifyExchange { $0.gaveUpChallenge = true } }
            return counted(fallback)
        }

        private mutating func counted(_ answer: ChallengeAnswer) -> ChallengeAnswer {
            if answer.disposition == .useCredential, answer.credential != nil {
                modifyExchange { $0.answeredChallenges += 1 }
            }
            return answer
        }

        // MARK: Cancel

        enum CancelAction {
            /// Close these streams and cancel the task, where one was made (`hasTask`); end progress when it is the
            /// upload's own (not one request's of a resumable upload, whose progress goes on).
            case cancel(hasTask: Bool, endsProgress: Bool)
            /// Nothing: cancelled or finished already.
            case none
        }

        /// Whether the upload was cancelled: a temporary body being written stops.
        var isCancelled: Bool {
            if case .cancelled = state { return true }
            return false
        }

        /// The caller cancelled.
        mutating func cancel() -> CancelAction {
            let exchange: Exchange
            switch state {
            case .idle: exchange = Exchange(resends: 0)
            case .sending(let running), .awaitingResend(_, _, let running), .stopping(_, let running):
                exchange = running
            case .cancelled, .finished: return .none
            case .modifying: Self.changing()
            }
            state = .cancelled(exchange)
            return .cancel(hasTask: exchange.hasTask, endsProgress: role.finishesProgress)
        }

        // MARK: The task's end

        /// How the upload ends: close the task's streams, settle progress at the bytes handed out (and end it if
        /// it is the upload's), remove the temporary file if there is one, and tell the caller.
        struct Finish {
            var result: Result<(Data, URLResponse), any Error>
            /// The form's bytes handed out to the last request, counted from the form's first byte: the count the
            /// verdict read.
            var bytesSent: UInt64
            var endsProgress: Bool
            var removing: URL?
            /// Whether the answer's body, held in memory, goes to the sink: it is the upload's.
            var answerGoesToSink = false
        }

        enum EndAction {
            /// Close the task's streams and send the form again with this request, on a new task.
            case resend(URLRequest)
            case finish(Finish)
            /// Nothing: the caller has been told.
            case none
        }

        /// The current task ended with `error` and `response`, its streams having handed out `count`.
        mutating func taskEnded(error: (any Error)?, response: URLResponse?, body count: BodyCount = BodyCount())
            -> EndAction
        {
            let exchange: Exchange
            var stopReason: (any Error)?
            var isCancelled = false
            switch state {
            case .idle: Self.impossible("a task's end")
            case .sending(let running): exchange = running
            case .awaitingResend(let request, let statusCode, let running) where error == nil && count.failure == nil:
                state = .sending(Exchange(resends: running.resends + 1, resending: (request, statusCode)))
                return .resend(request)
            case .awaitingResend(_, _, let running): exchange = running
            case .stopping(let reason, let running):
                exchange = running
                stopReason = reason
            case .cancelled(let running):
                exchange = running
                isCancelled = true
            case .finished: return .none
            case .modifying: Self.changing()
            }
            var outcome = RequestOutcome(
                bodyFailure: count.failure, stopReason: stopReason, isCancelled: isCancelled, response: response,
                error: error, gaveUpChallenge: exchange.gaveUpChallenge,
                // What was handed out when the answer's head arrived, not by the task's end: a server that answers
                // at once and then drains the body unread (a lingering close) gets all of it afterwards. After a
                // 301-303 the count is the first request's: a server that redirected without reading the form never
                // got it either.
                handedOut: exchange.bytesAtResponse ?? bytesHandedOut(by: exchange, count),
                bodyEnd: lengthIsKnown ? bodyStart + bodyLength : nil,
                handedOutLastByte: exchange.bytesAtResponse == nil ? count.lastByte : exchange.lastByteAtResponse,
                formLength: lengthIsKnown ? contentLength : nil, received: exchange.answer.data,
                cutShort: exchange.answer.cutShort, passedLimit: exchange.answer.passedLimit)
            if case .failed(let failure) = exchange.written { outcome.bodyFailure = failure }
            if let http = response as? HTTPURLResponse {
                outcome.takesEarlySuccess = role.takesEarlySuccess(http)
                // Settled when its head arrived; an answer whose head came only with the task's end, here.
                let settled =
                    exchange.answer.statusCode == http.statusCode
                    ? exchange.answer.reception : reception.settled(for: http, handedOut: outcome.handedOut)
                outcome.refusesStatus = settled.refuses(http.statusCode)
            }
            return .finish(finish(outcome.verdict, exchange: exchange, count))
        }

        /// What the caller is answered the moment it cancels, before the task ends: judged as every request's end
        /// is, as one that was cancelled. The task ends on its own later, when URLSession's queue, which a caller
        /// stream blocked in `read` may hold, gets to the cancel.
        static var answerToACancel: Result<(Data, URLResponse), any Error> {
            RequestOutcome(isCancelled: true).verdict
        }

        /// No task will be made for the upload's request: it was cancelled before its task was asked for, or the
        /// caller's session is gone. No task will end to finish the upload, so it ends here, and its temporary body
        /// with it.
        mutating func taskNotMade() -> EndAction {
            let cancelled = Self.answerToACancel
            switch state {
            case .idle:
                return .finish(finish(cancelled, exchange: Exchange(resends: 0), BodyCount()))
            case .sending(let exchange) where !exchange.hasTask, .cancelled(let exchange) where !exchange.hasTask:
                return .finish(finish(cancelled, exchange: exchange, BodyCount()))
            default:
                return .none
            }
        }

        /// The resend could not start: the caller's fresh headers failed with `error`, or (`nil`) the caller's
        /// session is gone, and with it the private session to send on, and the caller is told which redirect was
        /// not followed.
        mutating func resendFailed(because error: (any Error)? = nil) -> EndAction {
            // Cancelled before the resend's task was made: no task will end, so the upload ends here.
            if case .cancelled(let exchange) = state, !exchange.hasTask { return taskNotMade() }
            guard case .sending(let exchange) = state, !exchange.hasTask, let resending = exchange.resending
            else { return .none }
            // Judged as every request's end is: stopped by the upload, for this reason.
            let reason =
                error
                ?? MultipartError(
                    .redirectNotFollowed(statusCode: resending.statusCode, location: resending.request.url))
            return .finish(finish(RequestOutcome(stopReason: reason).verdict, exchange: exchange, BodyCount()))
        }

        /// The sink could not take the answer the upload finished with (`error`): the upload fails, judged as a
        /// request the upload stopped for that reason, as when the sink fails while the answer arrives
        /// (``sinkFailed(because:)``). Only a finished upload has an answer to hand over.
        func answerRefused(because error: any Error, response: URLResponse) -> Result<(Data, URLResponse), any Error> {
            guard case .finished = state else {
                preconditionFailure("the upload's machine was told its answer was refused before it had finished")
            }
            return RequestOutcome(stopReason: error, response: response).verdict
        }

        private mutating func finish(
            _ result: Result<(Data, URLResponse), any Error>, exchange: Exchange, _ count: BodyCount
        ) -> Finish {
            state = .finished(furthest: furthestHandedOut(by: exchange, count), atAnswer: exchange.bytesAtResponse)
            return Finish(
                result: result, bytesSent: bytesHandedOut(by: exchange, count), endsProgress: role.finishesProgress,
                removing: body.temporaryFile, answerGoesToSink: exchange.answer.goesToSink)
        }

        /// The form's bytes the exchange's body handed out, from the form's first byte.
        private func bytesHandedOut(by exchange: Exchange, _ count: BodyCount) -> UInt64 {
            bodyStart + exchange.bodyBytesHandedOut(count, countedByURLSession: body.isReadByURLSession)
        }

        /// How far into the form the request had handed out bytes when the head of its answer came, once it has
        /// ended with one: the most of the form the server can have had when it answered.
        var handedOutAtAnswer: UInt64? {
            if case .finished(_, let atAnswer) = state { return atAnswer }
            return nil
        }

        /// How far into the form any of the exchange's bodies reached, from the form's first byte.
        private func furthestHandedOut(by exchange: Exchange, _ count: BodyCount) -> UInt64 {
            bodyStart + exchange.furthestBodyBytes(count, countedByURLSession: body.isReadByURLSession)
        }

        /// An event that cannot come in the state the machine is in (a task's event before any task was made): the
        /// shell that called it is wrong, and an upload ended in a made-up way would hide it.
        private static func impossible(_ event: String) -> Never {
            preconditionFailure("the upload's machine got \(event) before any task was made")
        }

        /// An event came while an exchange was changing in place: the machine was entered twice under its lock.
        private static func changing() -> Never {
            preconditionFailure("an event reached the upload's machine while its exchange was changing")
        }

        /// Changes the current exchange, in whichever state holds it. The state is emptied while the exchange
        /// changes, so that its response body (megabytes, in many pieces) is the only reference to its buffer and
        /// grows in place instead of being copied whole on every piece.
        private mutating func modifyExchange(_ change: (inout Exchange) -> Void) {
            switch state {
            case .sending(var exchange):
                state = .modifying
                change(&exchange)
                state = .sending(exchange)
            case .awaitingResend(let request, let statusCode, var exchange):
                state = .modifying
                change(&exchange)
                state = .awaitingResend(request, statusCode: statusCode, exchange)
            case .stopping(let reason, var exchange):
                state = .modifying
                change(&exchange)
                state = .stopping(reason, exchange)
            case .cancelled(var exchange):
                state = .modifying
                change(&exchange)
                state = .cancelled(exchange)
            case .idle, .finished:
                break
            case .modifying:
                Self.changing()
            }
        }
    }
}
