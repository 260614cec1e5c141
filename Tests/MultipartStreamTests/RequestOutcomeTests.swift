import Foundation
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// ``RequestOutcome/verdict``: the one judgement of a finished request, case by case, and the request machine giving
/// the same answer for the same facts (``MultipartStreamedUploadDelegate`` calls the verdict itself).
@Suite struct RequestOutcomeTests {
    private static let url = URL(string: "http://127.0.0.1/upload")!

    private static func response(_ status: Int, _ fields: [String: String] = [:]) -> HTTPURLResponse {
        HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)!
    }

    /// What the verdict said, in a word.
    private static func said(_ verdict: Result<(Data, URLResponse), any Error>) -> String {
        switch verdict {
        case .success(let (_, response)): "answer \((response as? HTTPURLResponse)?.statusCode ?? 0)"
        case .failure(let error as MultipartError): Mirror(reflecting: error.reason).children.first?.label ?? "?"
        case .failure(let error as URLError): "URLError \(error.code.rawValue)"
        case .failure(let error): "\(type(of: error))"
        }
    }

    struct Stopped: Error {}

    /// Facts and what the caller is told. A 1,000-byte body unless a row says otherwise.
    static let table: [(facts: RequestOutcome, told: String, why: String)] = {
        let bodyFailure = MultipartError(.fileVanished(url), partIndex: 1, partName: "video")
        func outcome(_ change: (inout RequestOutcome) -> Void) -> RequestOutcome {
            var outcome = RequestOutcome(handedOut: 1_000, bodyEnd: 1_000, formLength: 1_000)
            change(&outcome)
            return outcome
        }
        let cancelled = URLError(.cancelled)
        let reset = URLError(.networkConnectionLost)
        let aborted = URLError(.unknown)
        return [
            (outcome { $0.response = response(201) }, "answer 201", "the whole body, answered"),
            (outcome { $0.response = response(500) }, "answer 500", "any status is an answer here"),
            (
                outcome {
                    $0.response = response(200)
                    $0.handedOut = 400
                }, "answeredBeforeBodySent", "a 2xx before the whole body: the server cannot have the form"
            ),
            (
                outcome {
                    $0.response = response(413)
                    $0.handedOut = 400
                }, "answer 413", "a refusal before the whole body is an answer"
            ),
            (
                outcome {
                    $0.response = response(204)
                    $0.handedOut = 400
                    $0.takesEarlySuccess = true
                }, "answer 204", "an append the server kept part of"
            ),
            (
                outcome {
                    $0.response = response(200)
                    $0.bodyEnd = nil
                    $0.handedOut = 400
                }, "answeredBeforeBodySent", "unknown length, last byte not handed out"
            ),
            (
                outcome {
                    $0.response = response(200)
                    $0.bodyEnd = nil
                    $0.handedOut = 400
                    $0.handedOutLastByte = true
                }, "answer 200", "unknown length, whole"
            ),
            (
                outcome {
                    $0.bodyFailure = bodyFailure
                    $0.error = aborted
                }, "fileVanished", "the part's failure before URLSession's 'aborted'"
            ),
            (
                outcome {
                    $0.bodyFailure = bodyFailure
                    $0.stopReason = Stopped()
                }, "fileVanished", "the body's failure before the stop reason"
            ),
            (
                outcome {
                    $0.stopReason = Stopped()
                    $0.response = response(307)
                }, "Stopped", "a redirect not followed, the hook's error"
            ),
            (
                outcome {
                    $0.gaveUpChallenge = true
                    $0.error = cancelled
                    $0.response = response(401)
                }, "answer 401", "a challenge given up: the 401 is the answer"
            ),
            (
                outcome {
                    $0.gaveUpChallenge = true
                    $0.error = cancelled
                    $0.response = response(407)
                }, "answer 407", "a proxy challenge given up"
            ),
            (
                outcome {
                    $0.error = cancelled
                    $0.response = response(401)
                }, "URLError -999", "the caller's own cancel of a challenge"
            ),
            (
                outcome {
                    $0.gaveUpChallenge = true
                    $0.error = reset
                    $0.response = response(500)
                }, "URLError -1005", "a given-up challenge makes only a 401 or 407 the answer"
            ),
            (
                outcome {
                    $0.response = response(500)
                    $0.refusesStatus = true
                }, "unacceptableStatus", "the upload's answer with a status the caller refuses"
            ),
            (
                outcome {
                    $0.gaveUpChallenge = true
                    $0.error = cancelled
                    $0.response = response(401)
                    $0.refusesStatus = true
                }, "unacceptableStatus", "a challenge given up, its 401 refused"
            ),
            (
                outcome {
                    $0.response = response(200)
                    $0.handedOut = 400
                    $0.refusesStatus = true
                }, "answeredBeforeBodySent", "an early answer before its status is judged"
            ),
            (
                outcome {
                    $0.error = reset
                    $0.response = response(500)
                    $0.refusesStatus = true
                }, "URLError -1005", "the transport's error before the status"
            ),
            (outcome { $0.error = reset }, "URLError -1005", "the transport's error"),
            (outcome { _ in }, "URLError -1011", "no response at all"),
            (
                outcome {
                    $0.isCancelled = true
                    $0.bodyFailure = bodyFailure
                    $0.response = response(200)
                }, "URLError -999", "a cancel beats everything"
            ),
        ]
    }()

    @Test func eachRowOfTheTable() {
        for row in Self.table {
            #expect(Self.said(row.facts.verdict) == row.told, "\(row.why)")
        }
    }

    /// The request machine's end, for the facts it can be fed, says what the table says.
    @Test func theRequestMachineSaysWhatTheVerdictSays() {
        typealias Machine = UploadRequest.StateMachine
        var form = MultipartFormData()
        form.append(Data(count: 1_000), name: "f")
        let length = form.contentLength!
        for (handedOut, acceptable) in [0, 400, length - 1, length].flatMap({ [($0, nil), ($0, 200..<300)] })
            as [(UInt64, Range<Int>?)]
        {
            for status in [200, 204, 307, 401, 413, 500] {
                for error in [nil, URLError(.networkConnectionLost)] as [URLError?] {
                    var machine = Machine(
                        role: .wholeForm(.stream), contentLength: length, contentType: form.contentType,
                        reception: .answer(accepting: acceptable, body: .inMemory, sink: nil))
                    #expect(machine.streamMade() == .hand)
                    let count = Machine.BodyCount(last: handedOut, furthest: handedOut)
                    machine.responseBegan(count)
                    guard
                        case .finish(let finish) = machine.taskEnded(
                            error: error, response: Self.response(status), body: count)
                    else {
                        Issue.record("no end")
                        continue
                    }
                    var facts = RequestOutcome(
                        response: Self.response(status), error: error, handedOut: handedOut, bodyEnd: length,
                        formLength: length)
                    facts.refusesStatus = acceptable.map { !$0.contains(status) } ?? false
                    #expect(
                        Self.said(finish.result) == Self.said(facts.verdict),
                        "\(handedOut) bytes, \(status), \(error as Any), accepting \(acceptable as Any)")
                }
            }
        }
    }
}
