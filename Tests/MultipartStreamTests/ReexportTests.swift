import Foundation
import MultipartStream
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `import MultipartStream` alone keeps every program written before the form became a module of its own compiling:
/// the form's types by their plain names and by `MultipartStream.`'s (as the README writes them beside Alamofire),
/// and `MultipartError.response` with them.
@Suite struct ReexportTests {
    @Test func theFormIsReachedThroughTheUmbrellaModule() throws {
        var form = MultipartStream.MultipartFormData()
        form.append("v", name: "f")
        let stream: MultipartStream.MultipartBodyStream = form.makeBodyStream()
        #expect(stream.contentLength == form.contentLength)
        let pacing = MultipartStream.MultipartPacing(packetSize: 1_000, delay: 0.1)
        #expect(pacing.packetSize == 1_000)
        var error = MultipartStream.MultipartError(.unacceptableStatus(statusCode: 500, body: Data()))
        #expect(error.response == nil && error.category == .status)
        error.response = HTTPURLResponse(
            url: URL(string: "http://127.0.0.1/")!, statusCode: 500, httpVersion: nil, headerFields: nil)
        #expect(error.response?.statusCode == 500, "the response is kept with the error")
    }
}
