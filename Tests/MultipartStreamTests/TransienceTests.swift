import Foundation
import Testing

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
        switch MultipartUploadQueue.Job.outcome(of: URLError(code)) {
        case .waiting(outage: true): #expect(transient, "the queue waits out \(code.rawValue)")
        case .failed: #expect(!transient, "the queue fails \(code.rawValue)")
        case let other: Issue.record("\(code.rawValue): \(other)")
        }
        // A resumable upload that created its upload and met the failure: it asks where the server stands after a
        // wait, or ends.
        let location = URL(string: "http://127.0.0.1:8080/u/1")!
        var machine = Machine(
            contentLength: 1_000, policy: MultipartResumption(maximumAttempts: 3, initialDelay: 0), savesState: false,
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

    @Test func busyStatusesAre408And429AndEvery5xx() {
        for status in [408, 429, 500, 502, 503, 504, 599] {
            #expect(Transience.isBusy(statusCode: status), "\(status)")
        }
        for status in [200, 201, 204, 301, 400, 401, 403, 404, 409, 410, 413, 415, 499, 600] {
            #expect(!Transience.isBusy(statusCode: status), "\(status)")
        }
    }
}
