import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// ``ResumableUpload/StateMachine`` against a server whose every answer may lie: no answer traps, completes a form
/// the client has not, deletes an upload the server holds whole, or leads to a URL that cannot be requested.
@Suite struct ResumableLyingServerTests {
    typealias Machine = ResumableUpload.StateMachine
    private let location = URL(string: "http://127.0.0.1:8080/u/1")!
    private let length: UInt64 = 1_000

    private static let reply: ResumableUpload.Reply = (
        Data("the application's answer".utf8),
        URLResponse(
            url: URL(string: "http://127.0.0.1/")!, mimeType: nil, expectedContentLength: 0, textEncodingName: nil)
    )

    /// The answer parsed from a response with these header fields, as the driver parses it.
    private func answer(_ status: Int, _ fields: [String: String] = [:], handedOut: UInt64 = .max) -> Machine.Event {
        let response = HTTPURLResponse(
            url: location, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)!
        return .answered(ResumableUpload.Answer(response), (Self.reply.0, response), handedOut: handedOut)
    }

    /// A machine that found `version` and created its upload, appends of at most `maxAppend` bytes, about to send
    /// the first.
    private func created(
        _ version: ResumableUpload.InteropVersion = .newest, maxAppend: UInt64? = nil, contentLength: UInt64? = 1_000,
        savesState: Bool = false
    ) -> (Machine, Machine.Action) {
        var machine = Machine(
            contentLength: contentLength,
            policy: MultipartResumption(maximumAttempts: 3, initialDelay: 0, singleRequestLimit: 0),
            savesState: savesState, jitter: \.upperBound)
        _ = machine.start()
        for _ in version.rawValue..<ResumableUpload.InteropVersion.newest.rawValue { _ = machine.handle(answer(200)) }
        let limit = maxAppend.map { "max-append-size=\($0)" } ?? "max-age=60"
        _ = machine.handle(answer(200, ["Upload-Limit": limit, "Upload-Draft-Interop-Version": "\(version.rawValue)"]))
        let action = machine.handle(
            answer(201, ["Location": location.absoluteString, "Upload-Complete": "?0", "Upload-Offset": "0"]))
        return (machine, action)
    }

    /// The upload resource `action` deletes.
    private static func deletion(by action: Machine.Action) -> URL? {
        switch action {
        case .fail(_, let deleting), .cancel(let deleting), .startOver(_, let deleting): deleting
        default: nil
        }
    }

    private static func ends(_ action: Machine.Action) -> Bool {
        switch action {
        case .fail, .stop, .cancel, .startOver, .answer, .sendWhole: true
        case .send, .wait, .keep, .settle: false
        }
    }

    private func failure(_ action: Machine.Action) -> (MultipartError.Reason?, deleting: URL?)? {
        guard case .fail(let error, let deleting) = action else { return nil }
        return ((error as? MultipartError)?.reason, deleting)
    }

    // MARK: The trap

    @Test(arguments: ResumableUpload.InteropVersion.allCases)
    func a413ToAnEmptyLastAppendIsTheAnswerNotATrap(version: ResumableUpload.InteropVersion) {
        var (machine, first) = created(version)
        guard case .send(.append(0, 1_000)) = first else {
            Issue.record("\(first)")
            return
        }
        // Every byte, not complete: the empty append with `?1` completes it.
        let empty = machine.handle(answer(204, ["Upload-Offset": "1000", "Upload-Complete": "?0"]))
        guard case .send(.append(1_000, 1_000)) = empty else {
            Issue.record("\(empty)")
            return
        }
        for limit in [nil, "max-append-size=0", "max-append-size=1", "min-append-size=18446744073709551615"] {
            var again = machine
            let action = again.handle(answer(413, limit.map { ["Upload-Limit": $0] } ?? [:]))
            guard case .answer = action else {
                Issue.record("\(String(describing: limit)): \(action)")
                return
            }
        }
    }

    // MARK: Completion claimed before the last byte

    /// An append sent as `?0` (400 of 1,000 bytes) answered as complete: with the form's length, a larger offset,
    /// a negative one, an unparsable one, or none, in each version.
    @Test(arguments: ResumableUpload.InteropVersion.allCases)
    func completionClaimedForAnIncompleteAppendIsABreach(version: ResumableUpload.InteropVersion) {
        for offset in ["1000", "400", "1001", "18446744073709551615", "-9999", "x", nil] {
            for status in [200, 201, 204] {
                var (machine, first) = created(version, maxAppend: 400)
                guard case .send(.append(0, 400)) = first else {
                    Issue.record("\(first)")
                    return
                }
                var fields = ["Upload-Complete": "?1"]
                fields["Upload-Offset"] = offset
                let action = machine.handle(answer(status, fields))
                guard case (.completionClaimedEarly(_, let sent, let contentLength)?, nil)? = failure(action) else {
                    Issue.record("\(version) \(status) offset \(offset ?? "none"): \(action)")
                    return
                }
                #expect(sent == 400 && contentLength == 1_000)
            }
        }
    }

    /// The last append (`?1`) answered as complete, but with fewer of its bytes handed out, or another offset.
    @Test func completionOfTheLastAppendNeedsItsLastByteAndTheFormsLength() {
        var (handedOutShort, _) = created()
        guard
            case (.completionClaimedEarly(_, 999, _)?, nil)? = failure(
                handedOutShort.handle(answer(200, ["Upload-Complete": "?1"], handedOut: 999)))
        else {
            Issue.record("a completion before the last byte was handed out")
            return
        }
        var (otherOffset, _) = created()
        guard
            case (.completionClaimedEarly(1_001?, _, _)?, nil)? = failure(
                otherOffset.handle(answer(200, ["Upload-Complete": "?1", "Upload-Offset": "1001"])))
        else {
            Issue.record("a completion at another offset")
            return
        }
        var (honest, _) = created()
        guard case .answer = honest.handle(answer(200, ["Upload-Complete": "?1", "Upload-Offset": "1000"])) else {
            Issue.record("the honest completion is the answer")
            return
        }
        // Version 6's answer without the field, for the last append before its last byte was handed out.
        var (v6, _) = created(.v6)
        guard case (.completionClaimedEarly?, _)? = failure(v6.handle(answer(200, [:], handedOut: 500))) else {
            Issue.record("a v6 answer before the last byte")
            return
        }
    }

    /// A stream of unknown length: a completion before its end is a breach, and the upload is not deleted.
    @Test func completionBeforeAStreamsEndDeletesNothing() {
        var (machine, first) = created(contentLength: nil)
        guard case .send(.append(0, let end)) = first else {
            Issue.record("\(first)")
            return
        }
        let action = machine.handle(answer(200, ["Upload-Complete": "?1"], handedOut: end))
        guard case (.completedBeforeEnd?, nil)? = failure(action) else {
            Issue.record("\(action)")
            return
        }
    }

    // MARK: Never delete what the server holds whole

    @Test(arguments: [false, true])
    func anUploadTheServerSaysItHoldsWholeIsNeverDeleted(savesState: Bool) {
        for head in [
            ["Upload-Complete": "?1", "Upload-Offset": "1000"], ["Upload-Complete": "?1"],
            ["Upload-Complete": "?1", "Upload-Offset": "1000", "Upload-Length": "999"],
            ["Upload-Complete": "?1", "Upload-Offset": "5000"],
        ] {
            var (machine, _) = created(savesState: savesState)
            let retry = machine.handle(.failed(URLError(.networkConnectionLost)))
            guard case .wait(_, .askOffset) = retry else {
                Issue.record("\(retry)")
                return
            }
            let action = machine.handle(answer(204, head))
            // Ended (failed, or kept for the next run where the offset is missing), deleting nothing.
            guard Self.deletion(by: action) == nil, Self.ends(action) else {
                Issue.record("\(head): \(action)")
                return
            }
        }
        // Every byte and no word either way is no completion, and deletes nothing: version 6 asks for it with an
        // empty append saying `?1`; from version 7 it is a breach that ends the upload.
        var (v6, _) = created(.v6, savesState: savesState)
        _ = v6.handle(.failed(URLError(.timedOut)))
        switch v6.handle(answer(204, ["Upload-Offset": "1000"])) {
        case .send(.append(1_000, 1_000)), .keep(_, .append(1_000, 1_000)): break
        case let other: Issue.record("v6 at the full length: \(other)")
        }
        var (v9, _) = created(.v9, savesState: savesState)
        _ = v9.handle(.failed(URLError(.timedOut)))
        let breach = v9.handle(answer(204, ["Upload-Offset": "1000"]))
        guard Self.deletion(by: breach) == nil, Self.ends(breach) else {
            Issue.record("v9 at the full length: \(breach)")
            return
        }
    }

    // MARK: Locations

    @Test(arguments: [
        ("ftp://127.0.0.1/u/1", "its scheme is not http or https"), ("http:///u/1", "it has no host"),
        ("http://u:p@127.0.0.1:8080/u/1", "it holds a user or password"),
        ("http://ada@127.0.0.1:8080/u/1", "it holds a user or password"),
        ("http://127.0.0.1/u?" + String(repeating: "a", count: 100_000), "it is longer than 8192 bytes"),
        ("data:text/plain,x", "its scheme is not http or https"),
    ])
    func aLocationThatCannotBeRequestedIsABreachAtCreation(value: String, flaw: String) {
        var machine = Machine(
            contentLength: length, policy: MultipartResumption(singleRequestLimit: 0), savesState: true)
        _ = machine.start()
        _ = machine.handle(answer(200, ["Upload-Limit": "max-age=60"]))
        let action = machine.handle(answer(201, ["Location": value, "Upload-Complete": "?0", "Upload-Offset": "0"]))
        guard case (.unusableUploadLocation(let shown, let said)?, nil)? = failure(action) else {
            Issue.record("\(value.prefix(60)): \(action)")
            return
        }
        #expect(said == flaw && shown.count <= 200)
        // A 307 from the upload resource to such a URL: refused too, the upload at the old location deleted.
        var (moving, _) = created()
        guard case (.unusableUploadLocation?, location?)? = failure(moving.handle(answer(307, ["Location": value])))
        else {
            Issue.record("moved to \(value.prefix(60))")
            return
        }
    }

    /// A relative `Location` is resolved against the request's URL without the caller's user and password, which
    /// are not the server's to put in the upload's URL: a request to `http://ada:pw@host/` still creates its upload.
    @Test func aRelativeLocationDoesNotTakeTheCallersUserAndPassword() {
        let base = URL(string: "http://ada:pw@127.0.0.1:8080/s/x")!
        for location in ["/u/1", "u/1", "//127.0.0.1:8080/u/1"] {
            let response = HTTPURLResponse(
                url: base, statusCode: 201, httpVersion: "HTTP/1.1",
                headerFields: ["Location": location, "Upload-Complete": "?0"])!
            let parsed = ResumableUpload.Answer(response).location
            #expect(parsed?.user == nil && parsed?.host == "127.0.0.1", "\(location): \(String(describing: parsed))")
            #expect(parsed?.flawAsServerChosen == nil)
        }
    }

    // MARK: Numbers at their edges

    /// Each number a server gives, at 0, 1, the form's length, `UInt64.max` and just past them, in every answer the
    /// machine can meet: none traps, and every wait is bounded.
    @Test func everyNumberAtItsEdgesIsTakenWithoutATrap() {
        let values = [
            "0", "1", "999", "1000", "1001", "9223372036854775807", "18446744073709551615", "18446744073709551616",
            "999999999999999", "1000000000000000", "-1", "",
        ]
        let fields = ["Upload-Offset", "Upload-Length", "Upload-Limit", "Retry-After"]
        var steps = 0
        for version in ResumableUpload.InteropVersion.allCases {
            for contentLength in [UInt64(0), 1, 1_000, nil] {
                for field in fields {
                    for value in values {
                        for status in [104, 200, 204, 409, 413, 503] {
                            let text =
                                field == "Upload-Limit"
                                ? ["max-size", "min-size", "max-append-size", "min-append-size", "max-age"].map {
                                    "\($0)=\(value)"
                                }.joined(separator: ", ") : value
                            var (machine, _) = created(version, contentLength: contentLength)
                            for complete in ["?0", "?1"] {
                                var copy = machine
                                let action = copy.handle(answer(status, [field: text, "Upload-Complete": complete]))
                                steps += 1
                                if case .wait(let seconds, _) = action { #expect(seconds >= 0 && seconds <= 3_600) }
                            }
                            _ = machine.handle(.failed(URLError(.networkConnectionLost)))
                            _ = machine.handle(answer(status, [field: text, "Upload-Complete": "?0"]))
                            steps += 1
                        }
                    }
                }
            }
        }
        #expect(steps > 10_000)
    }

    // MARK: The property

    /// Seeded random answers (any status, any field, any value, drops and timeouts, cancels), from the first
    /// request to the end, in every version, for forms of known and unknown length, sent in one request or created
    /// first, saved or not: the machine never traps, ends in a 2xx answer only after the request that said `?1`,
    /// reached the form's end and handed out its last byte, never asks to delete an upload the server said it holds
    /// complete, never sends a request to a URL that cannot be requested, and never waits unbounded.
    @Test func randomServerAnswersKeepTheMachinesPromises() {
        var steps = 0
        var endings: [String: Int] = [:]
        let seeds: ClosedRange<UInt64> = 1...20_000
        for seed in seeds {
            var generator = SeededGenerator(seed: seed)
            let known = seed % 4 != 0
            let savesState = seed % 3 == 0
            // Small enough for one request in a fifth of the seeds.
            let limit = seed % 5 == 1 ? length : 0
            var machine = Machine(
                contentLength: known ? length : nil,
                policy: MultipartResumption(
                    maximumAttempts: Int.random(in: 0...4, using: &generator), initialDelay: 0,
                    singleRequestLimit: limit),
                requestURL: URL(string: "http://127.0.0.1:8080/s"), savesState: savesState,
                resuming: savesState && seed % 2 == 0 ? .init(location: location, acknowledged: 400) : nil,
                version: ResumableUpload.InteropVersion.allCases.randomElement(using: &generator)!,
                jitter: \.upperBound)
            var action = machine.start()
            var lastStep: ResumableUpload.Step?
            var handedOut: UInt64 = 0
            var furthest: UInt64 = 0
            var saidComplete = false
            for _ in 0..<60 {
                switch action {
                case .send(let step), .wait(_, let step), .keep(_, let step):
                    if case .wait(let seconds, _) = action { #expect(seconds >= 0 && seconds <= 3_600) }
                    if let url = machine.location {
                        #expect(url.flawAsServerChosen == nil, "seed \(seed): a request to \(url)")
                    }
                    lastStep = step
                    if case .append(let from, let end) = step, machine.contentLength == nil,
                        Int.random(in: 0..<3, using: &generator) == 0
                    {
                        // The stream ends within this append, as the driver finds while it fills the append.
                        action = machine.lengthFound(
                            UInt64.random(in: from...min(end, from + 2_000), using: &generator))
                        steps += 1
                        continue
                    }
                    handedOut = randomHandedOut(step, &generator)
                    if case .append = step { furthest = max(furthest, handedOut) }
                    action = machine.handle(
                        randomEvent(
                            to: step, handedOut: handedOut, lastHandedOut: furthest, &generator,
                            saidComplete: &saidComplete))
                    steps += 1
                    if saidComplete, let deleting = Self.deletion(by: action) {
                        Issue.record("seed \(seed): deletes \(deleting), which the server said it holds complete")
                    }
                    saidComplete = false
                case .settle:
                    action = .send(.askOffset)
                case .answer(let reply):
                    let status = (reply.1 as? HTTPURLResponse)?.statusCode ?? 0
                    if (200..<300).contains(status) {
                        let end: UInt64? =
                            switch lastStep {
                            case .append(_, let end)?: end
                            case .createComplete?: machine.contentLength
                            default: nil
                            }
                        guard let end, let contentLength = machine.contentLength, end >= contentLength,
                            handedOut >= contentLength
                        else {
                            Issue.record("seed \(seed): a \(status) answer after \(String(describing: lastStep))")
                            break
                        }
                    }
                    endings["answer \(status / 100)xx", default: 0] += 1
                    action = .cancel(deleting: nil)
                case .fail, .stop, .cancel, .startOver, .sendWhole:
                    endings[String(describing: action).prefix { $0 != "(" }.description, default: 0] += 1
                    action = .cancel(deleting: nil)
                }
                if case .cancel = action { break }
            }
        }
        #expect(steps > 50_000, "\(steps) steps over \(seeds.count) seeds")
        #expect(endings["answer 2xx", default: 0] > 50 && endings["fail", default: 0] > 500, "\(endings)")
        print("randomServerAnswersKeepTheMachinesPromises: \(steps) steps over \(seeds.count) seeds; \(endings)")
    }

    private func randomHandedOut(_ step: ResumableUpload.Step, _ generator: inout SeededGenerator) -> UInt64 {
        // The whole form in one request is answered once it was all handed out: an earlier success is the request
        // layer's failure, which never reaches the machine.
        if step == .createComplete { return length }
        guard case .append(let from, let end) = step else { return 0 }
        switch Int.random(in: 0..<4, using: &generator) {
        case 0: return from
        case 1: return UInt64.random(in: from...max(from, end), using: &generator)
        default: return end
        }
    }

    private func randomEvent(
        to step: ResumableUpload.Step, handedOut: UInt64, lastHandedOut: UInt64, _ generator: inout SeededGenerator,
        saidComplete: inout Bool
    ) -> Machine.Event {
        // Mostly the answer that moves the upload on, so that every state is reached; then any answer at all.
        if Int.random(in: 0..<10, using: &generator) < 6 {
            switch step {
            case .detect:
                return answer(200, ["Upload-Limit": "max-age=60", "Accept-Patch": "application/partial-upload"])
            case .create:
                return answer(
                    201, ["Location": location.absoluteString, "Upload-Complete": "?0", "Upload-Offset": "0"])
            case .createComplete:
                // The application's answer, or the upload kept incomplete where it lives.
                if Bool.random(using: &generator) {
                    return answer(200, ["Upload-Complete": "?1"], handedOut: handedOut)
                }
                return answer(
                    201, ["Location": location.absoluteString, "Upload-Complete": "?0"], handedOut: handedOut)
            case .append(_, let end) where handedOut >= end:
                // The server took what was handed out: incomplete, or the whole form where the append said so.
                if Bool.random(using: &generator) {
                    saidComplete = true
                    return answer(200, ["Upload-Offset": "\(end)", "Upload-Complete": "?1"], handedOut: handedOut)
                }
                return answer(204, ["Upload-Offset": "\(handedOut)", "Upload-Complete": "?0"], handedOut: handedOut)
            case .askOffset:
                return answer(204, ["Upload-Offset": "\(lastHandedOut)", "Upload-Complete": "?0"])
            default: break
            }
        }
        switch Int.random(in: 0..<20, using: &generator) {
        case 0: return .failed(URLError(.networkConnectionLost), handedOut: handedOut)
        case 1: return .failed(URLError(.timedOut), handedOut: handedOut)
        case 2: return .failed(URLError(.badURL), handedOut: handedOut)
        case 3: return .cancelled
        default: break
        }
        let statuses = [100, 104, 200, 201, 204, 206, 301, 302, 303, 307, 308, 400, 401, 404, 407, 409, 410, 413, 429]
        let status =
            Bool.random(using: &generator)
            ? statuses.randomElement(using: &generator)! : Int.random(in: 100...999, using: &generator)
        let numbers = ["0", "1", "400", "999", "1000", "1001", "18446744073709551615", "-9999", "x"]
        func number() -> String {
            Bool.random(using: &generator)
                ? numbers.randomElement(using: &generator)! : String(UInt64.random(in: 0...2_000, using: &generator))
        }
        var fields: [String: String] = [:]
        if Bool.random(using: &generator) { fields["Upload-Offset"] = number() }
        if Bool.random(using: &generator) {
            fields["Upload-Complete"] = ["?0", "?1", "1", ""].randomElement(using: &generator)!
        }
        if Int.random(in: 0..<4, using: &generator) == 0 { fields["Upload-Length"] = number() }
        if Int.random(in: 0..<3, using: &generator) == 0 {
            let key = ["max-size", "min-size", "max-append-size", "min-append-size", "max-age"]
                .randomElement(using: &generator)!
            fields["Upload-Limit"] = "\(key)=\(number())"
        }
        if Int.random(in: 0..<3, using: &generator) == 0 {
            fields["Location"] = [
                "/u/1", "http://127.0.0.1:8080/u/2", "//127.0.0.1:9/u", "http:///u", "ftp://h/u", "http://u:p@h/u",
                "https://127.0.0.1/u", "http://127.0.0.1/" + String(repeating: "a", count: 9_000),
            ].randomElement(using: &generator)!
        }
        if Int.random(in: 0..<4, using: &generator) == 0 { fields["Retry-After"] = number() }
        if Int.random(in: 0..<4, using: &generator) == 0 {
            fields["Upload-Draft-Interop-Version"] = String(Int.random(in: 3...11, using: &generator))
        }
        if Int.random(in: 0..<4, using: &generator) == 0 { fields["Accept-Patch"] = "application/partial-upload" }
        let event = answer(status, fields, handedOut: handedOut)
        if case .answered(let parsed, _, _) = event, parsed.isComplete == true { saidComplete = true }
        return event
    }
}
