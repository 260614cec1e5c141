import Foundation

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension ResumableUpload.Step {
    /// The step's request from `request`, as ``RequestMaker`` makes it where there is no hook and the URL stays on
    /// the caller's origin: aimed, then the origin rule and the draft's fields.
    func request(
        from request: URLRequest, version: ResumableUpload.InteropVersion, location: URL?, contentLength: UInt64?,
        contentType: String
    ) -> URLRequest {
        let aim = aim(location: location, version: version, contentLength: contentLength, contentType: contentType)
        return RequestMaker(hook: nil, origin: location ?? request.url).judged(RequestMaker.aimed(request, aim), aim)
    }
}
