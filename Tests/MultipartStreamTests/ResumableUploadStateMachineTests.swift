import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// ``ResumableUpload/StateMachine``, the resumable-upload protocol's decisions, transition by transition, without a server.
@Suite struct ResumableUploadStateMachineTests {
    private let location = URL(string: "http://127.0.0.1:8080/resumable_upload/abc")!
    private let policy = MultipartResumption(
        maximumAttempts: 3, initialDelay: 0.5, maximumDelay: 1.5, singleRequestLimit: 0)

    private func answer(
        _ status: Int, limit: Bool = false, location: URL? = nil, offset: UInt64? = nil, complete: Bool? = nil,
        incomplete: Bool? = nil, length: UInt64? = nil, limits: ResumableUpload.Limits? = nil,
        retryAfter: Double? = nil,
        version: ResumableUpload.InteropVersion? = nil, acceptsPartialUpload: Bool = false, handedOut: UInt64 = .max
    ) -> ResumableUpload.StateMachine.Event {
        .answered(
            ResumableUpload.Answer(
                statusCode: status, limits: limits ?? (limit ? ResumableUpload.Limits() : nil), location: location,
                offset: offset, isComplete: complete, incomplete: incomplete, length: length, retryAfter: retryAfter,
                interopVersion: version?.rawValue, acceptsPartialUpload: acceptsPartialUpload),
            Self.reply, handedOut: handedOut)
    }

    /// The reply an answer comes with; the machine hands it back as the upload's answer, and looks only at the
    /// ``ResumableUpload/Answer`` parsed from it.
    private static let reply: ResumableUpload.Reply = (
        Data("the application's answer".utf8),
        URLResponse(
            url: URL(string: "http://127.0.0.1/")!, mimeType: nil,
            expectedContentLength: 0, textEncodingName: nil)
    )

    private let dropped = ResumableUpload.StateMachine.Event.failed(URLError(.networkConnectionLost))

    /// A machine that has created its upload in `version` (the server's `OPTIONS` answer names it) and sent its
    /// first append.
    private func appending(
        _ policy: MultipartResumption? = nil, version: ResumableUpload.InteropVersion = .newest
    ) -> ResumableUpload.StateMachine {
        var resumption = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy ?? self.policy, jitter: \.upperBound)
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true, version: version))
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
        case (.startOver(let reason, let deleting), .startOver(let other, let otherDeleting)):
            #expect(reason == other && deleting == otherDeleting, comment)
        case (.keep(let keeping, let step), .keep(let other, let otherStep)):
            #expect(keeping == other && step == otherStep, comment)
        case (.answer(let reply), .answer):
            #expect(reply.0 == Self.reply.0, comment)
        case (.sendWhole(let minSize), .sendWhole(let other)): #expect(minSize == other, comment)
        case (.settle(let offset, let seconds), .settle(let other, let otherSeconds)):
            #expect(offset == other && seconds == otherSeconds, comment)
        default: Issue.record("\(action), expected \(expected)")
        }
    }

    // MARK: A small form in one request

    /// The default policy, and a form within its ``MultipartResumption/singleRequestLimit``.
    private func oneRequest(
        contentLength: UInt64 = 1_000, known: ResumableUpload.KnownServer? = nil
    ) -> (ResumableUpload.StateMachine, ResumableUpload.StateMachine.Action) {
        var resumption = ResumableUpload.StateMachine(
            contentLength: contentLength, policy: MultipartResumption(maximumAttempts: 3, initialDelay: 0.5),
            known: known, jitter: \.upperBound)
        let action = resumption.start()
        return (resumption, action)
    }

    /// A form of up to the limit (1 MiB by default) asks nothing first: it goes whole in the creation, whose answer
    /// is the application's, the draft's or a plain server's; a larger one, one of unknown length, and a saved one
    /// ask first as before.
    @Test func aSmallFormGoesWholeInItsCreationAndItsAnswerIsTheApplications() {
        #expect(MultipartResumption().singleRequestLimit == 1 << 20)
        for fields in [(true, 200), (nil, 200), (nil, 500), (true, 413)] as [(Bool?, Int)] {
            var (resumption, action) = oneRequest()
            expect(action, is: .send(.createComplete))
            expect(resumption.handle(answer(fields.1, complete: fields.0, handedOut: 1_000)), is: .answer(Self.reply))
        }
        let atLimit = oneRequest(contentLength: 1 << 20).1
        expect(atLimit, is: .send(.createComplete))
        expect(oneRequest(contentLength: (1 << 20) + 1).1, is: .send(.detect))
        var unknown = ResumableUpload.StateMachine(contentLength: nil, policy: MultipartResumption())
        expect(unknown.start(), is: .send(.detect))
        var saved = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: MultipartResumption(), resuming: .init(location: location, acknowledged: 9))
        expect(saved.start(), is: .send(.askOffset))
        var never = ResumableUpload.StateMachine(contentLength: 1, policy: MultipartResumption(singleRequestLimit: 0))
        expect(never.start(), is: .send(.detect))
    }

    /// Its request is the form's own, whole, said complete, with the caller's key and the version spoken.
    @Test func theOneRequestIsTheFormsOwnSaidComplete() {
        let aim = ResumableUpload.Step.createComplete.aim(
            location: nil, version: .v9, contentLength: 1_000, contentType: "multipart/form-data; boundary=b")
        #expect(!aim.withoutBody && aim.emptyBody == nil && aim.removing.isEmpty)
        guard case .form = aim.method else {
            Issue.record("\(aim.method)")
            return
        }
        let fields = Dictionary(uniqueKeysWithValues: aim.fields.map { ($0.name, $0.value) })
        #expect(fields["Upload-Complete"] == "?1" && fields["Upload-Length"] == "1000")
        #expect(fields["Upload-Draft-Interop-Version"] == "9")
        #expect(ResumableUpload.Step.createComplete.reason == .creation)
    }

    /// A drop before any answer sends it again whole after the backoff, until the retries are spent; URLSession's
    /// own resend of it, refused, is such a drop. Nothing was created, so nothing is deleted.
    @Test func aDropBeforeTheAnswerSendsTheFormAgainWhole() {
        var (resumption, _) = oneRequest()
        expect(resumption.handle(dropped), is: .wait(seconds: 0.5, then: .createComplete))
        let resent = ResumableUpload.StateMachine.Event.failed(MultipartError(.appendResent), handedOut: 1_000)
        expect(resumption.handle(resent), is: .wait(seconds: 1, then: .createComplete))
        expect(resumption.handle(dropped), is: .wait(seconds: 2, then: .createComplete))
        guard case .fail(let error as MultipartError, nil) = resumption.handle(dropped),
            case .resumeFailed(3, 0, 1_000) = error.reason
        else {
            Issue.record("spent retries")
            return
        }
        // The form's own failure is no drop.
        var (failing, _) = oneRequest()
        let partFailed = MultipartError(.streamEndedEarly(expected: 900, received: 9))
        guard case .fail(let error as MultipartError, nil) = failing.handle(.failed(partFailed, handedOut: 9)),
            case .streamEndedEarly = error.reason
        else {
            Issue.record("a part's failure")
            return
        }
    }

    /// A 400 that names an older version (NIOResumableUpload names 6) did not take the form: it goes again in that
    /// version, which the next upload speaks from the start; a newer or unknown one is the application's answer.
    @Test func aVersionRefusedSendsItAgainInTheOneNamed() throws {
        var (resumption, _) = oneRequest()
        expect(resumption.handle(answer(400, version: .v6, handedOut: 1_000)), is: .send(.createComplete))
        #expect(resumption.version == .v6 && resumption.found?.version == .v6)
        // Not older than the one now spoken: the answer.
        expect(resumption.handle(answer(400, version: .v6, handedOut: 1_000)), is: .answer(Self.reply))
        var (newer, _) = oneRequest(known: ResumableUpload.KnownServer(version: .v7, limits: .init()))
        #expect(newer.version == .v7)
        expect(newer.handle(answer(400, version: .v9, handedOut: 1_000)), is: .answer(Self.reply))
    }

    /// The server kept the upload incomplete where it lives, or said where without saying complete: the upload asks
    /// how far it has it and goes on from there, as after a drop; incomplete and nowhere is no completion.
    @Test func anUploadKeptIncompleteGoesOnFromWhereTheServerStands() {
        var (resumption, _) = oneRequest()
        expect(
            resumption.handle(answer(201, location: location, complete: false, handedOut: 1_000)),
            is: .send(.askOffset))
        #expect(resumption.location == location)
        expect(
            resumption.handle(answer(204, offset: 600, complete: false)),
            is: .send(.append(from: 600, upTo: 1_000)))
        // An offset past what was handed out is a breach, as for any append.
        var (lying, _) = oneRequest()
        _ = lying.handle(answer(201, location: location, complete: false, handedOut: 1_000))
        guard
            case .fail(let error as MultipartError, location?) = lying.handle(
                answer(204, offset: 1_001, complete: false)),
            case .offsetOutOfRange = error.reason
        else {
            Issue.record("an offset past the form")
            return
        }
        // A success that says where the upload lives without `?1` (a 201 of a server that kept an upload resource)
        // is not the application's answer either: the upload asks.
        var created = oneRequest().0
        expect(created.handle(answer(201, location: location, handedOut: 1_000)), is: .send(.askOffset))
        var (nowhere, _) = oneRequest()
        guard
            case .fail(let error as MultipartError, nil) = nowhere.handle(
                answer(200, complete: false, handedOut: 1_000)),
            case .resumptionRefused(200) = error.reason
        else {
            Issue.record("incomplete and nowhere")
            return
        }
    }

    /// A server known to speak the draft: a form over its `max-size` fails before anything goes, one under its
    /// `min-size` goes as to a server without the draft. A 3xx is the answer, as a plain upload's: the request
    /// followed what it could.
    @Test func aKnownServersLimitsAndARedirectsAnswer() {
        let limits = ResumableUpload.Limits(maxSize: 999, minSize: nil)
        guard case .fail(let error as MultipartError, nil) = oneRequest(known: .init(version: .v9, limits: limits)).1,
            case .formOverUploadLimit(999, 1_000) = error.reason
        else {
            Issue.record("over max-size")
            return
        }
        let under = ResumableUpload.Limits(maxSize: nil, minSize: 2_000)
        expect(oneRequest(known: .init(version: .v9, limits: under)).1, is: .sendWhole(underMinimumSize: 2_000))
        var (redirected, _) = oneRequest()
        expect(redirected.handle(answer(323, handedOut: 1_000)), is: .answer(Self.reply))
    }

    /// A cancel ends it with nothing to delete.
    @Test func aCancelOfTheOneRequestDeletesNothing() {
        var (resumption, _) = oneRequest()
        guard case .cancel(nil) = resumption.handle(.cancelled) else {
            Issue.record("cancel")
            return
        }
    }

    // MARK: A server known to speak the draft

    /// What an `OPTIONS` found is told once, without the upload's own lifetime; the next upload to the server goes
    /// straight to its creation, in that version and with those limits (a form under `min-size` goes whole).
    @Test func aServerFoundToSpeakTheDraftIsCreatedOnAtOnceNextTime() throws {
        var first = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        expect(first.start(), is: .send(.detect))
        #expect(first.found == nil, "nothing found before the server answers")
        let limits = ResumableUpload.Limits(maxSize: 5_000, minSize: 10, maxAppendSize: 600, maxAge: 3_600)
        expect(first.handle(answer(200, limits: limits, version: .v8)), is: .send(.create))
        let found = try #require(first.found)
        #expect(found.version == .v8 && found.limits.maxAppendSize == 600 && found.limits.maxAge == nil)

        var next = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, known: found, jitter: \.upperBound)
        expect(next.start(), is: .send(.create), "no OPTIONS")
        #expect(next.version == .v8 && next.found == nil)
        expect(
            next.handle(answer(201, location: location, offset: 0, complete: false)),
            is: .send(.append(from: 0, upTo: 600)))

        var small = ResumableUpload.StateMachine(contentLength: 9, policy: policy, known: found, jitter: \.upperBound)
        expect(small.start(), is: .sendWhole(underMinimumSize: 10), "under the server's min-size")
        var large = ResumableUpload.StateMachine(
            contentLength: 6_000, policy: policy, known: found, jitter: \.upperBound)
        guard case .fail = large.start() else {
            Issue.record("a form over the known max-size is refused before a request")
            return
        }
    }

    /// A server that refuses a creation made on what an earlier upload found (it changed since: a 4xx, a 2xx
    /// without `Location`, or one that calls the bodiless creation complete) is asked again from the newest version,
    /// once: what it says now decides, and its refusal after that is the application's answer. A transient answer is
    /// retried as ever.
    @Test func aKnownServerThatRefusesTheCreationIsAskedAgainOnce() {
        let known = ResumableUpload.KnownServer(version: .v6, limits: ResumableUpload.Limits())
        for refusal in [answer(400), answer(200), answer(201, location: location, complete: true), answer(404)] {
            var machine = ResumableUpload.StateMachine(
                contentLength: 1_000, policy: policy, known: known, jitter: \.upperBound)
            expect(machine.start(), is: .send(.create))
            expect(machine.handle(refusal), is: .send(.detect), "asked again")
            #expect(machine.version == .newest)
            expect(machine.handle(answer(200, limit: true)), is: .send(.create))
            expect(machine.handle(answer(400)), is: .answer(Self.reply), "the application's answer this time")
        }
        var busy = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, known: known, jitter: \.upperBound)
        _ = busy.start()
        expect(busy.handle(answer(503)), is: .wait(seconds: 0.5, then: .create), "a busy server is waited for")
        var gone = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, known: known, jitter: \.upperBound)
        _ = gone.start()
        _ = gone.handle(answer(400))
        // Asked again, the server speaks no draft at all now: the whole form goes.
        var action = gone.handle(answer(405))
        while case .send(.detect) = action { action = gone.handle(answer(405)) }
        expect(action, is: .sendWhole(underMinimumSize: nil))
    }

    // MARK: Detection: nothing partial before the server says it resumes

    /// What a user reads when an upload gives up on a stall (the underlying error of `.resumeSaved`): a sentence,
    /// never "The operation could not be completed. (MultipartStream.StallWatch.Stalled error 1.)".
    @Test func aStallSaysWhatHappenedInWords() {
        let stalled = StallWatch.Stalled(rule: .init(bytesPerSecond: 1_024, seconds: 30))
        #expect(
            stalled.localizedDescription.hasPrefix(
                "the connection stalled: fewer than 1024 bytes a second went out for 30.0 s"),
            "\(stalled.localizedDescription)")
    }

    @Test func itStartsByAskingWhetherTheServerSpeaksTheDraft() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        expect(resumption.start(), is: .send(.detect))
    }

    @Test(arguments: [(200, false), (404, false), (405, false), (501, false), (400, true), (301, true)])
    func eachVersionIsAskedNewestFirstAndAServerThatSpeaksNoneGetsTheWholeForm(status: Int, limit: Bool) {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        expect(resumption.start(), is: .send(.detect))
        for older in [ResumableUpload.InteropVersion.v9, .v8, .v7, .v6] {
            expect(resumption.handle(answer(status, limit: limit)), is: .send(.detect))
            #expect(resumption.version == older)
        }
        expect(resumption.handle(answer(status, limit: limit)), is: .sendWhole(underMinimumSize: nil))
    }

    @Test func theFirstVersionTheServerSpeaksIsSpokenToTheEnd() {
        for version in ResumableUpload.InteropVersion.allCases {
            var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
            _ = resumption.start()
            for _ in version.rawValue..<ResumableUpload.InteropVersion.newest.rawValue {
                expect(resumption.handle(answer(200)), is: .send(.detect))
            }
            // Version 8 on answers `Accept-Patch` and may give no limits; 6 and 7 always give `Upload-Limit`.
            let supported =
                version >= .v8 ? answer(204, acceptsPartialUpload: true) : answer(200, limit: true, version: version)
            expect(resumption.handle(supported), is: .send(.create), "\(version)")
            _ = resumption.handle(answer(201, location: location, offset: 0, complete: false))
            _ = resumption.handle(dropped)
            expect(
                resumption.handle(answer(204, offset: 500, complete: false)), is: .send(.append(from: 500, upTo: 1_000))
            )
            #expect(resumption.version == version)
        }
    }

    @Test func aServerThatNamesAnOlderVersionIsSpokenToInItAtOnce() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = resumption.start()
        expect(resumption.handle(answer(200, limit: true, version: .v7)), is: .send(.create))
        #expect(resumption.version == .v7)
        var unknown = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = unknown.start()
        let newer = ResumableUpload.Answer(statusCode: 200, limits: .init(), interopVersion: 11)
        expect(unknown.handle(.answered(newer, Self.reply)), is: .send(.detect), "a version not spoken is not taken")
        #expect(unknown.version == .v9)
        // As `NIOResumableUpload` refuses a version it does not speak: a 400 that names its own.
        var refused = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = refused.start()
        expect(refused.handle(answer(400, version: .v6)), is: .send(.detect))
        #expect(refused.version == .v6, "asked next in the version it named")
        expect(refused.handle(answer(200, limit: true, version: .v6)), is: .send(.create))
    }

    @Test func aServerThatSpeaksTheDraftIsAskedToCreateTheUpload() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = resumption.start()
        expect(resumption.handle(answer(200, limit: true)), is: .send(.create))
    }

    @Test func aCreationAnsweredWithLocationAppendsFromTheServersOffset() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true))
        expect(
            resumption.handle(answer(201, location: location, offset: 0, complete: false)),
            is: .send(.append(from: 0, upTo: 1_000)))
        #expect(resumption.location == location)
    }

    @Test func aCreationAnsweredAsAPlainRequestFailsRatherThanClaimTheForm() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true))
        guard case .fail(let error, _) = resumption.handle(answer(200)),
            case .resumptionRefused(statusCode: 200) = (error as? MultipartError)?.reason
        else {
            Issue.record("expected resumptionRefused")
            return
        }
    }

    @Test func aCreationRefusedIsTheAnswer() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true))
        expect(resumption.handle(answer(413)), is: .answer(Self.reply))
    }

    // MARK: Appending and resuming

    @Test func theApplicationsAnswerEndsTheUpload() {
        var resumption = appending()
        expect(resumption.handle(answer(200, complete: true)), is: .answer(Self.reply))
        var older = appending(version: .v6)
        expect(older.handle(answer(200)), is: .answer(Self.reply), "version 6 need not echo Upload-Complete")
        var failed = appending()
        expect(
            failed.handle(answer(500, complete: true)), is: .answer(Self.reply),
            "an answer of the application, even a failure")
        var refused = appending()
        expect(refused.handle(answer(400)), is: .answer(Self.reply), "a 4xx without Upload-Complete is not retried")
    }

    @Test func aDropWaitsThenAsksTheOffsetThenSendsTheRest() {
        var resumption = appending()
        expect(resumption.handle(dropped), is: .wait(seconds: 0.5, then: .askOffset))
        expect(resumption.handle(answer(204, offset: 400, complete: false)), is: .send(.append(from: 400, upTo: 1_000)))
        #expect(resumption.acknowledged == 400)
        #expect(resumption.retries == 0, "the offset moved on: the retry is given back")
    }

    @Test func theBackoffDoublesUntilTheOffsetMovesOn() {
        var resumption = appending(
            MultipartResumption(maximumAttempts: 10, initialDelay: 0.5, maximumDelay: 1.5, singleRequestLimit: 0))
        expect(resumption.handle(dropped), is: .wait(seconds: 0.5, then: .askOffset))
        expect(resumption.handle(dropped), is: .wait(seconds: 1, then: .askOffset), "the HEAD failed too")
        expect(resumption.handle(answer(204, offset: 0, complete: false)), is: .send(.append(from: 0, upTo: 1_000)))
        expect(resumption.handle(dropped), is: .wait(seconds: 1.5, then: .askOffset), "capped at the maximum")
        expect(resumption.handle(answer(204, offset: 600, complete: false)), is: .send(.append(from: 600, upTo: 1_000)))
        expect(resumption.handle(dropped), is: .wait(seconds: 0.5, then: .askOffset), "progress resets the wait")
    }

    @Test func theRetriesAreBoundedAndTheErrorSaysHowFarItGot() {
        var resumption = appending()
        _ = resumption.handle(dropped)
        _ = resumption.handle(answer(204, offset: 700, complete: false))
        // Counted from the progress: three more failures in a row.
        _ = resumption.handle(dropped)
        _ = resumption.handle(dropped)
        _ = resumption.handle(dropped)
        guard case .fail(let failure, _) = resumption.handle(dropped), let error = failure as? MultipartError,
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
        expect(resumption.handle(answer(409, offset: 300, complete: false)), is: .send(.append(from: 300, upTo: 1_000)))
        #expect(resumption.acknowledged == 300)
        var blind = appending()
        expect(blind.handle(answer(409)), is: .wait(seconds: 0.5, then: .askOffset), "without an offset, ask it")
    }

    @Test func anAnswerThatSaysIncompleteResumesFromItsOffset() {
        var resumption = appending()
        expect(resumption.handle(answer(201, offset: 800, complete: false)), is: .send(.append(from: 800, upTo: 1_000)))
    }

    @Test func anExpiredUploadStartsOverOnceThenFails() {
        var resumption = appending()
        _ = resumption.handle(dropped)
        _ = resumption.handle(answer(204, offset: 500, complete: false))
        expect(resumption.handle(answer(404)), is: .send(.create))
        #expect(resumption.acknowledged == 0 && resumption.location == nil)
        expect(
            resumption.handle(answer(201, location: location, offset: 0, complete: false)),
            is: .send(.append(from: 0, upTo: 1_000)))
        _ = resumption.handle(dropped)
        guard case .fail(let error, _) = resumption.handle(answer(410)),
            case .uploadExpired(statusCode: 410) = (error as? MultipartError)?.reason
        else {
            Issue.record("expected uploadExpired")
            return
        }
    }

    @Test func aServerThatHasEverythingButLostTheAnswerIsAFailureNotASuccess() {
        var resumption = appending()
        _ = resumption.handle(dropped)
        guard case .fail(let error, _) = resumption.handle(answer(204, offset: 1_000, complete: true)),
            case .answerLost(contentLength: 1_000) = (error as? MultipartError)?.reason
        else {
            Issue.record("expected answerLost")
            return
        }
    }

    /// What one answer means in each version, as a table: the rules of each version (`InteropVersion`) read the same
    /// answer. `early` answers came when 400 of the append's 1,000 bytes were handed out.
    @Test func theSameAnswerIsReadByEachVersionsRules() {
        enum Reading: Equatable {
            case answer
            case appendFrom(UInt64)
            case askOffset
            case breach(String)
            case lost
        }
        func read(_ action: ResumableUpload.StateMachine.Action) -> Reading? {
            switch action {
            case .answer: return .answer
            case .send(.append(let offset, _)): return .appendFrom(offset)
            case .wait(_, .askOffset), .send(.askOffset): return .askOffset
            case .fail(let error, _):
                guard let reason = (error as? MultipartError)?.reason else { return nil }
                if case .answerLost = reason { return .lost }
                // The case's name, which a mirror of an enum with a payload gives as its one child's label.
                return .breach(Mirror(reflecting: reason).children.first?.label ?? "\(reason)")
            default: return nil
            }
        }
        let everyOther: [ResumableUpload.InteropVersion] = [.v7, .v8, .v9, .v10]
        let table: [(String, (inout ResumableUpload.StateMachine) -> ResumableUpload.StateMachine.Action, [Reading])] =
            [
                (
                    "a 200 to the last append without Upload-Complete", { $0.handle(answer(200)) },
                    [.answer] + everyOther.map { _ in .breach("uploadCompleteMissing") }
                ),
                (
                    "a 400 with ?1 before the last byte", { $0.handle(answer(400, complete: true, handedOut: 400)) },
                    [
                        .breach("completionClaimedEarly"), .breach("completionClaimedEarly"),
                        .breach("completionClaimedEarly"),
                        .breach("completionClaimedEarly"), .answer,
                    ]
                ),
                (
                    "a 200 with ?1 before the last byte", { $0.handle(answer(200, complete: true, handedOut: 400)) },
                    Array(repeating: .breach("completionClaimedEarly"), count: 5)
                ),
                (
                    "a 413 with ?1 after the last byte", { $0.handle(answer(413, complete: true)) },
                    Array(repeating: .answer, count: 5)
                ),
                (
                    "a 409 with ?0 at 500", { $0.handle(answer(409, offset: 500, complete: false)) },
                    Array(repeating: .appendFrom(500), count: 5)
                ),
                (
                    "a HEAD's 204, every byte, no Upload-Complete",
                    { machine in
                        _ = machine.handle(dropped)
                        return machine.handle(answer(204, offset: 1_000))
                    }, [.appendFrom(1_000)] + everyOther.map { _ in .breach("uploadCompleteMissing") }
                ),
                (
                    "a HEAD's 204, every byte, ?1",
                    { machine in
                        _ = machine.handle(dropped)
                        return machine.handle(answer(204, offset: 1_000, complete: true))
                    }, Array(repeating: .lost, count: 5)
                ),
                (
                    // The field of versions before 5, which NIOResumableUpload still writes in version 6.
                    "a HEAD's 204, every byte, Upload-Incomplete: ?0 and no Upload-Complete",
                    { machine in
                        _ = machine.handle(dropped)
                        return machine.handle(answer(204, offset: 1_000, incomplete: false))
                    }, [.lost] + everyOther.map { _ in .breach("uploadCompleteMissing") }
                ),
                (
                    "a HEAD's 204, ?1 at 600 of the form's 1,000 bytes",
                    { machine in
                        _ = machine.handle(dropped)
                        return machine.handle(answer(204, offset: 600, complete: true, length: 1_000))
                    }, Array(repeating: .breach("completeAtShortOffset"), count: 5)
                ),
            ]
        for (what, event, readings) in table {
            for (version, expected) in zip(ResumableUpload.InteropVersion.allCases, readings) {
                var machine = appending(version: version)
                #expect(read(event(&machine)) == expected, "\(what), version \(version.rawValue)")
            }
        }
    }

    /// A refusal of the creation (none of the form sent) is the application's answer, which the request layer then
    /// judges as a plain upload's (`acceptableStatusCodes`, the body's sink): taken as the answer on its head alone, as
    /// no answer the upload goes on from is (a busy 503, the `201` that creates the upload).
    @Test(arguments: [400, 401, 403, 405, 413])
    func aRefusedCreationIsTheAnswer(status: Int) {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = resumption.start()
        expect(resumption.handle(answer(200, limit: true)), is: .send(.create))
        func head(_ status: Int, _ fields: [String: String] = [:]) -> HTTPURLResponse {
            HTTPURLResponse(url: location, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)!
        }
        #expect(resumption.takesAsAnswer(head(status), handedOut: 0))
        #expect(!resumption.takesAsAnswer(head(503), handedOut: 0))
        #expect(
            !resumption.takesAsAnswer(
                head(201, ["Location": location.absoluteString, "Upload-Complete": "?0"]), handedOut: 0))
        expect(resumption.handle(answer(status)), is: .answer(Self.reply))
    }

    /// Every byte and no word either way is no completion: version 6, which may leave `Upload-Complete` out of a
    /// `HEAD`, completes the upload with an empty append saying `?1`, whose answer is the application's.
    @Test func inVersion6EveryByteAndNoWordIsCompletedByAnEmptyAppend() {
        var resumption = appending(version: .v6)
        _ = resumption.handle(dropped)
        guard case .send(.append(1_000, 1_000)) = resumption.handle(answer(204, offset: 1_000)) else {
            Issue.record("an empty append with ?1, not an answer taken as lost")
            return
        }
        expect(resumption.handle(answer(200)), is: .answer(Self.reply), "version 6: a 2xx with no word is the answer")
    }

    /// From version 7 on a `HEAD` must say `Upload-Complete`: a 2xx without it is a breach at any offset, never a
    /// completion, and deletes nothing: the server may hold the upload whole.
    @Test(arguments: [ResumableUpload.InteropVersion.v7, .v8, .v9, .v10], [UInt64(1_000), 400, 0])
    func fromVersion7AHeadWithoutUploadCompleteIsABreach(version: ResumableUpload.InteropVersion, offset: UInt64) {
        var resumption = appending(version: version)
        _ = resumption.handle(dropped)
        guard case .fail(let error, let deleting) = resumption.handle(answer(204, offset: offset)),
            case .uploadCompleteMissing(statusCode: 204) = (error as? MultipartError)?.reason
        else {
            Issue.record("expected uploadCompleteMissing")
            return
        }
        #expect(deleting == nil)
    }

    /// The same breach on a saved upload is not the server's last word on an upload that may be whole: the upload
    /// and its state are kept for a later run to ask again, on the first ask about it and after a run's own appends.
    @Test func aSavedUploadWhoseHeadLeavesOutUploadCompleteIsKept() {
        var resumed = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, savesState: true,
            resuming: .init(location: location, acknowledged: 300), jitter: \.upperBound)
        _ = resumed.start()
        guard case .stop(let error, let keeping) = resumed.handle(answer(204, offset: 1_000)),
            case .uploadCompleteMissing(statusCode: 204) = error.reason
        else {
            Issue.record("a saved upload is kept")
            return
        }
        #expect(keeping == nil, "the saved position is unchanged")
        var kept = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, savesState: true, jitter: \.upperBound)
        _ = kept.start()
        _ = kept.handle(answer(200, limit: true))
        _ = kept.handle(answer(201, location: location, offset: 0, complete: false))
        _ = kept.handle(dropped)
        guard case .stop(_, let written) = kept.handle(answer(200, offset: 600)) else {
            Issue.record("a saved upload is kept after its own appends too")
            return
        }
        #expect(written == nil, "its position is where the server last acknowledged it, which the state holds")
    }

    /// A version 7 upload that gave up asks the server where it stands first: an answer without `Upload-Complete`
    /// there is no completion either.
    @Test func theLastAskBeforeGivingUpNeverTakesAMissingUploadCompleteForCompletion() {
        var resumption = appending(
            MultipartResumption(maximumAttempts: 0, initialDelay: 0, singleRequestLimit: 0), version: .v9)
        guard case .fail(let error, _) = resumption.handle(dropped),
            case .resumeFailed = (error as? MultipartError)?.reason
        else {
            Issue.record("no retries: it gives up")
            return
        }
        var saved = ResumableUpload.StateMachine(
            contentLength: 1_000,
            policy: MultipartResumption(maximumAttempts: 0, initialDelay: 0, singleRequestLimit: 0), savesState: true,
            jitter: \.upperBound)
        _ = saved.start()
        _ = saved.handle(answer(200, limit: true))
        _ = saved.handle(answer(201, location: location, offset: 0, complete: false))
        guard case .send(.askOffset) = saved.handle(dropped) else {
            Issue.record("asked where it stands before giving up")
            return
        }
        guard case .stop(let error, _) = saved.handle(answer(204, offset: 1_000)),
            case .uploadCompleteMissing = error.reason
        else {
            Issue.record("every byte without ?1 is no completion")
            return
        }
    }

    @Test func anOffsetPastTheFormIsRefusedAndTheUploadDeleted() {
        var resumption = appending()
        _ = resumption.handle(dropped)
        guard case .fail(let error, let deleting) = resumption.handle(answer(204, offset: 5_000, complete: false)),
            case .offsetOutOfRange(offset: 5_000, allowed: 0...1_000) = (error as? MultipartError)?.reason
        else {
            Issue.record("expected offsetOutOfRange")
            return
        }
        #expect(deleting == location)
    }

    @Test func aDropBeforeTheUploadExistsTriesTheSameRequestAgain() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = resumption.start()
        expect(resumption.handle(dropped), is: .wait(seconds: 0.5, then: .detect))
        expect(resumption.handle(answer(200, limit: true)), is: .send(.create))
        expect(resumption.handle(dropped), is: .wait(seconds: 1, then: .create))
    }

    // MARK: Every answer the draft allows (#26)

    private func failure(_ action: ResumableUpload.StateMachine.Action) -> (MultipartError.Reason, URL?)? {
        guard case .fail(let error, let deleting) = action else {
            Issue.record("expected a failure, got \(action)")
            return nil
        }
        guard let reason = (error as? MultipartError)?.reason else {
            Issue.record("expected a MultipartError, got \(error)")
            return nil
        }
        return (reason, deleting)
    }

    @Test(arguments: [200, 201, 204, 400, 404, 409, 410, 500, 503])
    func uploadCompleteOnAnyStatusIsTheApplicationsAnswer(status: Int) {
        var resumption = appending()
        expect(resumption.handle(answer(status, offset: 1_000, complete: true)), is: .answer(Self.reply), "\(status)")
        var noOffset = appending()
        expect(noOffset.handle(answer(status, complete: true)), is: .answer(Self.reply), "\(status) without an offset")
    }

    @Test func completeAtAnotherLengthThanTheFormsIsRefused() {
        var resumption = appending()
        guard
            case (.completionClaimedEarly(offset: 400, bytesSent: 1_000, contentLength: 1_000), nil)? =
                failure(resumption.handle(answer(200, offset: 400, complete: true)))
        else {
            Issue.record("expected completionClaimedEarly, deleting nothing the server calls complete")
            return
        }
    }

    @Test(arguments: [200, 204, 400, 500, 503])
    func incompleteOnAnAppendNeverEndsTheUpload(status: Int) {
        var resumption = appending()
        expect(resumption.handle(answer(status, complete: false)), is: .wait(seconds: 0.5, then: .askOffset))
        expect(resumption.handle(answer(204, offset: 300, complete: false)), is: .send(.append(from: 300, upTo: 1_000)))
        var partial = appending()
        expect(
            partial.handle(answer(status, offset: 600, complete: false)), is: .send(.append(from: 600, upTo: 1_000)),
            "a partial acceptance goes on from its offset")
        #expect(partial.retries == 0, "progress is no retry")
    }

    @Test func everyByteButIncompleteIsCompletedByAnEmptyAppend() {
        var resumption = appending()
        _ = resumption.handle(dropped)
        expect(
            resumption.handle(answer(204, offset: 1_000, complete: false)), is: .send(.append(from: 1_000, upTo: 1_000))
        )
        var appended = appending()
        expect(
            appended.handle(answer(204, offset: 1_000, complete: false)), is: .send(.append(from: 1_000, upTo: 1_000)))
    }

    @Test func aServerErrorOrBusyAnswerBacksOffHonouringRetryAfterAndAsksTheOffset() {
        var resumption = appending()
        expect(resumption.handle(answer(503, retryAfter: 0)), is: .wait(seconds: 0, then: .askOffset))
        expect(resumption.handle(answer(503, retryAfter: 1)), is: .wait(seconds: 1, then: .askOffset), "HEAD too")
        expect(resumption.handle(answer(204, offset: 500, complete: false)), is: .send(.append(from: 500, upTo: 1_000)))
        for status in [408, 429, 500, 502] {
            var again = appending()
            expect(again.handle(answer(status)), is: .wait(seconds: 0.5, then: .askOffset), "\(status)")
        }
        var huge = appending()
        expect(huge.handle(answer(503, retryAfter: 4_000_000)), is: .wait(seconds: 1.5, then: .askOffset))
        #expect(huge.retries == 1)
    }

    @Test func aRedirectFromTheUploadMovesItOrEndsItButIsNeverTheAnswer() {
        let moved = URL(string: "http://127.0.0.1:8080/resumable_upload/moved")!
        for status in [307, 308] {
            var resumption = appending()
            expect(resumption.handle(answer(status, location: moved)), is: .send(.askOffset))
            #expect(resumption.location == moved)
        }
        var unfollowed = appending()
        guard
            case (.redirectNotFollowed(statusCode: 302, _), location)? =
                failure(unfollowed.handle(answer(302, location: moved)))
        else {
            Issue.record("expected redirectNotFollowed")
            return
        }
    }

    @Test func anHTTPUploadForAnHTTPSRequestIsRefused() {
        let secure = URL(string: "https://example.com/upload")!
        var resumption = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, requestURL: secure, jitter: \.upperBound)
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true))
        guard
            case (.insecureUploadLocation(location), nil)? =
                failure(resumption.handle(answer(201, location: location, offset: 0, complete: false)))
        else {
            Issue.record("expected insecureUploadLocation")
            return
        }
        var plain = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, requestURL: location, jitter: \.upperBound)
        _ = plain.start()
        _ = plain.handle(answer(200, limit: true))
        expect(plain.handle(answer(201, location: location)), is: .send(.append(from: 0, upTo: 1_000)))
    }

    @Test func theDraftsCreationExampleIsAccepted() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true))
        expect(resumption.handle(answer(201, location: location)), is: .send(.append(from: 0, upTo: 1_000)))
        var complete = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = complete.start()
        _ = complete.handle(answer(200, limit: true))
        guard
            case (.resumptionRefused(statusCode: 201), nil)? =
                failure(complete.handle(answer(201, location: location, complete: true)))
        else {
            Issue.record("a creation that calls an empty body complete has an empty form")
            return
        }
    }

    @Test func uploadLimitDecidesBeforeAnyByteOfTheForm() {
        var tooLarge = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = tooLarge.start()
        guard
            case (.formOverUploadLimit(maxSize: 999, contentLength: 1_000), nil)? =
                failure(tooLarge.handle(answer(200, limits: ResumableUpload.Limits(maxSize: 999))))
        else {
            Issue.record("expected formOverUploadLimit")
            return
        }
        var small = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = small.start()
        expect(
            small.handle(answer(200, limits: ResumableUpload.Limits(minSize: 1_001))),
            is: .sendWhole(underMinimumSize: 1_001))
        var later = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = later.start()
        _ = later.handle(answer(200, limit: true))
        guard
            case (.formOverUploadLimit(maxSize: 10, contentLength: 1_000), location)? =
                failure(later.handle(answer(201, location: location, limits: ResumableUpload.Limits(maxSize: 10))))
        else {
            Issue.record("a creation answer's limit counts too, and the upload is deleted")
            return
        }
    }

    @Test func maxAppendSizeSplitsTheFormIntoAppendsThatSayIncompleteUntilTheLast() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = resumption.start()
        _ = resumption.handle(answer(200, limits: ResumableUpload.Limits(maxAppendSize: 300), version: .v6))
        expect(
            resumption.handle(answer(201, location: location, offset: 0, complete: false)),
            is: .send(.append(from: 0, upTo: 300)))
        expect(
            resumption.handle(answer(204, offset: 300, complete: false)), is: .send(.append(from: 300, upTo: 600)))
        // A 2xx that says nothing of a part sent as incomplete: ask where the server stands.
        expect(resumption.handle(answer(204)), is: .send(.askOffset))
        expect(
            resumption.handle(answer(204, offset: 600, complete: false)), is: .send(.append(from: 600, upTo: 900)))
        expect(
            resumption.handle(answer(204, offset: 900, complete: false)), is: .send(.append(from: 900, upTo: 1_000)))
        expect(resumption.handle(answer(200, offset: 1_000, complete: true)), is: .answer(Self.reply))
        #expect(resumption.retries == 0, "progress is no retry")
    }

    @Test func a413IsNeverSentAgainAtTheSameSize() {
        var resumption = appending()
        expect(resumption.handle(answer(413)), is: .wait(seconds: 0.5, then: .askOffset))
        expect(
            resumption.handle(answer(204, offset: 0, complete: false)), is: .send(.append(from: 0, upTo: 500)),
            "half the size")
        expect(resumption.handle(answer(413)), is: .wait(seconds: 1, then: .askOffset))
        expect(resumption.handle(answer(204, offset: 0, complete: false)), is: .send(.append(from: 0, upTo: 250)))
        var tiny = ResumableUpload.StateMachine(contentLength: 1, policy: policy, jitter: \.upperBound)
        _ = tiny.start()
        _ = tiny.handle(answer(200, limit: true))
        _ = tiny.handle(answer(201, location: location, offset: 0, complete: false))
        expect(tiny.handle(answer(413)), is: .answer(Self.reply), "one byte too large is the server's refusal")
    }

    @Test func a413IsRetriedBetweenMinAndMaxAppendSizeAndNeverUnderTheMinimum() {
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = resumption.start()
        _ = resumption.handle(answer(200, limits: ResumableUpload.Limits(minAppendSize: 300)))
        _ = resumption.handle(answer(201, location: location, offset: 0, complete: false))
        expect(resumption.handle(answer(413)), is: .wait(seconds: 0.5, then: .askOffset))
        expect(resumption.handle(answer(204, offset: 0, complete: false)), is: .send(.append(from: 0, upTo: 500)))
        _ = resumption.handle(answer(413))
        expect(
            resumption.handle(answer(204, offset: 0, complete: false)), is: .send(.append(from: 0, upTo: 300)),
            "half would be 250, under min-append-size")
        expect(resumption.handle(answer(413)), is: .answer(Self.reply), "too large at the minimum: a mismatch")
        // The 413's own Upload-Limit names the size to keep to.
        var told = appending()
        _ = told.handle(answer(413, limits: ResumableUpload.Limits(maxAppendSize: 120)))
        expect(told.handle(answer(204, offset: 0, complete: false)), is: .send(.append(from: 0, upTo: 120)))
    }

    @Test func limitsNoAppendCanKeepFailBeforeAnyByteAndDeleteWhatExists() {
        var before = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = before.start()
        let conflict = ResumableUpload.Limits(maxAppendSize: 100, minAppendSize: 200)
        guard
            case (.appendLimitsConflict(minAppendSize: 200, maxAppendSize: 100), nil)? =
                failure(before.handle(answer(200, limits: conflict)))
        else {
            Issue.record("limits that conflict were taken")
            return
        }
        var after = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = after.start()
        _ = after.handle(answer(200, limits: ResumableUpload.Limits(maxAppendSize: 100)))
        let created = after.handle(answer(201, location: location, offset: 0, limits: .init(minAppendSize: 200)))
        guard case .fail(_, let deleting) = created else {
            Issue.record("\(created)")
            return
        }
        #expect(deleting == location)
    }

    @Test func fromVersion7ASuccessWithoutUploadCompleteIsABreachIn6TheAnswer() {
        for version in ResumableUpload.InteropVersion.allCases {
            for status in [200, 201, 204] {
                var resumption = appending(version: version)
                let action = resumption.handle(answer(status))
                switch (version, action) {
                case (.v6, .answer): break
                case (.v6, _): Issue.record("version 6: \(action)")
                case (_, .fail):
                    guard case (.uploadCompleteMissing(statusCode: status), location)? = failure(action) else {
                        Issue.record("\(version), \(status): \(action)")
                        continue
                    }
                default: Issue.record("\(version), \(status): \(action)")
                }
            }
            // The same for an append that does not complete the form.
            var split = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
            _ = split.start()
            _ = split.handle(answer(200, limits: .init(maxAppendSize: 400), version: version))
            _ = split.handle(answer(201, location: location, offset: 0, complete: false))
            let action = split.handle(answer(204))
            if version == .v6 {
                expect(action, is: .send(.askOffset), "version 6 asks where the server stands")
            } else if case .fail = action {
            } else {
                Issue.record("\(version): \(action)")
            }
        }
    }

    /// A proxy (or the server) that wants a credential nobody gave, at each request of the protocol: never a
    /// success, never a retry; a saved upload is kept for a run that has the credential.
    @Test func a407AtEachRequestEndsTheRunAndASavedUploadIsKept() {
        var detecting = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = detecting.start()
        for _ in 0..<4 { expect(detecting.handle(answer(407)), is: .send(.detect)) }
        expect(
            detecting.handle(answer(407)), is: .sendWhole(underMinimumSize: nil),
            "the whole form, whose request gets the 407 as its answer")
        var creating = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = creating.start()
        _ = creating.handle(answer(200, limit: true))
        expect(creating.handle(answer(407)), is: .answer(Self.reply))
        for status in [401, 407] {
            var sending = appending()
            expect(sending.handle(answer(status)), is: .answer(Self.reply), "\(status), no state saved")
        }
        var asking = appending()
        _ = asking.handle(dropped)
        guard case .fail(_, location) = asking.handle(answer(407)) else {
            Issue.record("a HEAD refused ends an upload that is not saved")
            return
        }
        for status in [401, 407] {
            var (saved, _) = savingAndCreated()
            guard case .stop(let error, nil) = saved.handle(answer(status)),
                case .resumeSaved(retries: 0, bytesAcknowledged: 0, contentLength: 1_000) = error.reason
            else {
                Issue.record("\(status) to an append of a saved upload")
                continue
            }
            var (savedAsking, _) = savingAndCreated()
            _ = savedAsking.handle(dropped)
            guard case .stop = savedAsking.handle(answer(status)) else {
                Issue.record("\(status) to a HEAD of a saved upload")
                continue
            }
        }
    }

    @Test func offsetsAreCheckedAndABreachDeletesTheUpload() {
        // An empty creation answered with an offset: the server cannot have bytes that were never sent.
        var creation = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = creation.start()
        _ = creation.handle(answer(200, limit: true))
        guard
            case (.offsetOutOfRange(offset: 900, allowed: 0...0), location)? =
                failure(creation.handle(answer(201, location: location, offset: 900, complete: false)))
        else {
            Issue.record("expected offsetOutOfRange after the creation")
            return
        }
        // An offset that goes down.
        var down = appending()
        _ = down.handle(dropped)
        _ = down.handle(answer(204, offset: 700, complete: false))
        _ = down.handle(dropped)
        guard
            case (.offsetOutOfRange(offset: 300, allowed: 700...1_000), location)? =
                failure(down.handle(answer(204, offset: 300, complete: false)))
        else {
            Issue.record("expected offsetOutOfRange going down")
            return
        }
        // Another form's length.
        var otherForm = appending()
        _ = otherForm.handle(dropped)
        guard
            case (.uploadLengthMismatch(serverLength: 999, contentLength: 1_000), location)? =
                failure(otherForm.handle(answer(204, offset: 10, complete: false, length: 999)))
        else {
            Issue.record("expected uploadLengthMismatch")
            return
        }
    }

    @Test func noOffsetIsBelievedPastWhatWasHandedOut() {
        var resumption = appending()
        _ = resumption.handle(.failed(URLError(.networkConnectionLost), handedOut: 400))
        guard
            case (.offsetOutOfRange(offset: 700, allowed: 0...400), location)? =
                failure(resumption.handle(answer(204, offset: 700, complete: false)))
        else {
            Issue.record("expected offsetOutOfRange past what was handed out")
            return
        }
        var honest = appending()
        _ = honest.handle(.failed(URLError(.networkConnectionLost), handedOut: 400))
        expect(
            honest.handle(answer(204, offset: 400, complete: false)), is: .send(.append(from: 400, upTo: 1_000)))
        var answered = appending()
        expect(
            answered.handle(answer(204, offset: 100, complete: false, handedOut: 400)),
            is: .send(.append(from: 100, upTo: 1_000)))
        _ = answered.handle(dropped)
        expect(
            answered.handle(answer(204, offset: 700, complete: false)), is: .send(.append(from: 700, upTo: 1_000)),
            "the bound is the append's own: the next append went out whole, so 700 can be true")
    }

    @Test func retriesSpentAfterTheUploadExistsDeleteIt() {
        var resumption = appending(
            MultipartResumption(maximumAttempts: 1, initialDelay: 0, maximumDelay: 0, singleRequestLimit: 0))
        _ = resumption.handle(dropped)
        guard case (.resumeFailed, location)? = failure(resumption.handle(dropped)) else {
            Issue.record("expected resumeFailed")
            return
        }
        var early = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: MultipartResumption(maximumAttempts: 0, singleRequestLimit: 0),
            jitter: \.upperBound)
        _ = early.start()
        guard case (.resumeFailed, nil)? = failure(early.handle(dropped)) else {
            Issue.record("nothing to delete before the upload exists")
            return
        }
    }

    @Test(arguments: [-1, .nan, .infinity, -.infinity, 1e300, .greatestFiniteMagnitude])
    func anyDelayACallerSetsWaitsABoundedFiniteTime(delay: Double) {
        var policy = MultipartResumption(maximumAttempts: 3, singleRequestLimit: 0)
        policy.initialDelay = delay
        policy.maximumDelay = delay
        var resumption = appending(policy)
        guard case .wait(let seconds, _) = resumption.handle(dropped) else {
            Issue.record("expected a wait")
            return
        }
        #expect(seconds.isFinite && seconds >= 0 && seconds <= 3_600, "\(seconds)")
        #expect(UInt64(seconds * 1e9) <= 3_600_000_000_000, "converts to nanoseconds without trapping")
        guard case .wait(let again, _) = resumption.handle(dropped) else {
            Issue.record("expected a wait")
            return
        }
        #expect(again.isFinite && again >= 0 && again <= 3_600, "\(again)")
    }

    /// Random answer sequences: the upload ends in a 2xx answer only when the server said the form is complete
    /// (`?1`, or an append's 2xx from a server that does not echo `Upload-Complete`) with every byte, takes an answer
    /// as lost only where a `HEAD` said `?1`, and never sends from before an offset the server acknowledged. Each
    /// answer is a response whose `Upload-Complete` is drawn among `?1`, `?0`, none and values that are no boolean,
    /// parsed as the driver parses it.
    @Test(arguments: ResumableUpload.InteropVersion.allCases)
    func randomAnswersNeverEndInSuccessWithoutTheWholeFormAndNeverGoBack(version: ResumableUpload.InteropVersion) {
        var generator = SeededGenerator(seed: 26)
        let length: UInt64 = 1_000
        let statuses = [200, 201, 202, 204, 307, 400, 404, 409, 410, 413, 500, 503]
        let completeFields: [String?] = ["?1", "?0", nil, nil, "", "1", "?2", "true", "?1;a=1", "?1, ?0"]
        var (successes, appends, lost, emptyAppends, short) = (0, 0, 0, 0, 0)
        for _ in 0..<5_000 {
            // Past detection and creation, into random answers to appends and HEADs.
            var resumption = appending(
                MultipartResumption(maximumAttempts: 6, initialDelay: 0, singleRequestLimit: 0), version: version)
            var action = ResumableUpload.StateMachine.Action.send(.append(from: 0, upTo: 1_000))
            var highestAcknowledged: UInt64 = 0
            var lastAnswer: ResumableUpload.Answer?
            var lastField: String?
            var lastStep = ResumableUpload.Step.append(from: 0, upTo: 1_000)
            for _ in 0..<40 {
                guard case .send(let step) = action else {
                    guard case .wait(_, let step) = action else { break }
                    action = .send(step)
                    continue
                }
                switch step {
                case .create: highestAcknowledged = 0
                case .append(let offset, let end):
                    appends += 1
                    if offset == length, end == length { emptyAppends += 1 }
                    #expect(offset >= highestAcknowledged, "sent from \(offset) after \(highestAcknowledged)")
                default: break
                }
                lastStep = step
                if Int.random(in: 0..<6, using: &generator) == 0 {
                    action = resumption.handle(dropped)
                    lastAnswer = nil
                    continue
                }
                var fields: [String: String] = [:]
                lastField = completeFields.randomElement(using: &generator)!
                fields["Upload-Complete"] = lastField
                if Bool.random(using: &generator) { fields["Location"] = location.absoluteString }
                if Bool.random(using: &generator) {
                    // Every byte often, as a server that took the form says.
                    fields["Upload-Offset"] = String(
                        Bool.random(using: &generator) ? length : UInt64.random(in: 0...length + 5, using: &generator))
                }
                let response = HTTPURLResponse(
                    url: location, statusCode: statuses.randomElement(using: &generator)!, httpVersion: "HTTP/1.1",
                    headerFields: fields)!
                let answer = ResumableUpload.Answer(response)
                lastAnswer = answer
                action = resumption.handle(.answered(answer, Self.reply))
                highestAcknowledged = max(highestAcknowledged, resumption.acknowledged)
            }
            if case .fail(let error, _) = action, case .answerLost = (error as? MultipartError)?.reason {
                lost += 1
                #expect(lastStep == .askOffset, "only a HEAD says an answer was lost: \(lastStep)")
                #expect(lastField == "?1" || lastField == "?1;a=1", "completion taken from \(lastField ?? "none")")
                #expect(
                    lastAnswer?.offset == length,
                    "a complete upload holds every byte: \(String(describing: lastAnswer))")
                continue
            }
            if case .fail(let error, _) = action, case .completeAtShortOffset = (error as? MultipartError)?.reason {
                short += 1
                #expect(
                    lastAnswer?.isComplete == true && lastAnswer?.offset != length, "\(String(describing: lastAnswer))")
            }
            guard case .answer = action, let answer = lastAnswer, (200..<300).contains(answer.statusCode) else {
                continue
            }
            successes += 1
            guard case .append = lastStep else {
                Issue.record("a 2xx answer to \(lastStep) ended the upload")
                continue
            }
            #expect(answer.isComplete != false, "\(answer)")
            if version >= .v7 {
                #expect(lastField == "?1" || lastField == "?1;a=1", "\(version) requires Upload-Complete: \(answer)")
            }
            if answer.isComplete == true { #expect(answer.offset == nil || answer.offset == length, "\(answer)") }
        }
        // About 45 answers lost a version here (a HEAD's ?1 at every byte), and as many ?1 short of it (a breach).
        #expect(
            successes > 100 && appends > 5_000 && lost > 25 && emptyAppends > 10 && short > 10,
            "every outcome reached in \(version): \(successes) successes, \(appends) appends, \(lost) answers lost, \(emptyAppends) empty appends, \(short) ?1 short of the form"
        )
    }

    // MARK: A saved upload, resumed by another process

    private func resuming(acknowledged: UInt64 = 300) -> ResumableUpload.StateMachine {
        ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, resuming: .init(location: location, acknowledged: acknowledged),
            jitter: \.upperBound)
    }

    @Test func aSavedUploadStartsByAskingItsOffset() {
        var resumption = resuming()
        expect(resumption.start(), is: .send(.askOffset))
        #expect(resumption.location == location)
    }

    @Test func aSavedUploadGoesOnFromAnyOffsetTheServerMayHave() {
        // The process before may have handed out every byte before it died.
        var far = resuming()
        _ = far.start()
        expect(far.handle(answer(204, offset: 950, complete: false)), is: .send(.append(from: 950, upTo: 1_000)))
        var same = resuming()
        _ = same.start()
        expect(same.handle(answer(204, offset: 300, complete: false)), is: .send(.append(from: 300, upTo: 1_000)))
    }

    @Test(arguments: [404, 410])
    func aSavedUploadTheServerNoLongerHasStartsOver(status: Int) {
        var resumption = resuming()
        _ = resumption.start()
        expect(resumption.handle(answer(status)), is: .startOver(.uploadGone(statusCode: status), deleting: nil))
        #expect(resumption.location == nil && resumption.acknowledged == 0, "nothing more: a new upload starts")
    }

    @Test func aSavedUploadWithFewerBytesThanAcknowledgedIsDeletedThenStartedOver() {
        var resumption = resuming(acknowledged: 600)
        _ = resumption.start()
        expect(
            resumption.handle(answer(204, offset: 200, complete: false)),
            is: .startOver(.offsetLost(serverOffset: 200, savedOffset: 600), deleting: location),
            "the DELETE goes to the old upload")
        #expect(resumption.location == nil && resumption.acknowledged == 0)
    }

    @Test func afterTheFirstAnswerASavedUploadKeepsTheUsualOffsetRules() {
        var resumption = resuming(acknowledged: 300)
        _ = resumption.start()
        _ = resumption.handle(answer(204, offset: 500, complete: false))
        expect(resumption.handle(dropped), is: .wait(seconds: 0.5, then: .askOffset))
        guard case .fail(let error, let deleting) = resumption.handle(answer(204, offset: 400, complete: false)),
            case .offsetOutOfRange(400, 500...1_000) = (error as? MultipartError)?.reason
        else {
            Issue.record("an offset that went down after resuming must fail")
            return
        }
        #expect(deleting == location)
    }

    @Test func aSavedUploadTheServerHasWholeLostItsAnswer() {
        var resumption = resuming()
        _ = resumption.start()
        guard case .fail(let error, _) = resumption.handle(answer(204, offset: 1_000, complete: true)),
            case .answerLost = (error as? MultipartError)?.reason
        else {
            Issue.record("a complete saved upload's answer is lost")
            return
        }
    }

    // MARK: Cancels, failures and the saved state: what the driver once decided

    @Test func aCancelDeletesTheUploadUnlessItsStateIsSavedForAnotherRun() {
        var running = appending()
        guard case .cancel(let deleting) = running.handle(.cancelled) else {
            Issue.record("a cancel cancels")
            return
        }
        #expect(deleting == location)
        var saved = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, savesState: true,
            resuming: .init(location: location, acknowledged: 300), jitter: \.upperBound)
        guard case .cancel(let kept) = saved.handle(.cancelled) else {
            Issue.record("a cancel cancels")
            return
        }
        #expect(kept == nil, "the next run resumes it")
        var detecting = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        guard case .cancel(nil) = detecting.handle(.cancelled) else {
            Issue.record("nothing to delete before the upload exists")
            return
        }
    }

    @Test func aFailureNotTheConnectionsEndsTheUploadAndDeletesIt() {
        let partFailed = MultipartError(.streamFailed(nil))
        var resumption = appending()
        guard case .fail(let error, let deleting) = resumption.handle(.failed(partFailed)) else {
            Issue.record("a part that failed ends the upload")
            return
        }
        #expect((error as? MultipartError)?.description == partFailed.description)
        #expect(deleting == location)
        var refused = appending()
        guard case .fail(let urlError as URLError, location) = refused.handle(.failed(URLError(.badURL))) else {
            Issue.record("a bad URL is no dropped connection")
            return
        }
        #expect(urlError.code == .badURL)
    }

    @Test func theConnectionsFailuresAreRetriedAndTheResendOfAnAppendOnlyWhileAppending() {
        let failures: [any Error] = [
            URLError(.networkConnectionLost), URLError(.timedOut), URLError(.cannotConnectToHost),
            URLError(.badServerResponse), URLError(.unknown),
            StallWatch.Stalled(rule: .init(bytesPerSecond: 1, seconds: 1)),
            MultipartError(.appendResent),
        ]
        for failure in failures {
            var resumption = appending()
            expect(
                resumption.handle(.failed(failure)), is: .wait(seconds: 0.5, then: .askOffset), "\(failure)")
        }
        var creating = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy, jitter: \.upperBound)
        _ = creating.start()
        _ = creating.handle(answer(200, limit: true))
        guard case .fail = creating.handle(.failed(MultipartError(.appendResent))) else {
            Issue.record("a resend is an append's alone")
            return
        }
    }

    /// A new upload whose state is saved, created at `location`.
    private func savingAndCreated(_ policy: MultipartResumption? = nil)
        -> (ResumableUpload.StateMachine, ResumableUpload.StateMachine.Action)
    {
        var resumption = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy ?? self.policy, savesState: true, jitter: \.upperBound)
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true))
        let action = resumption.handle(answer(201, location: location, offset: 0, complete: false))
        return (resumption, action)
    }

    @Test func theSavedStateIsWrittenBeforeEachAppendThatGoesFromANewPosition() {
        var (resumption, created) = savingAndCreated()
        expect(
            created,
            is: .keep(.init(writing: .init(location: location, acknowledged: 0)), then: .append(from: 0, upTo: 1_000)))
        _ = resumption.handle(dropped)
        expect(
            resumption.handle(answer(204, offset: 0, complete: false)), is: .send(.append(from: 0, upTo: 1_000)),
            "the same position: nothing to write")
        _ = resumption.handle(dropped)
        expect(
            resumption.handle(answer(204, offset: 400, complete: false)),
            is: .keep(
                .init(writing: .init(location: location, acknowledged: 400)), then: .append(from: 400, upTo: 1_000)))
        let moved = URL(string: "http://127.0.0.1:8080/resumable_upload/moved")!
        expect(resumption.handle(answer(307, location: moved)), is: .send(.askOffset))
        expect(
            resumption.handle(answer(204, offset: 400, complete: false)),
            is: .keep(.init(writing: .init(location: moved, acknowledged: 400)), then: .append(from: 400, upTo: 1_000)))
    }

    #if compiler(>=6.2)  // exit tests are Swift 6.2's; the manifest's 6.1 builds the rest
        /// Events the driver never sends are programming errors, and fail loudly: an answer once the machine has ended
        /// the upload, a stream's end while no append of unknown length is under way.
        @Test func anImpossibleEventFailsLoudly() async {
            await #expect(processExitsWith: .failure) {
                var machine = ResumableUpload.StateMachine(
                    contentLength: 1_000, policy: MultipartResumption(singleRequestLimit: 0))
                _ = machine.start()
                _ = machine.handle(.cancelled)
                let url = URL(string: "http://127.0.0.1:1/")!
                let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: nil, headerFields: [:])!
                _ = machine.handle(.answered(ResumableUpload.Answer(response), (Data(), response)))
            }
            await #expect(processExitsWith: .failure) {
                var machine = ResumableUpload.StateMachine(
                    contentLength: 1_000, policy: MultipartResumption(singleRequestLimit: 0))
                _ = machine.start()
                _ = machine.lengthFound(10)
            }
        }
    #endif

    /// A `Location` that moves the upload is saved only once something there has answered as the upload: a `HEAD`
    /// there that answers 405 keeps the place that last answered, or every later run would ask where nothing is.
    @Test func aMoveNothingAnsweredAtIsNotSaved() {
        var (resumption, _) = savingAndCreated()
        _ = resumption.handle(dropped)
        _ = resumption.handle(answer(204, offset: 400, complete: false))
        let moved = URL(string: "http://127.0.0.1:8080/u/u/1")!
        expect(resumption.handle(answer(308, location: moved)), is: .send(.askOffset))
        guard case .stop(_, let keeping) = resumption.handle(answer(405)) else {
            Issue.record("a HEAD answered 405 did not stop with the upload kept")
            return
        }
        #expect(keeping == nil, "the saved state already holds where the upload last answered, at 400")

        var (unsaved, _) = savingAndCreated()
        _ = unsaved.handle(dropped)
        expect(unsaved.handle(answer(307, location: moved)), is: .send(.askOffset))
        expect(
            unsaved.handle(answer(204, offset: 0, complete: false)),
            is: .keep(.init(writing: .init(location: moved, acknowledged: 0)), then: .append(from: 0, upTo: 1_000)),
            "saved once it answered")
        _ = unsaved.handle(answer(307, location: location))
        guard case .stop(_, let back) = unsaved.handle(answer(405)) else {
            Issue.record("a HEAD answered 405 did not stop with the upload kept")
            return
        }
        #expect(back == nil, "the move that answered stays saved")
    }

    /// Only an answer the upload ends with is the caller's. Its head is judged before its body arrives, as
    /// ``ResumableUpload/StateMachine/handle(_:)`` judges it once the request ends: the body of an answer the upload
    /// goes on from (a move, a retry, a smaller append, a conflict, a partial acceptance, a claim it cannot have)
    /// reaches no sink.
    @Test func onlyTheAnswerTheUploadEndsWithIsTakenAtItsHead() {
        let machine = appending()
        func head(_ status: Int, _ fields: [String: String] = [:]) -> HTTPURLResponse {
            HTTPURLResponse(url: location, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)!
        }
        let goesOn: [(HTTPURLResponse, UInt64, Comment)] = [
            (head(307, ["Location": "/u/moved"]), 1_000, "the upload moved"),
            (head(308, ["Location": "/u/moved"]), 1_000, "the upload moved for good"),
            (head(500), 1_000, "a 5xx"), (head(503, ["Retry-After": "1"]), 1_000, "a 503"), (head(429), 1_000, "429"),
            (head(408), 1_000, "408"), (head(413), 1_000, "too large: a smaller append"),
            (head(409, ["Upload-Offset": "400"]), 1_000, "a conflict"), (head(404), 1_000, "gone: created again"),
            (head(200, ["Upload-Complete": "?0", "Upload-Offset": "400"]), 1_000, "a partial acceptance"),
            (head(200, ["Upload-Complete": "?1", "Upload-Offset": "1000"]), 600, "complete before its last byte"),
        ]
        for (response, handedOut, why) in goesOn {
            #expect(!machine.takesAsAnswer(response, handedOut: handedOut), why)
        }
        let answers: [(HTTPURLResponse, Comment)] = [
            (head(200, ["Upload-Complete": "?1", "Upload-Offset": "1000"]), "complete"),
            (head(400, ["Upload-Complete": "?1"]), "the application's refusal, complete"),
            (head(403), "a refusal"),
        ]
        for (response, why) in answers { #expect(machine.takesAsAnswer(response, handedOut: 1_000), why) }
        // The judge and the machine agree, whatever the head.
        for (response, handedOut, _) in goesOn + answers.map({ ($0.0, 1_000, $0.1) }) {
            var ends = machine
            let action = ends.handle(.answered(ResumableUpload.Answer(response), Self.reply, handedOut: handedOut))
            let isAnswer: Bool = if case .answer = action { true } else { false }
            #expect(isAnswer == machine.takesAsAnswer(response, handedOut: handedOut), "\(response.statusCode)")
        }
    }

    @Test func theSavedStateKeepsTheLifetimeTheLastMaxAgeLeft() {
        let now = Clock()
        var resumption = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, savesState: true, jitter: \.upperBound, clock: { now.nanoseconds })
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true))
        now.nanoseconds += 10_000_000_000
        let created = resumption.handle(
            answer(201, location: location, offset: 0, complete: false, limits: .init(maxAge: 3_600)))
        expect(
            created,
            is: .keep(
                .init(writing: .init(location: location, acknowledged: 0), lifetime: 3_600),
                then: .append(from: 0, upTo: 1_000)))
        now.nanoseconds += 60_000_000_000
        _ = resumption.handle(dropped)
        expect(
            resumption.handle(answer(204, offset: 400, complete: false)),
            is: .keep(
                .init(writing: .init(location: location, acknowledged: 400), lifetime: 3_540),
                then: .append(from: 400, upTo: 1_000)),
            "counted from the answer that gave it")
    }

    @Test func aSavedUploadPastItsLifetimeStartsOverWithoutARequestToIt() {
        var expired = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, savesState: true,
            resuming: .init(location: location, acknowledged: 300), version: .v7, savedLifetime: -1,
            jitter: \.upperBound)
        expect(expired.start(), is: .startOver(.expired, deleting: nil), "not deleted: it is not to be touched")
        #expect(expired.location == nil)
        var alive = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, savesState: true,
            resuming: .init(location: location, acknowledged: 300), version: .v7, savedLifetime: 60,
            jitter: \.upperBound)
        expect(alive.start(), is: .send(.askOffset))
        #expect(alive.version == .v7, "a saved upload speaks the version it was made in")
    }

    /// After Ctrl-C the server may still be reading what the cancelled append had in flight, its offset growing: a
    /// run moments later asks until the offset stops growing, rather than send again what is on its way.
    @Test func aSavedUploadInterruptedMomentsAgoIsAskedUntilItsOffsetStopsGrowing() {
        func interrupted(_ momentsAgo: Bool) -> ResumableUpload.StateMachine {
            ResumableUpload.StateMachine(
                contentLength: 1_000, policy: policy, savesState: true,
                resuming: .init(location: location, acknowledged: 300), interruptedMomentsAgo: momentsAgo,
                jitter: \.upperBound)
        }
        var resumption = interrupted(true)
        expect(resumption.start(), is: .send(.askOffset))
        expect(resumption.handle(answer(204, offset: 300, complete: false)), is: .settle(offset: 300, seconds: 0.5))
        expect(resumption.handle(answer(204, offset: 450, complete: false)), is: .settle(offset: 450, seconds: 0.5))
        expect(
            resumption.handle(answer(204, offset: 450, complete: false)),
            is: .keep(
                .init(resumedAt: 450, writing: .init(location: location, acknowledged: 450)),
                then: .append(from: 450, upTo: 1_000)),
            "settled where the server ended up")
        var later = interrupted(false)
        _ = later.start()
        expect(
            later.handle(answer(204, offset: 300, complete: false)),
            is: .keep(.init(resumedAt: 300), then: .append(from: 300, upTo: 1_000)), "no wait for a run long gone")
        var growing = interrupted(true)
        _ = growing.start()
        var asks = 0
        while case .settle = growing.handle(answer(204, offset: UInt64(301 + asks), complete: false)) { asks += 1 }
        #expect(asks == 20, "bounded")
        var gone = interrupted(true)
        _ = gone.start()
        expect(gone.handle(answer(404)), is: .startOver(.uploadGone(statusCode: 404), deleting: nil))
    }

    @Test func aStateThatCannotBeWrittenFailsTheUploadAndDeletesIt() {
        var (resumption, _) = savingAndCreated()
        let unwritable = MultipartError(.stateUnwritable(URL(fileURLWithPath: "/state"), errno: 28))
        guard case .fail(let error, let deleting) = resumption.handle(.keepFailed(unwritable)) else {
            Issue.record("the caller asked for the state to be kept")
            return
        }
        #expect((error as? MultipartError)?.description == unwritable.description)
        #expect(deleting == location)
    }

    /// What a machine that keeps its upload gave up with: the saved error's offset, and the position written.
    private func stopped(_ action: ResumableUpload.StateMachine.Action) -> (offset: UInt64, writing: UInt64?)? {
        guard case .stop(let error, let keeping) = action,
            case .resumeSaved(_, let offset, 1_000) = error.reason
        else {
            Issue.record("expected the upload kept, got \(action)")
            return nil
        }
        #expect(keeping?.writing.map { $0.location == location } ?? true)
        return (offset, keeping?.writing?.acknowledged)
    }

    @Test func retriesSpentKeepASavedUploadAfterAskingWhereTheServerStands() {
        let noRetries = MultipartResumption(maximumAttempts: 0, initialDelay: 0, maximumDelay: 0, singleRequestLimit: 0)
        var (told, _) = savingAndCreated(noRetries)
        expect(told.handle(dropped), is: .send(.askOffset), "asked before giving up, with no wait")
        guard let (offset, writing) = stopped(told.handle(answer(204, offset: 400, complete: false))) else { return }
        #expect(offset == 400 && writing == 400, "the server's offset, written for the next run")

        var silent = savingAndCreated(noRetries).0
        _ = silent.handle(dropped)
        guard let (last, unwritten) = stopped(silent.handle(dropped)) else { return }
        #expect(last == 0 && unwritten == nil, "the last acknowledged offset, already saved")

        var busy = savingAndCreated(noRetries).0
        _ = busy.handle(dropped)
        #expect(stopped(busy.handle(answer(503)))?.offset == 0, "an answer without an offset says nothing new")

        var lying = savingAndCreated(noRetries).0
        _ = lying.handle(.failed(URLError(.networkConnectionLost), handedOut: 300))
        guard
            case (.offsetOutOfRange(offset: 700, allowed: 0...300), location)? =
                failure(lying.handle(answer(204, offset: 700, complete: false)))
        else {
            Issue.record("an offset past what was sent is a breach, which ends the upload")
            return
        }

        var gone = savingAndCreated(noRetries).0
        _ = gone.handle(dropped)
        guard case (.uploadExpired(statusCode: 410), location)? = failure(gone.handle(answer(410))) else {
            Issue.record("the server's word that the upload is gone ends it")
            return
        }

        var transient = savingAndCreated(noRetries).0
        expect(transient.handle(answer(503)), is: .send(.askOffset), "a 5xx to an append, retries spent")
        #expect(stopped(transient.handle(answer(204, offset: 500, complete: false)))?.offset == 500)

        var unsaved = appending(noRetries)
        guard case (.resumeFailed, location)? = failure(unsaved.handle(dropped)) else {
            Issue.record("with no state to keep it, the upload is deleted")
            return
        }
    }

    @Test func aFailureNotTheConnectionsKeepsASavedUploadUnlessTheFormFailed() {
        let notTheConnection: [any Error] = [
            URLError(.secureConnectionFailed), URLError(.cancelled), URLError(.badURL), CocoaError(.fileReadUnknown),
        ]
        for error in notTheConnection {
            var appended = savingAndCreated().0
            guard let (offset, writing) = stopped(appended.handle(.failed(error, handedOut: 600))) else { return }
            #expect(offset == 0 && writing == nil, "kept where the server last said it stood: \(error)")
            var asking = ResumableUpload.StateMachine(
                contentLength: 1_000, policy: policy, savesState: true,
                resuming: .init(location: location, acknowledged: 300), jitter: \.upperBound)
            _ = asking.start()
            #expect(stopped(asking.handle(.failed(error)))?.offset == 300, "a saved upload asked about: \(error)")
        }
        var partFailed = savingAndCreated().0
        guard case (.streamFailed, location)? = failure(partFailed.handle(.failed(MultipartError(.streamFailed(nil)))))
        else {
            Issue.record("a form that cannot be sent ends the upload, saved or not")
            return
        }
        let noRetries = MultipartResumption(maximumAttempts: 0, initialDelay: 0, maximumDelay: 0, singleRequestLimit: 0)
        var finalHEAD = savingAndCreated(noRetries).0
        _ = finalHEAD.handle(dropped)
        guard case .stop(let error, _) = finalHEAD.handle(.failed(URLError(.secureConnectionFailed))) else {
            Issue.record("the HEAD before giving up that fails otherwise keeps the upload")
            return
        }
        #expect((error.underlying as? URLError)?.code == .networkConnectionLost, "the failure that spent the retries")
    }

    @Test func aHEADThatFailsWithRetriesSpentKeepsASavedUploadAtItsLastOffset() {
        let oneRetry = MultipartResumption(maximumAttempts: 1, initialDelay: 0, maximumDelay: 0, singleRequestLimit: 0)
        var resumption = savingAndCreated(oneRetry).0
        expect(resumption.handle(dropped), is: .wait(seconds: 0, then: .askOffset))
        guard let (offset, writing) = stopped(resumption.handle(dropped)) else { return }
        #expect(offset == 0 && writing == nil, "no second HEAD after the HEAD failed")
    }

    @Test func aSavedUploadIsAnnouncedOnceWhereTheServerHasIt() {
        var resumption = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, savesState: true,
            resuming: .init(location: location, acknowledged: 300), jitter: \.upperBound)
        expect(resumption.start(), is: .send(.askOffset))
        expect(
            resumption.handle(answer(204, offset: 300, complete: false)),
            is: .keep(.init(resumedAt: 300), then: .append(from: 300, upTo: 1_000)), "on disk already: nothing to write"
        )
        _ = resumption.handle(dropped)
        expect(
            resumption.handle(answer(204, offset: 500, complete: false)),
            is: .keep(
                .init(writing: .init(location: location, acknowledged: 500)), then: .append(from: 500, upTo: 1_000)),
            "announced once")
        var further = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, savesState: true,
            resuming: .init(location: location, acknowledged: 300), jitter: \.upperBound)
        expect(
            further.handle(answer(204, offset: 700, complete: false)),
            is: .keep(
                .init(resumedAt: 700, writing: .init(location: location, acknowledged: 700)),
                then: .append(from: 700, upTo: 1_000)))
    }

    // MARK: Waits and the total time

    /// The ranges the machine draws its waits from.
    // @unchecked: a test's own, read and written on the test's one thread; the machine asks it synchronously.
    private final class Draws: @unchecked Sendable {
        var ranges: [ClosedRange<Double>] = []
    }

    /// Each wait is drawn from the upper half of its ceiling, never below the initial wait: a long outage is probed
    /// at most every `maximumDelay / 2`, and no more than `maximumDelay` after the network comes back.
    @Test func eachWaitIsDrawnFromTheUpperHalfOfACeilingThatDoubles() {
        let draws = Draws()
        let policy = MultipartResumption(maximumAttempts: 5, initialDelay: 0.5, maximumDelay: 3, singleRequestLimit: 0)
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy) { range in
            draws.ranges.append(range)
            return range.lowerBound
        }
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true))
        _ = resumption.handle(answer(201, location: location, offset: 0, complete: false))
        for _ in 0..<4 { _ = resumption.handle(dropped) }
        #expect(draws.ranges == [0.5...0.5, 0.5...1, 1...2, 1.5...3])
        // Retry-After is the server's own wait, taken as it is.
        expect(resumption.handle(answer(503, retryAfter: 2)), is: .wait(seconds: 2, then: .askOffset))
    }

    @Test func theDefaultJitterStaysInItsRange() {
        let policy = MultipartResumption(
            maximumAttempts: 50, initialDelay: 0.1, maximumDelay: 0.8, singleRequestLimit: 0)
        var resumption = ResumableUpload.StateMachine(contentLength: 1_000, policy: policy)
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true))
        _ = resumption.handle(answer(201, location: location, offset: 0, complete: false))
        var waits: Set<Double> = []
        for _ in 0..<40 {
            guard case .wait(let seconds, _) = resumption.handle(dropped) else {
                Issue.record("no wait")
                return
            }
            #expect((0.1...0.8).contains(seconds))
            waits.insert(seconds)
        }
        #expect(waits.count > 10, "drawn at random, not fixed")
    }

    /// A clock the test moves by hand.
    // @unchecked: as Draws.
    private final class Clock: @unchecked Sendable {
        var nanoseconds: UInt64 = 1_000_000_000
    }

    @Test func aWaitThatWouldEndPastTheTotalTimeFailsAndDeletesTheUpload() {
        let clock = Clock()
        let policy = MultipartResumption(
            maximumAttempts: 10, initialDelay: 2, maximumDelay: 2, maximumDuration: 15, singleRequestLimit: 0)
        var resumption = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, jitter: \.upperBound, clock: { clock.nanoseconds })
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true))
        _ = resumption.handle(answer(201, location: location, offset: 0, complete: false))
        clock.nanoseconds += 12_950_000_000
        expect(resumption.handle(dropped), is: .wait(seconds: 2, then: .askOffset), "12.95 s + 2 s is within 15 s")
        expect(resumption.handle(answer(204, offset: 300, complete: false)), is: .send(.append(from: 300, upTo: 1_000)))
        clock.nanoseconds += 100_000_000
        guard case .fail(let error, let deleting) = resumption.handle(dropped),
            case .resumeTimeExceeded(13.05, 300, 1_000)? = (error as? MultipartError)?.reason
        else {
            Issue.record("13.05 s + 2 s is past 15 s: out of time")
            return
        }
        #expect(deleting == location)
        #expect(error.localizedDescription.contains("after 13.1 s in all"), "\(error.localizedDescription)")
    }
}

/// Outages: retries given back by progress, waits drawn from the upper half of a doubling ceiling, and a bound on the
/// time waited without progress that keeps a saved upload.
extension ResumableUploadStateMachineTests {
    /// A machine on `clock` that has created its upload and sent its first append.
    private func appending(
        _ policy: MultipartResumption, savesState: Bool = false, on clock: Clock,
        jitter: @escaping @Sendable (ClosedRange<Double>) -> Double = { $0.upperBound }
    ) -> ResumableUpload.StateMachine {
        var resumption = ResumableUpload.StateMachine(
            contentLength: 1_000, policy: policy, savesState: savesState, jitter: jitter,
            clock: { clock.nanoseconds })
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: true))
        _ = resumption.handle(answer(201, location: location, offset: 0, complete: false))
        return resumption
    }

    /// Three drops with `maximumAttempts: 2`, the offset rising between them (the issue's 20 MiB upload, which gave
    /// up after the third): each drop after progress starts the count afresh. Without progress, the third gives up.
    @Test func progressGivesTheRetriesBack() {
        let policy = MultipartResumption(maximumAttempts: 2, initialDelay: 0.5, maximumDelay: 4, singleRequestLimit: 0)
        var resumption = appending(policy, on: Clock())
        for offset: UInt64 in [300, 600, 900] {
            expect(resumption.handle(dropped), is: .wait(seconds: 0.5, then: .askOffset), "the first wait again")
            expect(
                resumption.handle(answer(204, offset: offset, complete: false)),
                is: .send(.append(from: offset, upTo: 1_000)))
        }
        #expect(resumption.retries == 0)
        expect(resumption.handle(dropped), is: .wait(seconds: 0.5, then: .askOffset))
        expect(resumption.handle(answer(204, offset: 900, complete: false)), is: .send(.append(from: 900, upTo: 1_000)))
        expect(resumption.handle(dropped), is: .wait(seconds: 1, then: .askOffset), "no progress: the ceiling doubled")
        expect(resumption.handle(answer(204, offset: 900, complete: false)), is: .send(.append(from: 900, upTo: 1_000)))
        guard case .fail(let error, let deleting) = resumption.handle(dropped),
            case .resumeFailed(2, 900, 1_000)? = (error as? MultipartError)?.reason
        else {
            Issue.record("a third failure in a row without progress gives up")
            return
        }
        #expect(deleting == location)
    }

    /// The defaults wait out an outage of 2 minutes whatever the draws: the shortest waits they can draw add up to
    /// more than that before they give up, and the longest is 15 s.
    @Test func theDefaultsWaitOutAnOutageOfTwoMinutes() {
        for pick in [\ClosedRange<Double>.lowerBound, \.upperBound] {
            var resumption = appending(
                MultipartResumption(singleRequestLimit: 0), on: Clock(), jitter: { $0[keyPath: pick] })
            var waits: [Double] = []
            while case .wait(let seconds, _) = resumption.handle(dropped), waits.count < 1_000 {
                waits.append(seconds)
                _ = resumption.handle(answer(204, offset: 0, complete: false))
            }
            let total = waits.reduce(0, +)
            #expect(waits.count == 30 && total >= 120 && waits.allSatisfy { $0 <= 15 }, "\(waits.count), \(total) s")
        }
    }

    /// An outage longer than `maximumWaitWithoutProgress`: the last try starts at the bound, and its failure ends
    /// the run. With saved state that keeps the state and the server's upload, the server asked where it stands
    /// first; the error says why, typed.
    @Test func anOutageLongerThanTheBoundKeepsASavedUpload() {
        let clock = Clock()
        var policy = MultipartResumption(maximumAttempts: 100, initialDelay: 4, maximumDelay: 4, singleRequestLimit: 0)
        policy.maximumWaitWithoutProgress = 10
        var resumption = appending(policy, savesState: true, on: clock)
        #expect(resumption.outageTimeLeft == nil, "no outage yet: a request waits as long as the caller says")
        expect(resumption.handle(dropped), is: .wait(seconds: 4, then: .askOffset), "the outage begins")
        clock.nanoseconds += 4_000_000_000
        #expect(resumption.outageTimeLeft == 6, "a try that hangs ends at the bound")
        expect(resumption.handle(.failed(URLError(.cannotConnectToHost))), is: .wait(seconds: 4, then: .askOffset))
        clock.nanoseconds += 4_000_000_000
        expect(
            resumption.handle(.failed(URLError(.cannotConnectToHost))), is: .wait(seconds: 2, then: .askOffset),
            "8 s waited: the last try starts at 10 s")
        clock.nanoseconds += 2_000_000_000
        // The failed try asked where the server stands (a HEAD), so it is not asked again.
        guard case .stop(let error, let keeping) = resumption.handle(.failed(URLError(.cannotConnectToHost))),
            case .resumeSaved(_, 0, 1_000) = error.reason,
            case .outageOutlasted(10, 0, 1_000)? = (error.underlying as? MultipartError)?.reason
        else {
            Issue.record("the outage ends the run, keeping the upload")
            return
        }
        #expect(keeping == nil, "saved where it stands already, at its creation")
        #expect("\(error)".contains("made no progress for 10.0 s"), "\(error)")
    }

    /// An outage that begins during an append: at the bound, the server is asked where it stands before the
    /// upload is kept.
    @Test func anOutageThatBeganInAnAppendAsksTheOffsetBeforeKeepingTheUpload() {
        let clock = Clock()
        var policy = MultipartResumption(maximumAttempts: 100, initialDelay: 4, maximumDelay: 4, singleRequestLimit: 0)
        policy.maximumWaitWithoutProgress = 3
        var resumption = appending(policy, savesState: true, on: clock)
        expect(resumption.handle(dropped), is: .wait(seconds: 3, then: .askOffset))
        expect(resumption.handle(answer(204, offset: 0, complete: false)), is: .send(.append(from: 0, upTo: 1_000)))
        clock.nanoseconds += 3_000_000_000
        expect(resumption.handle(dropped), is: .send(.askOffset), "the bound, met by an append's failure")
        guard case .stop(let error, _) = resumption.handle(answer(204, offset: 0, complete: false)),
            case .outageOutlasted(3, 0, 1_000)? = (error.underlying as? MultipartError)?.reason
        else {
            Issue.record("kept, once the server said where it stands")
            return
        }
    }

    /// Progress ends an outage: the bound counts from the first failure since the offset last moved on, so an upload
    /// that moves never outlasts it, however long it takes.
    @Test func progressEndsAnOutage() {
        let clock = Clock()
        var policy = MultipartResumption(maximumAttempts: 100, initialDelay: 4, maximumDelay: 4, singleRequestLimit: 0)
        policy.maximumWaitWithoutProgress = 10
        var resumption = appending(policy, on: clock)
        for offset: UInt64 in [100, 200, 300, 400] {
            clock.nanoseconds += 3_600_000_000_000
            expect(resumption.handle(dropped), is: .wait(seconds: 4, then: .askOffset), "an hour in, a new outage")
            clock.nanoseconds += 9_000_000_000
            expect(
                resumption.handle(answer(204, offset: offset, complete: false)),
                is: .send(.append(from: offset, upTo: 1_000)))
        }
        clock.nanoseconds += 1_000_000_000
        expect(resumption.handle(dropped), is: .wait(seconds: 4, then: .askOffset))
        clock.nanoseconds += 10_000_000_000
        guard case .fail(let error, let deleting) = resumption.handle(.failed(URLError(.timedOut))),
            case .outageOutlasted(10, 400, 1_000)? = (error as? MultipartError)?.reason
        else {
            Issue.record("10 s without progress ends an upload that keeps no state")
            return
        }
        #expect(deleting == location, "nobody can resume it: its resource is deleted")
    }
}

/// A form holding a stream of unknown length: appends of a bounded size until the stream's end is found.
extension ResumableUploadStateMachineTests {
    /// A machine for a form of unknown length, appends of 100 bytes, that has created its upload.
    private func streaming(limits: ResumableUpload.Limits? = nil) -> (
        ResumableUpload.StateMachine, first: ResumableUpload.StateMachine.Action
    ) {
        var policy = self.policy
        policy.bufferedAppendSize = 100
        var resumption = ResumableUpload.StateMachine(contentLength: nil, policy: policy, jitter: \.upperBound)
        _ = resumption.start()
        _ = resumption.handle(answer(200, limit: limits == nil, limits: limits))
        let first = resumption.handle(answer(201, location: location, offset: 0, complete: false))
        return (resumption, first)
    }

    @Test func anUnknownLengthGoesInBoundedAppendsUntilTheStreamEnds() {
        var (resumption, first) = streaming()
        expect(first, is: .send(.append(from: 0, upTo: 100)))
        expect(resumption.handle(answer(204, offset: 100, complete: false)), is: .send(.append(from: 100, upTo: 200)))
        // The stream ends at 250, found while the append's bytes were read: it ends there and completes.
        expect(resumption.lengthFound(250), is: .send(.append(from: 100, upTo: 200)), "not reached yet")
        expect(resumption.handle(answer(204, offset: 200, complete: false)), is: .send(.append(from: 200, upTo: 250)))
        expect(resumption.handle(answer(200, offset: 250, complete: true)), is: .answer(Self.reply))
    }

    @Test func theStreamsEndInsideAnAppendShortensIt() {
        var (resumption, _) = streaming()
        expect(resumption.lengthFound(40), is: .send(.append(from: 0, upTo: 40)))
        let request = ResumableUpload.Step.append(from: 0, upTo: 40).request(
            from: URLRequest(url: location), version: .newest, location: location,
            contentLength: resumption.contentLength, contentType: "multipart/form-data")
        #expect(request.value(forHTTPHeaderField: "Upload-Complete") == "?1")
    }

    @Test func theCreationAndAppendsOfAnUnknownLengthSayNoneAndAreIncomplete() {
        let creation = ResumableUpload.Step.create.request(
            from: URLRequest(url: location), version: .newest, location: nil, contentLength: nil,
            contentType: "multipart/form-data")
        #expect(creation.value(forHTTPHeaderField: "Upload-Length") == nil)
        let append = ResumableUpload.Step.append(from: 0, upTo: 100).request(
            from: URLRequest(url: location), version: .newest, location: location, contentLength: nil,
            contentType: "multipart/form-data")
        #expect(append.value(forHTTPHeaderField: "Upload-Complete") == "?0")
    }

    @Test func aServerThatCallsItCompleteBeforeTheStreamEndedBreaksTheProtocol() {
        var (resumption, _) = streaming()
        guard
            case (.completedBeforeEnd(bytesSent: 100), nil)? = failure(
                resumption.handle(answer(200, complete: true)))
        else {
            Issue.record("expected completedBeforeEnd, deleting nothing the server calls complete")
            return
        }
    }

    @Test func aTooLargeAppendOfAnUnknownLengthIsHalvedAndKeepsTheServersLimits() {
        var (resumption, first) = streaming(limits: ResumableUpload.Limits(maxAppendSize: 60))
        expect(first, is: .send(.append(from: 0, upTo: 60)), "the server's max-append-size under ours")
        expect(resumption.handle(answer(413)), is: .wait(seconds: 0.5, then: .askOffset))
        expect(resumption.handle(answer(204, offset: 0, complete: false)), is: .send(.append(from: 0, upTo: 30)))
    }

    @Test func aLengthOverTheServersMaxSizeFailsWhenItIsFound() {
        var (resumption, _) = streaming(limits: ResumableUpload.Limits(maxSize: 150))
        guard
            case (.formOverUploadLimit(maxSize: 150, contentLength: 400), location)? = failure(
                resumption.lengthFound(400))
        else {
            Issue.record("expected formOverUploadLimit, deleting the upload")
            return
        }
    }
}
