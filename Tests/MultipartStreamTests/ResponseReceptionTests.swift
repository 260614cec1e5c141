import Foundation
import Testing

@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How one request keeps its answers' bodies, decision by decision, without a server: which bodies go where, the
/// exact bound, when the task is stopped, and what the verdict says of a body past its bound.
@Suite struct ResponseReceptionTests {
    typealias Plan = ResponseReception.Plan
    static let prefix = MultipartResponseBody.refusedBodyLimit

    private func answer(_ body: MultipartResponseBody = .inMemory, accepting: Range<Int>? = nil) -> ResponseReception {
        .answer(accepting: accepting, body: body, sink: ResponseSink(body))
    }

    @Test func theUploadsAnswerGoesWhereItsBodySays() {
        #expect(answer().plan(for: 200) == .memory(limit: 16 << 20, stops: true))
        #expect(answer(.inMemory(upTo: 10)).plan(for: 404) == .memory(limit: 10, stops: true))
        #expect(answer(.file(URL(fileURLWithPath: "/tmp/a"))).plan(for: 200) == .deliver)
        #expect(answer(.chunks { _, _ in }).plan(for: 500) == .deliver)
        #expect(answer(.chunks { _, _ in }).plan(for: nil) == .deliver)
    }

    @Test func aRefusedStatusIsAPrefixWhateverTheBody() {
        for body in [MultipartResponseBody.inMemory, .file(URL(fileURLWithPath: "/tmp/a")), .chunks { _, _ in }] {
            let reception = answer(body, accepting: 200..<300)
            #expect(reception.plan(for: 500) == .memory(limit: Self.prefix, stops: true))
            #expect(!reception.failsPastLimit(statusCode: 500) && !reception.handsHeldBodyToSink(statusCode: 500))
        }
    }

    /// A 3xx, 401 or 407 may be followed by another answer, which URLSession needs it whole for: never stopped, and
    /// held (not handed to a sink) until it is known to be the answer.
    @Test(arguments: [301, 302, 307, 308, 401, 407])
    func anAnswerAnotherMayFollowIsNeverStopped(status: Int) {
        #expect(answer().plan(for: status) == .memory(limit: 16 << 20, stops: false))
        let sunk = answer(.chunks { _, _ in })
        #expect(sunk.plan(for: status) == .memory(limit: MultipartResponseBody.heldAnswerLimit, stops: false))
        #expect(sunk.handsHeldBodyToSink(statusCode: status))
        #expect(answer(accepting: 200..<300).plan(for: status) == .memory(limit: Self.prefix, stops: false))
    }

    /// The resumable protocol's own answers, and statuses it goes on from, are read for a prefix; only what may be
    /// the application's answer fails past its bound.
    @Test func protocolAnswersAreAPrefix() {
        #expect(ResponseReception.protocolAnswer.plan(for: 200) == .memory(limit: Self.prefix, stops: true))
        #expect(!ResponseReception.protocolAnswer.failsPastLimit(statusCode: 200))
        // The last append's: the upload's answer only where the judge (the resumable machine) takes the head.
        let last = answer(.chunks { _, _ in }).answering { response, handedOut in
            response.statusCode < 300 && handedOut == 10 || response.statusCode == 400
        }
        func plan(_ status: Int, handedOut: UInt64 = 10) -> Plan {
            let head = HTTPURLResponse(
                url: URL(string: "http://127.0.0.1:1/")!, statusCode: status, httpVersion: nil, headerFields: [:])!
            let settled = last.settled(for: head, handedOut: handedOut)
            #expect(settled.answersWith == nil, "settled once")
            return settled.plan(for: status)
        }
        for status in [404, 409, 410, 408, 429, 500, 503] {
            #expect(plan(status) == .memory(limit: Self.prefix, stops: true), "\(status)")
        }
        #expect(plan(307) == .memory(limit: Self.prefix, stops: false), "a move is never the answer, nor stopped")
        #expect(plan(200, handedOut: 9) == .memory(limit: Self.prefix, stops: true), "judged on the count at the head")
        #expect(plan(200) == .deliver && plan(400) == .deliver)
        #expect(answer().notTheAnswer.plan(for: 200) == .memory(limit: Self.prefix, stops: true))
    }

    @Test func theBoundIsExactAndTheTaskStopsOnce() {
        var body = ReceivedBody(plan: .memory(limit: 10, stops: true), statusCode: 200)
        #expect(body.take(Data(count: 6)) == .kept)
        #expect(body.take(Data(count: 4)) == .kept)
        #expect(!body.overflowed && body.data.count == 10)
        #expect(body.take(Data(count: 1)) == .stop)
        #expect(body.take(Data(count: 1)) == .kept)
        #expect(body.data.count == 10 && body.overflowed && body.cutShort)
        #expect(body.passedLimit(answer(.inMemory(upTo: 10))) == 10)
        #expect(body.passedLimit(.protocolAnswer) == nil)

        var held = ReceivedBody(plan: .memory(limit: 3, stops: false), statusCode: 302)
        #expect(held.take(Data(count: 5)) == .kept && held.take(Data(count: 5)) == .kept)
        #expect(held.data.count == 3 && held.overflowed && !held.cutShort)

        var delivered = ReceivedBody(plan: .deliver, statusCode: 200)
        #expect(delivered.take(Data(count: 1 << 20)) == .deliver && delivered.data.isEmpty)
    }

    /// The machine: a piece past the bound stops the task, whose end (with the cancel's error) is the verdict: an
    /// answer past its bound fails with `responseTooLarge`, a protocol answer is its prefix.
    @Test func theMachineEndsAtTheBound() throws {
        var form = MultipartFormData()
        form.append("v", name: "a")
        let url = URL(string: "http://127.0.0.1:1/")!
        let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: [:])!
        for (reception, fails) in [(answer(.inMemory(upTo: 8)), true), (ResponseReception.protocolAnswer, false)] {
            var machine = UploadRequest.StateMachine(
                role: .wholeForm(.stream), contentLength: form.contentLength!, contentType: form.contentType,
                reception: reception)
            _ = machine.taskMade()
            #expect(machine.streamMade() == .hand)
            let sent = UploadRequest.StateMachine.BodyCount(last: form.contentLength!, furthest: form.contentLength!)
            machine.responseBegan(sent, response: response)
            let limit = fails ? 8 : Self.prefix
            if case .stop = machine.received(Data(count: limit)) { Issue.record("stopped within the bound") }
            guard case .stop = machine.received(Data(count: 1)) else {
                Issue.record("not stopped past the bound")
                continue
            }
            let cancelled = URLError(.cancelled)
            guard case .finish(let finish) = machine.taskEnded(error: cancelled, response: response, body: sent)
            else {
                Issue.record("not finished")
                continue
            }
            switch finish.result {
            case .success(let (data, _)):
                #expect(!fails && data.count == limit)
            case .failure(let error):
                guard case .responseTooLarge(200, 8)? = (error as? MultipartError)?.reason else {
                    Issue.record("\(error)")
                    continue
                }
                #expect(fails)
            }
            // Told once only.
            let late = machine.taskEnded(error: cancelled, response: response, body: sent)
            if case .none = late {} else { Issue.record("\(late)") }
        }
    }
}
