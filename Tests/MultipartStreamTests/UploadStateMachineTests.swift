import Foundation
import Testing

@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// ``UploadStateMachine``: one upload's tasks and what its caller is told, transition by transition, without a
/// server.
@Suite struct UploadStateMachineTests {
    private let url = URL(string: "http://127.0.0.1/upload")!

    private func response(_ status: Int) -> HTTPURLResponse {
        HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: [:])!
    }

    /// A task that sent `sent` of a 100-byte body and got `status`.
    private func end(_ status: Int?, sent: UInt64 = 100, error: (any Error)? = nil) -> UploadStateMachine.TaskEnd {
        UploadStateMachine.TaskEnd(
            error: error, response: status.map(response), data: Data("answer".utf8), bodyBytesSent: sent,
            bodyLength: 100, bodyStart: 0, contentLength: 100)
    }

    private func finished(_ action: UploadStateMachine.Action) -> Result<(Data, URLResponse), any Error>? {
        if case .finish(let result) = action { return result }
        Issue.record("expected .finish, got \(action)")
        return nil
    }

    private func status(_ action: UploadStateMachine.Action) -> Int? {
        guard case .success(let (_, response))? = finished(action) else { return nil }
        return (response as? HTTPURLResponse)?.statusCode
    }

    private func failure(_ action: UploadStateMachine.Action) -> (any Error)? {
        guard case .failure(let error)? = finished(action) else { return nil }
        return error
    }

    @Test func aWholeBodyAnsweredIsTheAnswerAndTheUploadFinishesOnce() {
        var machine = UploadStateMachine()
        #expect(status(machine.taskEnded(end(201))) == 201)
        guard case .finished = machine.state, case .none = machine.taskEnded(end(200)) else {
            Issue.record("a second end told the caller again")
            return
        }
    }

    @Test func aSuccessBeforeTheWholeBodyIsAFailure() {
        var machine = UploadStateMachine()
        let error = failure(machine.taskEnded(end(200, sent: 40))) as? MultipartError
        guard case .answeredBeforeBodySent(statusCode: 200, bytesSent: 40, contentLength: 100)? = error?.reason else {
            Issue.record("\(String(describing: error))")
            return
        }
        var refusal = UploadStateMachine()
        #expect(status(refusal.taskEnded(end(413, sent: 40))) == 413, "a refusal before the body is an answer")
    }

    @Test func aResendStartsANewTaskThenCountsAgainstTheLimit() {
        var machine = UploadStateMachine()
        #expect(machine.canResend(owningTasks: true))
        #expect(!machine.canResend(owningTasks: false), "a task handed to the caller cannot be replaced")
        let resend = URLRequest(url: URL(string: "http://127.0.0.1/elsewhere")!)
        machine.redirected(.resend(resend))
        guard case .startTask(let request) = machine.taskEnded(end(307, sent: 100)) else {
            Issue.record("expected a new task")
            return
        }
        #expect(request.url == resend.url)
        guard case .sending(resends: 1) = machine.state else {
            Issue.record("\(machine.state)")
            return
        }
        for _ in 1..<RedirectPolicy.maximumResends {
            machine.redirected(.resend(resend))
            _ = machine.taskEnded(end(307))
        }
        #expect(!machine.canResend(owningTasks: true), "at most \(RedirectPolicy.maximumResends) resends")
    }

    @Test func aResendIsNotStartedAfterAFailedBody() {
        var machine = UploadStateMachine()
        machine.redirected(.resend(URLRequest(url: url)))
        let streamFailure = MultipartError(.fileChanged(url), partIndex: 1, partName: "video")
        var failed = end(307, sent: 10)
        failed.streamFailure = streamFailure
        #expect((failure(machine.taskEnded(failed)) as? MultipartError)?.partName == "video")
    }

    @Test func aRedirectThatCannotBeFollowedFailsNamingIt() {
        var machine = UploadStateMachine()
        machine.redirected(.fail(MultipartError(.redirectNotFollowed(statusCode: 308, location: url))))
        let error = failure(machine.taskEnded(end(308))) as? MultipartError
        guard case .redirectNotFollowed(statusCode: 308, _)? = error?.reason else {
            Issue.record("\(String(describing: error))")
            return
        }
    }

    @Test func aCancelBeatsEveryOtherOutcomeAndComesOnce() {
        var machine = UploadStateMachine()
        machine.redirected(.resend(URLRequest(url: url)))
        let first = machine.cancel()
        let second = machine.cancel()
        #expect(first && !second)
        #expect((failure(machine.taskEnded(end(200))) as? URLError)?.code == .cancelled, "not a resend, not a 200")
    }

    @Test func a401IsTheAnswerOnlyWhenTheUploadGaveUpItsChallenge() {
        let reset = URLError(.networkConnectionLost)
        var givenUp = UploadStateMachine()
        givenUp.gaveUpChallenge()
        #expect(status(givenUp.taskEnded(end(401, sent: 100, error: URLError(.cancelled)))) == 401)
        var broken = UploadStateMachine()
        #expect(
            (failure(broken.taskEnded(end(401, sent: 100, error: reset))) as? URLError)?.code == .networkConnectionLost)
    }

    @Test func aBodyThatCouldNotBeWrittenFailsWithItsReason() {
        var machine = UploadStateMachine()
        var failed = end(nil, error: URLError(.unknown))
        failed.bodyFailure = MultipartError(
            .fileSizeChanged(url, expected: 10, actual: 5), partIndex: 0, partName: "doc")
        let error = failure(machine.taskEnded(failed)) as? MultipartError
        guard case .fileSizeChanged(_, expected: 10, actual: 5)? = error?.reason else {
            Issue.record("\(String(describing: error)): URLSession's 'aborted' instead of the reason")
            return
        }
    }

    @Test func aResendThatCannotStartFailsOnce() {
        var machine = UploadStateMachine()
        machine.redirected(.resend(URLRequest(url: url)))
        _ = machine.taskEnded(end(307))
        let told = machine.resendFailed(MultipartError(.redirectNotFollowed(statusCode: 307, location: url)))
        #expect(failure(told) != nil)
        guard case .none = machine.resendFailed(MultipartError(.redirectNotFollowed(statusCode: 307, location: url)))
        else {
            Issue.record("told twice")
            return
        }
    }

    @Test func noResponseAtAllIsABadServerResponse() {
        var machine = UploadStateMachine()
        #expect((failure(machine.taskEnded(end(nil))) as? URLError)?.code == .badServerResponse)
    }
}
