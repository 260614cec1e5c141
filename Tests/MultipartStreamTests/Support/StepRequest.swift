import Foundation

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension ResumableUpload.Step {
    /// The step's request from `request`, as ``RequestMaker`` makes it where there is no hook and the URL stays on
    /// the caller's origin: aimed, then framed with the draft's fields.
    func request(
        from request: URLRequest, version: ResumableUpload.InteropVersion, location: URL?, contentLength: UInt64?,
        contentType: String
    ) -> URLRequest {
        var made = target(of: request, location: location)
        frame(&made, version: version, contentLength: contentLength, contentType: contentType)
        return made
    }
}
