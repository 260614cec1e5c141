import Foundation
import Testing

@testable import MultipartQueue
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a failure means for trying again is decided once (``Transience``), and the resumable protocol's retries and
/// the queue's waits agree with it, code by code: the three lists they had each differed.
@Suite struct TransienceTests {
    typealias Machine = ResumableUpload.StateMachine

    /// Every code the three old lists named, and codes none of them did.
    static let codes: [(URLError.Code, transient: Bool)] = [
        (.networkConnectionLost, true), (.timedOut, true), (.cannotConnectToHost, true),
        (.notConnectedToInternet, true), (.cannotFindHost, true), (.dnsLookupFailed, true), (.badServerResponse, true),
        (.secureConnectionFailed, false), (.resourceUnavailable, true), (.internationalRoamingOff, true),
        (.dataNotAllowed, true), (.unknown, true), (.badURL, false), (.unsupportedURL, false),
        (.userAuthenticationRequired, false), (.cannotDecodeContentData, false), (.httpTooManyRedirects, false),
        (.serverCertificateUntrusted, false), (.fileDoesNotExist, false), (.zeroByteResource, false),
    ]

    @Test(arguments: codes)
    func aCodeMeansTheSameToTheProtocolAndTheQueue(code: URLError.Code, transient: Bool) {
        #expect(Transience.isTransient(URLError(code)) == transient)
        #expect(FailureMeaning.of(URLError(code)) == (transient ? .noAnswer : .final))
        switch MultipartUploadQueue.Job.verdict(of: URLError(code)) {
        case .waiting(outage: true): #expect(transient, "the queue waits out \(code.rawValue)")
        case .failed: #expect(!transient, "the queue fails \(code.rawValue)")
        case let other: Issue.record("\(code.rawValue): \(other)")
        }
        // A resumable upload that created its upload and met the failure: it asks where the server stands after a
        // wait, or ends.
        let location = URL(string: "http://127.0.0.1:8080/u/1")!
        var machine = Machine(
            contentLength: 1_000,
            policy: MultipartResumption(maximumAttempts: 3, initialDelay: 0, singleRequestLimit: 0), savesState: false,
            jitter: \.upperBound)
        _ = machine.start()
        let answer = { (status: Int, fields: [String: String]) -> Machine.Event in
            let response = HTTPURLResponse(
                url: location, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)!
            return .answered(ResumableUpload.Answer(response), (Data(), response), handedOut: .max)
        }
        let version = String(ResumableUpload.InteropVersion.newest.rawValue)
        _ = machine.handle(answer(200, ["Upload-Limit": "max-age=60", "Upload-Draft-Interop-Version": version]))
        _ = machine.handle(
            answer(201, ["Location": location.absoluteString, "Upload-Complete": "?0", "Upload-Offset": "0"]))
        switch machine.handle(.failed(URLError(code))) {
        case .wait: #expect(transient, "the protocol retries \(code.rawValue)")
        case let other: #expect(!transient, "the protocol ends at \(code.rawValue): \(other)")
        }
    }

    /// The classifier's table: what each kind of failure means, and what the queue makes of it (the protocol's
    /// retries and the command's `--retry` ask the same function).
    static let table: [(String, any Error, FailureMeaning)] = {
        let stalled = StallWatch.Stalled(rule: MultipartResumption.Stall(bytesPerSecond: 1, seconds: 1))
        let busyAnswer = ResumableUpload.UnexpectedAnswer(
            ResumableUpload.Answer(
                HTTPURLResponse(
                    url: URL(string: "http://127.0.0.1/u/1")!, statusCode: 503, httpVersion: nil, headerFields: [:])!),
            to: .askOffset)
        return [
            ("a dropped connection", URLError(.networkConnectionLost), .noAnswer),
            ("a certificate refused", URLError(.serverCertificateUntrusted), .final),
            ("a cancel", CancellationError(), .cancelled),
            ("URLSession's cancel", URLError(.cancelled), .cancelled),
            ("a stall", stalled, .noAnswer),
            ("408", MultipartError(.unacceptableStatus(statusCode: 408, body: Data())), .busy(statusCode: 408)),
            ("429", MultipartError(.unacceptableStatus(statusCode: 429, body: Data())), .busy(statusCode: 429)),
            ("503", MultipartError(.unacceptableStatus(statusCode: 503, body: Data())), .busy(statusCode: 503)),
            ("599", MultipartError(.unacceptableStatus(statusCode: 599, body: Data())), .busy(statusCode: 599)),
            ("400", MultipartError(.unacceptableStatus(statusCode: 400, body: Data())), .final),
            ("403", MultipartError(.unacceptableStatus(statusCode: 403, body: Data())), .final),
            ("413", MultipartError(.unacceptableStatus(statusCode: 413, body: Data())), .final),
            ("the answer lost after the last byte", MultipartError(.answerLost(contentLength: 10)), .answerLost),
            ("URLSession's own resend", MultipartError(.appendResent), .resendRefused),
            ("a file gone", MultipartError(.fileNotFound(URL(fileURLWithPath: "/x"))), .local(.file)),
            ("a stream that failed", MultipartError(.streamFailed(nil)), .local(.stream)),
            (
                "retries out, no answer",
                MultipartError(
                    .resumeFailed(retries: 3, bytesAcknowledged: 0, contentLength: 10),
                    underlying: URLError(.timedOut)), .noAnswer
            ),
            (
                "retries out against a 503",
                MultipartError(
                    .resumeSaved(retries: 3, bytesAcknowledged: 5, contentLength: 10), underlying: busyAnswer),
                .busy(statusCode: 503)
            ),
            (
                "an outage past its bound",
                MultipartError(.outageOutlasted(seconds: 60, bytesAcknowledged: 0, contentLength: 10)), .noAnswer
            ),
            ("an upload expired twice", MultipartError(.uploadExpired(statusCode: 404)), .final),
            ("anything else", CocoaError(.fileReadUnknown), .final),
        ]
    }()

    @Test func everyFailureMeansOneThingAndTheQueueDoesWhatItMeans() {
        for (what, error, meaning) in Self.table {
            #expect(FailureMeaning.of(error) == meaning, "\(what)")
            let outcome = MultipartUploadQueue.Job.verdict(of: error)
            switch (meaning, outcome) {
            case (.noAnswer, .waiting(outage: true)), (.busy, .waiting(outage: false)),
                (.resendRefused, .waiting(outage: false)), (.answerLost, .completed), (.local, .failed),
                (.final, .failed), (.cancelled, .stopped):
                break
            default: Issue.record("\(what): \(meaning), and the queue made \(outcome)")
            }
            let retried = if case .busy = meaning { true } else { meaning == .noAnswer || meaning == .resendRefused }
            #expect(meaning.isTransient == retried, "\(what)")
        }
    }

    @Test func busyStatusesAre408And429AndEvery5xx() {
        for status in [408, 429, 500, 502, 503, 504, 599] {
            #expect(Transience.isBusy(statusCode: status), "\(status)")
        }
        for status in [200, 201, 204, 301, 400, 401, 403, 404, 409, 410, 413, 415, 499, 600] {
            #expect(!Transience.isBusy(statusCode: status), "\(status)")
        }
    }
}
