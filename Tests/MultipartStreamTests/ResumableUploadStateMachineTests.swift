import Foundation
import Testing

@testable import MultipartStream

/// ``ResumableUpload/StateMachine``, the resumable-upload protocol's decisions, transition by transition, without a server.
@Suite struct ResumableUploadStateMachineTests {
    private let location = URL(string: "http://127.0.0.1:8080/resumable_upload/abc")!
    private let policy = MultipartResumption(maximumAttempts: 3, initialDelay: 0.5, maximumDelay: 1.5)

    private func answer(
        _ status: Int, limit: Bool = false, location: URL? = nil, offset: UInt64? = nil, complete: Bool? = nil
    ) -> ResumableUpload.StateMachine.Event {
        .answered(
            ResumableUpload.Answer(
                statusCode: status, hasUploadLimit: limit, location: location, offset: offset, isComplete: complete))
    }

    private let dropped = ResumableUpload.StateMachine.Event.connectionFailed(URLError(.networkConnectionLost))

    /// A machine that has created its upload and sent its first append.
    private func appending(_ policy: MultipartResumption? = nil) -> ResumableUpload.StateMachine {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy ?? self.policy)
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true))
        _ = resumption.handle(answer(201, location: location, offset: 0, complete: false))
        return resumption
    }

    private func expect(
        _ action: ResumableUpload.StateMachine.Action, is expected: ResumableUpload.StateMachine.Action,
        _ comment: Comment? = nil
    ) {
        switch (action, expected) {
        case (.send(let step), .send(let other)): #expect(step == other, comment)
        case (.wait(let seconds, let step), .wait(let other, let otherStep)):
            #expect(seconds == other && step == otherStep, comment)
        case (.sendWhole, .sendWhole), (.answer, .answer): break
        default: Issue.record("\(action), expected \(expected)")
        }
    }

    // MARK: Detection: nothing partial before the server says it resumes

    @Test func itStartsByAskingWhetherTheServerSpeaksTheDraft() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy)
        expect(resumption.start(), is: .send(.detect))
    }

    @Test(arguments: [(200, false), (404, false), (405, false), (501, false), (400, true), (301, true)])
    func aServerWithoutUploadLimitInA2xxGetsTheWholeFormInOneRequest(status: Int, limit: Bool) {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy)
        _ = resumption.start()
        expect(resumption.handle(answer(status, limit: limit)), is: .sendWhole)
    }

    @Test func aServerThatSpeaksTheDraftIsAskedToCreateTheUpload() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy)
        _ = resumption.start()
        expect(resumption.handle(answer(200, limit: true)), is: .send(.create))
    }

    @Test func aCreationAnsweredWithLocationAppendsFromTheServersOffset() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy)
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true))
        expect(
            resumption.handle(answer(201, location: location, offset: 0, complete: false)), is: .send(.append(from: 0)))
        #expect(resumption.location == location)
    }

    @Test func aCreationAnsweredAsAPlainRequestFailsRatherThanClaimTheForm() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy)
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true))
        guard case .fail(let error) = resumption.handle(answer(200)),
            case .resumptionRefused(statusCode: 200) = error.reason
        else {
            Issue.record("expected resumptionRefused")
            return
        }
    }

    @Test func aCreationRefusedIsTheAnswer() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy)
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true))
        expect(resumption.handle(answer(413)), is: .answer)
    }

    // MARK: Appending and resuming

    @Test func theApplicationsAnswerEndsTheUpload() {
        var resumption = appending()
        expect(resumption.handle(answer(200)), is: .answer)
        var failed = appending()
        expect(failed.handle(answer(500)), is: .answer, "an answer of the application, even a failure")
    }

    @Test func aDropWaitsThenAsksTheOffsetThenSendsTheRest() {
        var resumption = appending()
        expect(resumption.handle(dropped), is: .wait(seconds: 0.5, then: .askOffset))
        expect(resumption.handle(answer(204, offset: 400, complete: false)), is: .send(.append(from: 400)))
        #expect(resumption.acknowledged == 400)
        #expect(resumption.retries == 1)
    }

    @Test func theBackoffDoublesUntilTheOffsetMovesOn() {
        var resumption = appending(MultipartResumption(maximumAttempts: 10, initialDelay: 0.5, maximumDelay: 1.5))
        expect(resumption.handle(dropped), is: .wait(seconds: 0.5, then: .askOffset))
        expect(resumption.handle(dropped), is: .wait(seconds: 1, then: .askOffset), "the HEAD failed too")
        expect(resumption.handle(answer(204, offset: 0, complete: false)), is: .send(.append(from: 0)))
        expect(resumption.handle(dropped), is: .wait(seconds: 1.5, then: .askOffset), "capped at the maximum")
        expect(resumption.handle(answer(204, offset: 600, complete: false)), is: .send(.append(from: 600)))
        expect(resumption.handle(dropped), is: .wait(seconds: 0.5, then: .askOffset), "progress resets the wait")
    }

    @Test func theRetriesAreBoundedAndTheErrorSaysHowFarItGot() {
        var resumption = appending()
        _ = resumption.handle(dropped)
        _ = resumption.handle(answer(204, offset: 700, complete: false))
        _ = resumption.handle(dropped)
        _ = resumption.handle(dropped)
        guard case .fail(let error) = resumption.handle(dropped),
            case .resumeFailed(retries: 3, bytesAcknowledged: 700, contentLength: 1_000) = error.reason
        else {
            Issue.record("expected resumeFailed after 3 retries")
            return
        }
        #expect((error.underlying as? URLError)?.code == .networkConnectionLost, "the last failure is kept")
        #expect(error.category == .resumable)
    }

    @Test func aConflictCarriesTheServersOffset() {
        var resumption = appending()
        expect(resumption.handle(answer(409, offset: 300, complete: false)), is: .send(.append(from: 300)))
        #expect(resumption.acknowledged == 300)
        var blind = appending()
        expect(blind.handle(answer(409)), is: .wait(seconds: 0.5, then: .askOffset), "without an offset, ask it")
    }

    @Test func anAnswerThatSaysIncompleteResumesFromItsOffset() {
        var resumption = appending()
        expect(resumption.handle(answer(201, offset: 800, complete: false)), is: .send(.append(from: 800)))
    }

    @Test func anExpiredUploadStartsOverOnceThenFails() {
        var resumption = appending()
        _ = resumption.handle(dropped)
        _ = resumption.handle(answer(204, offset: 500, complete: false))
        expect(resumption.handle(answer(404)), is: .send(.create))
        #expect(resumption.acknowledged == 0 && resumption.location == nil)
        expect(
            resumption.handle(answer(201, location: location, offset: 0, complete: false)), is: .send(.append(from: 0)))
        _ = resumption.handle(dropped)
        guard case .fail(let error) = resumption.handle(answer(410)),
            case .uploadExpired(statusCode: 410) = error.reason
        else {
            Issue.record("expected uploadExpired")
            return
        }
    }

    @Test func aServerThatHasEverythingButLostTheAnswerIsAFailureNotASuccess() {
        var resumption = appending()
        _ = resumption.handle(dropped)
        guard case .fail(let error) = resumption.handle(answer(204, offset: 1_000, complete: true)),
            case .answerLost(contentLength: 1_000) = error.reason
        else {
            Issue.record("expected answerLost")
            return
        }
    }

    @Test func anOffsetPastTheFormIsRefused() {
        var resumption = appending()
        _ = resumption.handle(dropped)
        guard case .fail(let error) = resumption.handle(answer(204, offset: 5_000, complete: false)),
            case .resumeFailed = error.reason
        else {
            Issue.record("expected resumeFailed")
            return
        }
    }

    @Test func aDropBeforeTheUploadExistsTriesTheSameRequestAgain() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy)
        _ = resumption.start()
        expect(resumption.handle(dropped), is: .wait(seconds: 0.5, then: .detect))
        expect(resumption.handle(answer(200, limit: true)), is: .send(.create))
        expect(resumption.handle(dropped), is: .wait(seconds: 1, then: .create))
    }
}
