import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Headers an upload asks for just before each request it sends (the form's own, a resend after a redirect, a retry
/// after a 401, each request of a resumable upload), as Alamofire's `RequestAdapter` and OkHttp's `Authenticator`
/// are, told why it is asked: a token that expires is refreshed without starting over.
///
/// ```swift
/// try await URLSession.shared.upload(
///     form, with: request,
///     headers: .fresh { _, reason in
///         if case .unauthorized = reason { try await tokens.refresh() }
///         return ["Authorization": "Bearer \(try await tokens.current())"]
///     })
/// ```
///
/// What it gives is judged exactly as the same headers set on the request: `Authorization`, `Cookie` and
/// `Proxy-Authorization` reach another origin than the first request's only where the caller trusts other origins
/// (``MultipartResumption/credentialsToOtherOrigins``), and the form's own fields (`Content-Type`,
/// `Content-Length`, the resumable-upload draft's) are set after it, so it cannot change them.
public struct MultipartHeaders: Sendable {
    let make: @Sendable (URLRequest, Reason) async throws -> [String: String]

    /// Why a request is about to go out: what the hook is told with it.
    public enum Reason: Sendable {
        /// The form's own request, the first one sent (also when a resumable upload sends the form whole to a server
        /// that does not speak the draft).
        case initial
        /// The request that follows this redirect: the form again after a `307` or `308`, or the `GET` a `301` to
        /// `303` turns it into.
        case redirect(HTTPURLResponse)
        /// A retry after this `401`: the form goes once more if the headers given now differ from the ones the
        /// `401` answered. Refresh the token here.
        case unauthorized(HTTPURLResponse)
        /// A request of a resumable upload.
        case resumable(ResumableStep)
    }

    /// The request of a resumable upload the hook is asked for.
    public enum ResumableStep: Sendable, Equatable {
        /// `OPTIONS`: does the server speak the resumable-upload draft?
        case discovery
        /// The request that creates the upload, carrying none of the form.
        case creation
        /// `PATCH`: the form's bytes from `offset` on.
        case append(offset: UInt64)
        /// `HEAD`: how much of the form the server has.
        case offset
        /// `DELETE`: the upload is given up (it failed, changed, or is abandoned).
        case cleanUp
    }

    /// Headers made by `make` from the request about to go out (its method, URL and headers as they will be sent)
    /// and the ``Reason`` it goes out for. An error it throws fails the upload with that error (a saved resumable
    /// upload is kept for the next run); a name that is not an HTTP token fails it with
    /// ``MultipartError/Reason/invalidHeaderName(_:)``, and a value with a control character with
    /// ``MultipartError/Reason/invalidHeaderValue(name:value:)``.
    public static func fresh(
        _ make: @escaping @Sendable (URLRequest, Reason) async throws -> [String: String]
    ) -> MultipartHeaders {
        MultipartHeaders(make: make)
    }

    /// Headers made by `make` from the request about to go out, whatever it goes out for:
    /// `.fresh { _ in ["Authorization": "Bearer \(try await tokens.current())"] }`.
    public static func fresh(_ make: @escaping @Sendable (URLRequest) async throws -> [String: String])
        -> MultipartHeaders
    {
        MultipartHeaders { request, _ in try await make(request) }
    }

    /// The header fields the hook gives for `request` and `reason`, each checked; ``RequestMaker`` sets them.
    func fields(for request: URLRequest, _ reason: Reason) async throws -> [(name: String, value: String)] {
        try await make(request, reason).map { name, value in
            guard !name.isEmpty, name.utf8.allSatisfy(Boundary.isTokenCharacter) else {
                throw MultipartError(.invalidHeaderName(name))
            }
            guard PartHeaders.isValidValue(value) else {
                throw MultipartError(.invalidHeaderValue(name: name, value: value))
            }
            return (name, value)
        }
    }
}
