import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLRequest {
    /// A request (POST by default) whose body streams `multipartFormData`.
    ///
    /// Sets `httpBodyStream` to a new ``MultipartBodyStream`` and `Content-Type`; see
    /// ``setMultipartFormData(_:)`` for `Content-Length`.
    public init(url: URL, method: String = "POST", multipartFormData: MultipartFormData) {
        self.init(url: url)
        httpMethod = method
        setMultipartFormData(multipartFormData)
    }

    /// Makes the form this request's body: a new ``MultipartBodyStream``, `Content-Type`, and `Content-Length`
    /// where URLSession honours it with a stream.
    ///
    /// Apple's URLSession sends the exact `Content-Length` with a body stream. Linux URLSession always sends a
    /// stream chunked and would add a `Content-Length` beside `Transfer-Encoding: chunked`, which strict servers
    /// (Node, SwiftNIO) reject (swift-corelibs-foundation #4818), so on Linux any `Content-Length` is removed.
    public mutating func setMultipartFormData(_ form: MultipartFormData) {
        httpBodyStream = form.makeBodyStream()
        setValue(form.contentType, forHTTPHeaderField: "Content-Type")
        #if canImport(Darwin)
            setValue(String(form.contentLength), forHTTPHeaderField: "Content-Length")
        #else
            setValue(nil, forHTTPHeaderField: "Content-Length")
        #endif
    }
}
