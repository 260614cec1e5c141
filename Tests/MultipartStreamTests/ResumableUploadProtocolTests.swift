import Foundation
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The draft's wire format: each step's request, and an answer's fields read as structured fields.
@Suite struct ResumableUploadProtocolTests {
    private let url = URL(string: "http://127.0.0.1:8080/upload")!
    private let location = URL(string: "http://127.0.0.1:8080/resumable_upload/abc")!

    private func answer(_ headers: [String: String], status: Int = 201) -> ResumableUpload.Answer {
        ResumableUpload.Answer(
            HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!)
    }

    @Test func booleansAndIntegersAreParsedAsStructuredFields() {
        #expect(StructuredField.boolean("?1") == true)
        #expect(StructuredField.boolean(" ?0 ") == false)
        #expect(StructuredField.boolean("?1;note=1") == true, "parameters are ignored")
        for bad in ["1", "?", "?2", "true", "?1, ?0", "", "? 1"] {
            #expect(StructuredField.boolean(bad) == nil, "\(bad.debugDescription)")
        }
        #expect(StructuredField.integer("0") == 0)
        #expect(StructuredField.integer("999999999999999") == 999_999_999_999_999)
        #expect(StructuredField.integer("-5") == -5)
        for bad in ["", "1000000000000000", "+1", "1.5", "0x10", "1 2", "1,2", "-"] {
            #expect(StructuredField.integer(bad) == nil, "\(bad.debugDescription)")
        }
    }

    @Test func uploadLimitIsAStructuredFieldDictionary() {
        let limits = ResumableUpload.Limits(field: "max-size=1000, min-size=10;unit=b, x.vendor_2=?1, *ext, max-age=5")
        #expect(limits == ResumableUpload.Limits(maxSize: 1_000, minSize: 10, maxAge: 5), "unknown keys are left out")
        #expect(ResumableUpload.Limits(field: "max-append-size=-1")?.maxAppendSize == nil, "not a size")
        for bad in ["Max-Size=1", "1key=2", "max size=1", "=1", "max-size=1,,", "_key=1"] {
            #expect(ResumableUpload.Limits(field: bad) == nil, "\(bad.debugDescription) is no dictionary")
        }
    }

    @Test func anAnswerReadsTheDraftsFields() {
        let read = answer([
            "Location": "/resumable_upload/abc", "Upload-Offset": "300", "Upload-Complete": "?0",
            "Upload-Limit": "max-size=1000",
        ])
        #expect(read.statusCode == 201 && read.hasUploadLimit)
        #expect(read.location == location, "resolved against the request's URL")
        #expect(read.offset == 300 && read.isComplete == false)
        let odd = answer(["Upload-Offset": "-1", "Upload-Complete": "yes"])
        #expect(odd.offset == nil, "a negative offset is no offset")
        #expect(odd.isComplete == nil, "not a boolean")
        #expect(!odd.hasUploadLimit && odd.location == nil)
    }

    @Test func eachStepsRequestCarriesTheDraftsHeadersAndNoBody() {
        var caller = URLRequest(url: url)
        caller.setValue("Bearer t", forHTTPHeaderField: "Authorization")
        caller.setValue("5", forHTTPHeaderField: "Content-Length")
        caller.httpBody = Data("x".utf8)
        func request(_ step: ResumableUpload.Step, version: ResumableUpload.InteropVersion = .v6) -> URLRequest {
            step.request(
                from: caller, version: version, location: location, contentLength: 1_000,
                contentType: "multipart/form-data; boundary=b")
        }
        for step in [ResumableUpload.Step.detect, .create, .append(from: 10, upTo: 1_000), .askOffset] {
            let made = request(step)
            #expect(made.value(forHTTPHeaderField: "Upload-Draft-Interop-Version") == "6", "\(step)")
            for version in ResumableUpload.InteropVersion.allCases {
                let header = request(step, version: version).value(forHTTPHeaderField: "Upload-Draft-Interop-Version")
                #expect(header == String(version.rawValue), "\(step)")
            }
            #expect(made.value(forHTTPHeaderField: "Authorization") == "Bearer t", "\(step)")
            #expect(made.httpBodyStream == nil && made.value(forHTTPHeaderField: "Content-Length") == nil, "\(step)")
        }
        #expect(request(.detect).httpMethod == "OPTIONS" && request(.detect).url == url)
        let create = request(.create)
        #expect(create.httpMethod == "POST" && create.url == url && create.httpBody == Data())
        #expect(create.value(forHTTPHeaderField: "Upload-Complete") == "?0")
        #expect(create.value(forHTTPHeaderField: "Upload-Length") == "1000")
        #expect(create.value(forHTTPHeaderField: "Content-Type") == "multipart/form-data; boundary=b")
        #expect(request(.append(from: 10, upTo: 500)).value(forHTTPHeaderField: "Upload-Complete") == "?0")
        let append = request(.append(from: 10, upTo: 1_000))
        #expect(append.httpMethod == "PATCH" && append.url == location)
        #expect(append.value(forHTTPHeaderField: "Upload-Offset") == "10")
        #expect(append.value(forHTTPHeaderField: "Upload-Complete") == "?1")
        #expect(request(.askOffset).httpMethod == "HEAD" && request(.askOffset).url == location)
    }
}
