import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UploadRequest.Role {
    /// A resumable upload's append, framed as the resumable layer frames it.
    fileprivate static func append(from offset: UInt64, upTo end: UInt64) -> Self {
        .append(from: offset, upTo: end, ResumableUpload.appendFraming)
    }
}

/// ``UploadRequest/StateMachine``: one upload's tasks, bodies and what its caller is told, transition by
/// transition, without a server.
@Suite struct UploadStateMachineTests {
    typealias Machine = UploadRequest.StateMachine

    private let url = URL(string: "http://127.0.0.1/upload")!
    private let form: MultipartFormData = {
        var form = try! MultipartFormData(boundary: "state-machine")
        form.append(Data(count: 1_000), name: "f", fileName: "f.bin")
        return form
    }()

    private func machine(_ role: UploadRequest.Role = .wholeForm(.stream)) -> Machine {
        Machine(role: role, contentLength: form.contentLength!, contentType: form.contentType)
    }

    /// A redirect's request that keeps the form's method, as a 307 or 308 does.
    private func post(_ url: URL) -> URLRequest {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        return request
    }

    private func response(_ status: Int) -> HTTPURLResponse {
        HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: [:])!
    }

    /// Tells the machine of a body stream of the form from `offset`, and returns what the shell would read off it
    /// once it has handed out `sent` bytes (all of them when `nil`): the machine never sees the stream.
    @discardableResult
    private func sendBody(_ machine: inout Machine, from offset: UInt64 = 0, sent: UInt64? = nil) -> Machine.BodyCount {
        #expect(machine.streamMade() == .hand)
        let count = sent ?? form.contentLength! - offset
        return Machine.BodyCount(last: count, furthest: count)
    }

    /// The task ends with `status` (none when `nil`) and `error`, its streams having handed out `count`.
    private func end(
        _ machine: inout Machine, _ status: Int?, error: (any Error)? = nil, _ count: Machine.BodyCount = .init()
    ) -> Machine.EndAction {
        // An answer comes to a task: made here if the test made none.
        if case .idle = machine.state { _ = machine.taskMade() }
        machine.responseBegan(count, response: status.map(response))
        _ = machine.received(Data("answer".utf8))
        return machine.taskEnded(error: error, response: status.map(response), body: count)
    }

    private func finished(_ action: Machine.EndAction) -> Result<(Data, URLResponse), any Error>? {
        if case .finish(let finish) = action { return finish.result }
        Issue.record("expected .finish, got \(action)")
        return nil
    }

    private func status(_ action: Machine.EndAction) -> Int? {
        guard case .success(let (_, response))? = finished(action) else { return nil }
        return (response as? HTTPURLResponse)?.statusCode
    }

    private func failure(_ action: Machine.EndAction) -> (any Error)? {
        guard case .failure(let error)? = finished(action) else { return nil }
        return error
    }

    // MARK: Verdicts

    @Test func aWholeBodyAnsweredIsTheAnswerAndTheUploadFinishesOnce() {
        var machine = machine()
        let sent = sendBody(&machine)
        let first = end(&machine, 201, sent)
        #expect(status(first) == 201)
        if case .finish(let finish) = first {
            #expect((try? finish.result.get())?.0 == Data("answer".utf8))
            #expect(!finish.endsProgress, "the whole form's driver ends it: a 401 may send the form again")
        }
        guard case .finished = machine.state, case .none = end(&machine, 200) else {
            Issue.record("a second end told the caller again")
            return
        }
    }

    @Test func aSuccessBeforeTheWholeBodyIsAFailure() {
        var machine = machine()
        let sent = sendBody(&machine, sent: 40)
        let error = failure(end(&machine, 200, sent)) as? MultipartError
        let length = form.contentLength!
        guard case .answeredBeforeBodySent(statusCode: 200, bytesSent: 40, contentLength: length)? = error?.reason
        else {
            Issue.record("\(String(describing: error))")
            return
        }
        var refusal = self.machine()
        #expect(
            status(end(&refusal, 413, sendBody(&refusal, sent: 40))) == 413, "a refusal before the body is an answer")
    }

    @Test func whatWasHandedOutWhenTheAnswerBeganDecidesNotWhatFollowed() {
        var machine = machine()
        machine.responseBegan(sendBody(&machine, sent: 40))
        // Drained after answering.
        let whole = Machine.BodyCount(last: form.contentLength!, furthest: form.contentLength!)
        let error = failure(machine.taskEnded(error: nil, response: response(200), body: whole)) as? MultipartError
        guard case .answeredBeforeBodySent(statusCode: 200, bytesSent: 40, _)? = error?.reason else {
            Issue.record("\(String(describing: error))")
            return
        }
        // A later answer (after a 401 was answered and the body sent again) is the one that counts.
        var resent = self.machine()
        resent.responseBegan(sendBody(&resent, sent: 40))
        #expect(status(end(&resent, 200, whole)) == 200)
    }

    @Test func anAppendCountsFromItsOffset() {
        var machine = machine(.append(from: 600, upTo: form.contentLength!))
        let error = failure(end(&machine, 204, sendBody(&machine, from: 600, sent: 10))) as? MultipartError
        guard case .answeredBeforeBodySent(statusCode: 204, bytesSent: 610, _)? = error?.reason else {
            Issue.record("\(String(describing: error))")
            return
        }
    }

    /// The draft lets a server keep part of an append and say so at once: the resumable upload goes on from its
    /// offset. A whole form's early success stays a failure, whatever it says.
    @Test func anAppendPartlyKeptIsAnAnswer() {
        let partial = HTTPURLResponse(
            url: url, statusCode: 204, httpVersion: "HTTP/1.1",
            headerFields: ["Upload-Complete": "?0", "Upload-Offset": "605"])!
        var append = machine(.append(from: 600, upTo: form.contentLength!))
        let ten = sendBody(&append, from: 600, sent: 10)
        append.responseBegan(ten)
        #expect(status(append.taskEnded(error: nil, response: partial, body: ten)) == 204)
        var whole = machine()
        let forty = sendBody(&whole, sent: 40)
        whole.responseBegan(forty)
        let error = failure(whole.taskEnded(error: nil, response: partial, body: forty)) as? MultipartError
        guard case .answeredBeforeBodySent? = error?.reason else {
            Issue.record("\(String(describing: error))")
            return
        }
    }

    @Test func theEndCarriesTheCountTheVerdictRead() {
        // Progress settles at this count, so the last report, the verdict and the command agree.
        var append = machine(.append(from: 600, upTo: form.contentLength!))
        let ten = sendBody(&append, from: 600, sent: 10)
        var whole = machine()
        let all = sendBody(&whole)
        var protocolRequest = machine(.protocolRequest)
        var callersTask = machine(.callerTask(.stream))
        let callersAll = sendBody(&callersTask)
        let ends = [
            end(&append, 204, ten), end(&whole, nil, error: URLError(.networkConnectionLost), all),
            end(&protocolRequest, 204), end(&callersTask, 200, callersAll),
        ]
        let finishes = ends.compactMap { end -> Machine.Finish? in
            if case .finish(let finish) = end { return finish }
            return nil
        }
        #expect(finishes.map(\.bytesSent) == [610, form.contentLength!, 0, form.contentLength!])
        // Only a task handed to the caller is the whole upload; the drivers of the others end their progress.
        #expect(finishes.map(\.endsProgress) == [false, false, false, true])
    }

    @Test func aResendStartsANewTaskThenCountsAgainstTheLimit() {
        var machine = machine()
        let resend = post(URL(string: "http://127.0.0.1/elsewhere")!)
        #expect(machine.taskMade() == .pinCaller)
        sendBody(&machine)
        #if !canImport(Darwin)
            for round in 0..<RedirectPolicy.maximumResends {
                #expect(machine.redirectAnswered(statusCode: 307, answer: resend, sent: nil) == .refuse)
                guard case .resend(let request) = end(&machine, 307) else {
                    Issue.record("round \(round): expected a new task")
                    return
                }
                #expect(request.url == resend.url)
                guard case .sending(let exchange) = machine.state, exchange.resends == round + 1 else {
                    Issue.record("\(machine.state)")
                    return
                }
                #expect(machine.taskMade() == .pinCaller)
                sendBody(&machine)
            }
            // At most `maximumResends`: the next 307 fails, naming it.
            #expect(machine.redirectAnswered(statusCode: 307, answer: resend, sent: nil) == .refuse)
            let error = failure(end(&machine, 307)) as? MultipartError
            guard case .redirectNotFollowed(statusCode: 307, _)? = error?.reason else {
                Issue.record("\(String(describing: error))")
                return
            }
        #endif
    }

    @Test func aTaskHandedToTheCallerCannotBeReplaced() {
        var machine = machine(.callerTask(.stream))
        #expect(machine.taskMade() == .none)
        #expect(machine.taskBegan() == .pinCaller)
        sendBody(&machine)
        #if !canImport(Darwin)
            _ = machine.redirectAnswered(statusCode: 308, answer: post(url), sent: nil)
            let error = failure(end(&machine, 308)) as? MultipartError
            guard case .redirectNotFollowed(statusCode: 308, _)? = error?.reason else {
                Issue.record("\(String(describing: error))")
                return
            }
        #endif
    }

    @Test func aRedirectToAGetIsFollowedWithoutTheBodyHeaders() {
        var machine = machine()
        sendBody(&machine)
        var get = URLRequest(url: url)
        get.httpMethod = "GET"
        get.setValue("10", forHTTPHeaderField: "Content-Length")
        guard case .follow(let request) = machine.redirectAnswered(statusCode: 303, answer: get, sent: nil) else {
            Issue.record("a 303 to a GET is followed")
            return
        }
        #if !canImport(Darwin)
            #expect(request.value(forHTTPHeaderField: "Content-Length") == nil)
        #endif
        #expect(machine.redirectAnswered(statusCode: 302, answer: nil, sent: nil) == .refuse, "kept as the answer")
    }

    @Test func aResendIsNotStartedAfterAFailedBody() {
        var machine = machine()
        _ = machine.taskMade()
        _ = machine.redirectAnswered(statusCode: 307, answer: post(url), sent: nil)
        #expect(machine.streamMade() == .hand)
        let failed = Machine.BodyCount(failure: MultipartError(.fileChanged(url), partIndex: 1, partName: "video"))
        #expect((failure(end(&machine, 307, failed)) as? MultipartError)?.part?.name == "video")
    }

    @Test func aCancelBeatsEveryOtherOutcomeAndComesOnce() {
        var machine = machine()
        _ = machine.taskMade()
        sendBody(&machine, sent: 10)
        _ = machine.redirectAnswered(statusCode: 307, answer: post(url), sent: nil)
        guard case .cancel(hasTask: true, endsProgress: false) = machine.cancel() else {
            Issue.record("the first cancel cancels the task")
            return
        }
        guard case .none = machine.cancel() else {
            Issue.record("a second cancel acted again")
            return
        }
        #expect((failure(end(&machine, 200)) as? URLError)?.code == .cancelled, "not a resend, not a 200")
    }

    @Test func whatComesAfterACancelIsStoppedAtOnce() {
        var machine = machine()
        guard case .cancel(hasTask: false, endsProgress: false) = machine.cancel() else {
            Issue.record("a cancel before the task has nothing to stop yet")
            return
        }
        #expect(machine.streamMade() == .close, "a stream made after the cancel")
        #expect(machine.taskMade() == .cancel, "a task made after the cancel")
        #expect((failure(end(&machine, nil, error: URLError(.cancelled))) as? URLError)?.code == .cancelled)
    }

    @Test func a401IsTheAnswerOnlyWhenTheUploadGaveUpItsChallenge() {
        var givenUp = machine()
        let sent = sendBody(&givenUp)
        let cancelled = Machine.ChallengeAnswer(disposition: .cancelAuthenticationChallenge)
        let answered = givenUp.challengeAnswered(
            caller: .init(disposition: .performDefaultHandling), fallback: cancelled)
        #expect(answered.disposition == .cancelAuthenticationChallenge)
        #expect(status(end(&givenUp, 401, error: URLError(.cancelled), sent)) == 401)
        var broken = machine()
        let resent = sendBody(&broken)
        let reset = URLError(.networkConnectionLost)
        #expect((failure(end(&broken, 401, error: reset, resent)) as? URLError)?.code == .networkConnectionLost)
    }

    @Test func aRedirectIsMadeIntoTheNextRequestUnlessItIsTheAnswer() {
        let proposed = post(URL(string: "http://127.0.0.1/elsewhere")!)
        let sent = URL(string: "http://ada:pw@127.0.0.1:8080/upload")!
        guard case .make(let made) = machine().redirectMet(proposed: proposed, location: "//127.0.0.2/x", from: sent)
        else {
            Issue.record("a whole form's redirect is made into the next request")
            return
        }
        // Resolved by RFC 3986 against the URL the 3xx answered: no user and password ride along.
        #expect(made.url?.absoluteString == "http://127.0.0.2/x")
        #expect(machine(.resourceRequest).redirectMet(proposed: proposed, location: nil, from: nil) == .keepResponse)
    }

    @Test func aRedirectWhoseRequestCouldNotBeMadeFailsWithTheHooksError() {
        struct Refused: Error {}
        var machine = machine()
        _ = machine.taskMade()
        let sent = sendBody(&machine)
        machine.redirectFailed(because: Refused())
        #expect(failure(end(&machine, 307, sent)) is Refused)
    }

    @Test func aFormWithAOneShotPartIsNotResentAfterARedirect() {
        var oneShot = form
        oneShot.append(InputStream(data: Data("x".utf8)), length: 1, name: "once")
        var machine = Machine(
            role: .wholeForm(.stream), contentLength: oneShot.contentLength!, contentType: oneShot.contentType,
            oneShot: oneShot.resendFailure)
        _ = machine.taskMade()
        #expect(machine.streamMade() == .hand)
        #if !canImport(Darwin)
            _ = machine.redirectAnswered(statusCode: 307, answer: post(url), sent: nil)
            let error = failure(machine.taskEnded(error: nil, response: response(307))) as? MultipartError
            guard case .streamAlreadyConsumed? = error?.reason, error?.part?.name == "once" else {
                Issue.record("\(String(describing: error)): resent a form whose one-shot part was read")
                return
            }
        #endif
    }

    @Test func theCallersAnswerToAChallengeWinsAndTheDefaultOnlyFillsIn() {
        let credential = URLCredential(user: "u", password: "p", persistence: .forSession)
        let stored = Machine.ChallengeAnswer(disposition: .useCredential, credential: credential)
        let cancelled = Machine.ChallengeAnswer(disposition: .cancelAuthenticationChallenge)
        // The caller's own cancel is not the upload giving up: the task fails, the 401 is no answer.
        var refused = machine()
        let sent = sendBody(&refused)
        let callers = refused.challengeAnswered(caller: cancelled, fallback: stored)
        #expect(callers.disposition == .cancelAuthenticationChallenge && callers.credential == nil)
        #expect((failure(end(&refused, 401, error: URLError(.cancelled), sent)) as? URLError)?.code == .cancelled)
        // Left to the default: the stored credential answers, and the resent body is allowed.
        var defaulted = machine(.append(from: 0, upTo: form.contentLength!))
        sendBody(&defaulted)
        let answer = defaulted.challengeAnswered(caller: .init(disposition: .performDefaultHandling), fallback: stored)
        #expect(answer.disposition == .useCredential && answer.credential === credential)
        guard case .makeStream(.form) = defaulted.bodyRequested() else {
            Issue.record("the append was refused again after a credential was given")
            return
        }
        // Without one, URLSession's own resend of the append fails rather than sending it twice.
        var resent = machine(.append(from: 0, upTo: form.contentLength!))
        sendBody(&resent)
        guard case .makeStream(.failing(let error)) = resent.bodyRequested(), case .appendResent = error.reason else {
            Issue.record("an append went out twice")
            return
        }
    }

    @Test func aCancelOfOneRequestOfAResumableUploadLeavesItsProgressRunning() {
        var machine = machine(.append(from: 600, upTo: form.contentLength!))
        guard case .cancel(_, endsProgress: false) = machine.cancel() else {
            Issue.record("an append's cancel ended the resumable upload's progress")
            return
        }
    }

    @Test func aBodyThatCouldNotBeWrittenFailsWithItsReason() {
        let file = URL(fileURLWithPath: "/tmp/never-written.multipart")
        var machine = machine(.callerTask(.fileToWrite(file)))
        guard case .writeFile(file) = machine.bodyRequested() else {
            Issue.record("the file is written when the task first asks for its body")
            return
        }
        let failure = MultipartError(.fileSizeChanged(url, expected: 10, actual: 5), partIndex: 0, partName: "doc")
        guard case .failing = machine.fileWritten(failure), case .makeStream(.failing) = machine.bodyRequested() else {
            Issue.record("a failed write fails every body")
            return
        }
        let error = self.failure(end(&machine, nil, error: URLError(.unknown))) as? MultipartError
        guard case .fileSizeChanged(_, expected: 10, actual: 5)? = error?.reason else {
            Issue.record("\(String(describing: error)): URLSession's 'aborted' instead of the reason")
            return
        }
    }

    @Test func aWrittenFileIsStreamedAndRemovedAtTheEnd() {
        let file = URL(fileURLWithPath: "/tmp/written.multipart")
        var machine = machine(.callerTask(.fileToWrite(file)))
        #expect(machine.plan(for: URLRequest(url: url)).kind == .streamedUpload)
        #if !canImport(Darwin)
            guard case .encodedFile(file) = machine.fileWritten(nil) else {
                Issue.record("a written file is streamed")
                return
            }
        #endif
        guard case .finish(let finish) = end(&machine, 200, sendBody(&machine)) else { return }
        #expect(finish.removing == file)
    }

    @Test func anAppendGoesOutOnceOnASessionOfItsOwn() {
        var machine = machine(.append(from: 100, upTo: form.contentLength!))
        let plan = machine.plan(for: URLRequest(url: url))
        #expect(plan.singleUse && plan.startsNow && plan.kind == .data(streamed: true))
        #expect(plan.request.value(forHTTPHeaderField: "Content-Type") == ResumableUpload.partialUploadType)
        #expect(plan.request.value(forHTTPHeaderField: "Content-Length") == String(form.contentLength! - 100))
        guard case .makeStream(.form(let range)) = machine.bodyRequested(), range == 100..<form.contentLength! else {
            Issue.record("an append's stream is the form from its offset")
            return
        }
        _ = machine.taskMade()
        sendBody(&machine, from: 100)
        guard case .makeStream(.failing(let error)) = machine.bodyRequested(), case .appendResent = error.reason
        else {
            Issue.record("URLSession's own resend of an append is refused")
            return
        }
        #expect(!machine.role.finishesProgress)
    }

    @Test func aProtocolRequestIsSentAsItIs() {
        let machine = machine(.protocolRequest)
        var request = URLRequest(url: url)
        request.httpMethod = "HEAD"
        let plan = machine.plan(for: request)
        #expect(plan.request == request && plan.kind == .data(streamed: false) && !plan.singleUse)
    }

    @Test func theWholeFormGoesAsAPostWithItsLength() {
        let plan = machine().plan(for: URLRequest(url: url))
        #expect(plan.request.httpMethod == "POST")
        #expect(plan.request.value(forHTTPHeaderField: "Content-Type") == form.contentType)
        #expect(plan.request.value(forHTTPHeaderField: "Content-Length") == String(form.contentLength!))
        #expect(plan.kind == .data(streamed: true) && plan.startsNow)
    }

    @Test func aSmallFormInMemoryIsTheRequestsOwnBodyAndURLSessionCountsIt() throws {
        let bytes = try form.encode()
        var caller = URLRequest(url: url)
        caller.setValue("999", forHTTPHeaderField: "Content-Length")
        caller.setValue("chunked", forHTTPHeaderField: "Transfer-Encoding")
        var machine = machine(.wholeForm(.inMemory(bytes)))
        let plan = machine.plan(for: caller)
        #expect(plan.kind == .data(streamed: false) && plan.startsNow)
        #expect(plan.request.httpBody == bytes && plan.request.httpBodyStream == nil)
        #expect(plan.request.httpMethod == "POST")
        #expect(plan.request.value(forHTTPHeaderField: "Content-Length") == String(bytes.count))
        #expect(plan.request.value(forHTTPHeaderField: "Transfer-Encoding") == nil)
        _ = machine.taskMade()
        #expect(machine.sentBody(totalBytesSent: 40) == .report(40))
        let error = failure(end(&machine, 200)) as? MultipartError
        guard case .answeredBeforeBodySent(statusCode: 200, bytesSent: 40, _)? = error?.reason else {
            Issue.record("\(String(describing: error))")
            return
        }
        var resent = self.machine(.wholeForm(.inMemory(bytes)))
        _ = resent.taskMade()
        let twice = Int64(2 * bytes.count)
        #expect(
            resent.sentBody(totalBytesSent: twice) == .report(form.contentLength!), "a resend after a 401 counts on")
        #expect(status(end(&resent, 201)) == 201)
    }

    @Test func automaticSendsOnlyASmallFormHeldInMemoryAsBytes() throws {
        guard case .inMemory(let bytes) = UploadBody.automatic(for: form) else {
            Issue.record("a 1 KB form in memory goes as bytes")
            return
        }
        #expect(bytes == (try form.encode()))
        var large = MultipartFormData()
        large.append(Data(count: (64 << 10) - 100), name: "f")
        var file = MultipartFormData()
        let directory = try TemporaryDirectory()
        try file.append(fileURL: directory.file("a.txt", contents: Data("a".utf8)), name: "f")
        var factory = MultipartFormData()
        factory.append(length: 1, name: "s") { InputStream(data: Data("s".utf8)) }
        for (streamed, why) in [
            (UploadBody.automatic(for: large), "over 64 KiB"),
            (.automatic(for: file), "a file part"),
            (.automatic(for: factory), "a stream part"),
        ] {
            guard case .stream = streamed else {
                Issue.record("\(why): \(streamed)")
                continue
            }
        }
    }

    @Test func onlyAFileThatURLSessionReadsReportsItsCount() {
        var streamed = machine()
        #expect(streamed.sentBody(totalBytesSent: 10) == .none, "streams count their own")
        #if canImport(Darwin)
            var file = machine(.wholeForm(.file(URL(fileURLWithPath: "/tmp/f.multipart"))))
            _ = file.taskMade()
            #expect(file.sentBody(totalBytesSent: 10) == .report(10))
        #endif
    }

    @Test func theFurthestHandedOutIsTheMostAnyBodyReachedAndOutlivesTheEnd() {
        var append = machine(.append(from: 100, upTo: form.contentLength!))
        #expect(append.furthestHandedOut(.init()) == 100, "nothing of the append yet")
        _ = append.taskMade()
        let fifty = sendBody(&append, from: 100, sent: 50)
        #expect(append.furthestHandedOut(fifty) == 150, "counted from the form's first byte")
        var whole = machine()
        _ = whole.taskMade()
        sendBody(&whole, sent: 300)
        sendBody(&whole, sent: 100)
        // A resend that handed out less: the server may have the first's.
        let both = Machine.BodyCount(last: 100, furthest: 300)
        #expect(whole.furthestHandedOut(both) == 300)
        _ = end(&whole, nil, error: URLError(.networkConnectionLost), both)
        #expect(whole.furthestHandedOut(.init()) == 300, "read after the end, as a resumable upload reads it")
    }

    @Test func aResendThatCannotStartFailsOnceNamingTheRedirect() {
        var machine = machine()
        _ = machine.taskMade()
        sendBody(&machine)
        let elsewhere = URL(string: "http://127.0.0.1/elsewhere")!
        #if !canImport(Darwin)
            _ = machine.redirectAnswered(statusCode: 308, answer: post(elsewhere), sent: nil)
            guard case .resend = end(&machine, 308) else { return }
            guard case .finish(let told) = machine.resendFailed(), case .failure(let error) = told.result,
                case .redirectNotFollowed(statusCode: 308, location: elsewhere)? = (error as? MultipartError)?.reason
            else {
                Issue.record("the caller is told which redirect was not followed")
                return
            }
            guard case .none = machine.resendFailed() else {
                Issue.record("told twice")
                return
            }
        #endif
    }

    @Test func noResponseAtAllIsABadServerResponse() {
        var machine = machine()
        #expect((failure(end(&machine, nil, sendBody(&machine))) as? URLError)?.code == .badServerResponse)
    }

    /// Cancelled before its task was asked for, the upload ends once the shell knows no task will be made, and its
    /// temporary body goes with it: no task will end to finish it (a `.file` upload cancelled between writing its
    /// body and making its task left the body for good). A task made all the same is cancelled as it is made, and
    /// its end changes nothing.
    @Test func anUploadNoTaskWillEndEndsAndRemovesItsBody() {
        let file = URL(fileURLWithPath: "/tmp/MultipartStream-body.multipart")
        for cancelsFirst in [true, false] {
            var cancelled = machine(.wholeForm(.file(file)))
            if cancelsFirst { _ = cancelled.cancel() }
            guard case .finish(let finish) = cancelled.taskNotMade() else {
                Issue.record("an upload no task will end did not end")
                return
            }
            #expect(finish.removing == file)
            #expect(throws: URLError.self) { try finish.result.get() }
            if case .none = cancelled.cancel() {} else { Issue.record("cancelled after it ended") }
            if case .none = cancelled.taskNotMade() {} else { Issue.record("ended twice") }
            #expect(cancelled.taskMade() == .cancel)
            guard case .none = cancelled.taskEnded(error: URLError(.cancelled), response: nil) else {
                Issue.record("the task's end told the caller again")
                return
            }
        }
        var sending = machine(.wholeForm(.file(file)))
        _ = sending.taskMade()
        if case .none = sending.taskNotMade() {} else { Issue.record("an upload with a task ended without it") }
    }

    #if compiler(>=6.2)  // exit tests are Swift 6.2's; the manifest's 6.1 builds the rest
        /// A task's event before any task was made cannot happen: the machine traps, naming it, rather than ending the
        /// upload in a made-up way (it made up an exchange for a task's end, and ignored the rest). Each event is its own
        /// process; the same events after a task was made are taken (the tests above).
        @Test func aTasksEventBeforeAnyTaskTraps() async {
            await #expect(processExitsWith: .failure) {
                var machine = Machine(role: .wholeForm(.stream), contentLength: 10, contentType: "multipart/form-data")
                _ = machine.taskEnded(error: nil, response: nil)
            }
            await #expect(processExitsWith: .failure) {
                var machine = Machine(role: .wholeForm(.stream), contentLength: 10, contentType: "multipart/form-data")
                _ = machine.redirectAnswered(statusCode: 302, answer: nil, sent: nil)
            }
            await #expect(processExitsWith: .failure) {
                var machine = Machine(role: .wholeForm(.stream), contentLength: 10, contentType: "multipart/form-data")
                machine.redirectFailed(because: CancellationError())
            }
            await #expect(processExitsWith: .failure) {
                var machine = Machine(role: .wholeForm(.stream), contentLength: 10, contentType: "multipart/form-data")
                _ = machine.sinkFailed(because: CancellationError())
            }
            // An answer refused by the sink before the upload finished: there is no answer yet.
            await #expect(processExitsWith: .failure) {
                var machine = Machine(role: .wholeForm(.stream), contentLength: 10, contentType: "multipart/form-data")
                _ = machine.taskMade()
                let response = URLResponse(
                    url: URL(string: "http://127.0.0.1:1/")!, mimeType: nil, expectedContentLength: 0,
                    textEncodingName: nil
                )
                _ = machine.answerRefused(because: CancellationError(), response: response)
            }
        }
    #endif

    /// A success whose answer the sink cannot take (a full disk under `.file`) is a failure, decided by the machine
    /// as the sink's failure while the answer arrives is: the request stopped for that reason, the response kept.
    @Test func anAnswerTheSinkRefusesIsAFailureWithTheSinksReason() {
        var machine = machine()
        let sent = sendBody(&machine)
        #expect(status(end(&machine, 200, sent)) == 200)
        let refused = machine.answerRefused(because: URLError(.cannotWriteToFile), response: response(200))
        guard case .failure(let error) = refused else {
            Issue.record("a refused answer ended the upload as \(refused)")
            return
        }
        #expect((error as? URLError)?.code == .cannotWriteToFile, "\(error)")
        guard case .failure(let cancelled) = Machine.answerToACancel else {
            Issue.record("a cancel is answered with a success")
            return
        }
        #expect((cancelled as? URLError)?.code == .cancelled, "\(cancelled)")
    }

    /// The same events once the upload was cancelled, or its task stopped, are races the shell meets (a cancel
    /// before the caller's delegate answered a redirect, a sink failing as the task is cancelled): taken, and they
    /// change nothing.
    @Test func aTasksEventAfterACancelChangesNothing() {
        var machine = machine()
        _ = machine.taskMade()
        _ = machine.cancel()
        let answered = machine.redirectAnswered(statusCode: 307, answer: post(url), sent: post(url))
        machine.redirectFailed(because: URLError(.timedOut))
        let stops = machine.sinkFailed(because: URLError(.cannotWriteToFile))
        #expect(answered == .refuse)
        #expect(!stops)
        #expect(machine.isCancelled)
    }
}
