import Foundation
import MultipartStream
import MultipartStreamTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `URLRequest(url:method:multipartFormData:)` and `setMultipartFormData(_:)`.
@Suite struct URLRequestTests {
    let url = URL(string: "http://127.0.0.1:9/upload")!

    @Test func theInitializerMakesAStreamedPOST() throws {
        var form = MultipartFormData()
        form.append("v", name: "n")
        let request = URLRequest(url: url, multipartFormData: form)
        #expect(request.httpMethod == "POST")
        #expect(request.value(forHTTPHeaderField: "Content-Type") == form.contentType)
        let stream = try #require(request.httpBodyStream as? MultipartBodyStream)
        #expect(stream.streamStatus == .notOpen)
        #expect(stream.contentLength! == form.contentLength!)
        #expect(stream.drain().bytes == (try form.encode()))
        #expect(request.value(forHTTPHeaderField: "Content-Length") == String(form.contentLength!))
        #if !canImport(Darwin)
            // A blank Transfer-Encoding turns libcurl's chunked framing off and is itself left out.
            #expect(request.value(forHTTPHeaderField: "Transfer-Encoding") == " ")
        #endif
    }

    @Test func aMethodCanBeGiven() {
        #expect(URLRequest(url: url, method: "PUT", multipartFormData: MultipartFormData()).httpMethod == "PUT")
    }

    @Test func settingAFormReplacesBodyAndContentType() throws {
        var request = URLRequest(url: url)
        request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        request.setValue("12", forHTTPHeaderField: "Content-Length")
        request.setValue("kept", forHTTPHeaderField: "X-Other")
        let form = MultipartFormData()
        request.setMultipartFormData(form)
        #expect(request.value(forHTTPHeaderField: "Content-Type") == form.contentType)
        #expect(request.value(forHTTPHeaderField: "X-Other") == "kept")
        #expect(request.httpBodyStream is MultipartBodyStream)
        #expect(request.value(forHTTPHeaderField: "Content-Length") == String(form.contentLength!), "replaced")
    }
}
