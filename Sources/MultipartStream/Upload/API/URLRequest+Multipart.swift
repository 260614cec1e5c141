import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLRequest {
    /// A request (POST by default) whose body streams `multipartFormData`.
    ///
    /// Sets `httpBodyStream` to a new ``MultipartBodyStream``, `Content-Type` and the exact `Content-Length`; see
    /// ``setMultipartFormData(_:)``. Send it with `uploadTask(withStreamedRequest:)` on a session whose delegate
    /// answers `needNewBodyStream` (``MultipartStreamedUploadDelegate``, or your own delegate calling
    /// ``MultipartBodyStream/bodyStream(for:)``), or with `dataTask(with:)` or `data(for:)`, which read the
    /// request's own stream.
    ///
    /// - Parameters:
    ///   - url: Where the form goes.
    ///   - method: The HTTP method; not GET or HEAD, whose bodies URLSession does not send.
    ///   - multipartFormData: The form to stream.
    public init(url: URL, method: String = "POST", multipartFormData: MultipartFormData) {
        self.init(url: url)
        httpMethod = method
        setMultipartFormData(multipartFormData)
    }

    /// Makes the form this request's body: a new ``MultipartBodyStream``, `Content-Type`, and the exact
    /// `Content-Length`, which URLSession sends with the stream on every platform. A form holding a stream of unknown
    /// length has none: URLSession sends it with chunked framing, which some servers (Django, PHP-FPM, S3) do not read;
    /// `URLSession.upload(_:with:strategy:headers:credentialsToOtherOrigins:acceptableStatusCodes:responseBody:progress:)`
    /// sends it with a
    /// length.
    ///
    /// On Linux this also sets `Transfer-Encoding` and `Expect` to a single space, which libcurl takes as "no
    /// chunked framing, no `100-continue`" and leaves out of the request: the body goes out raw with its length, as
    /// servers that ignore or refuse chunked bodies (Django, PHP-FPM, S3) need. A 301, 302 or 303 answer turns the
    /// request into a GET, and Linux URLSession keeps the `Content-Length` on it: give the session a delegate that
    /// removes it in `willPerformHTTPRedirection`, or upload with
    /// `URLSession.upload(_:with:strategy:headers:credentialsToOtherOrigins:acceptableStatusCodes:responseBody:progress:)`,
    /// which does.
    ///
    /// - Parameter form: The form to stream; a new body stream is made from it each time this is called.
    public mutating func setMultipartFormData(_ form: MultipartFormData) {
        httpBodyStream = form.makeBodyStream()
        setValue(form.contentType, forHTTPHeaderField: "Content-Type")
        guard let length = form.contentLength else {
            // A stream of unknown length: no length to give, so the platform frames the body (chunked).
            for name in ["Content-Length", "Transfer-Encoding"] { setValue(nil, forHTTPHeaderField: name) }
            return
        }
        setBodyLength(length)
    }
}
