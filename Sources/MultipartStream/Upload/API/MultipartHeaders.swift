import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Headers an upload asks for just before each request it sends (the form's own, a resend after a redirect or a
/// 401, each request of a resumable upload), as Alamofire's `RequestAdapter` and tus-js-client's `onBeforeRequest`
/// are: a token that expires is refreshed without starting over.
///
/// ```swift
/// try await URLSession.shared.upload(
///     form, with: request, headers: .fresh { _ in ["Authorization": "Bearer \(try await tokens.current())"] })
/// ```
public struct MultipartHeaders: Sendable {
    let make: @Sendable (URLRequest) async throws -> [String: String]

    /// Headers made by `make` from the request about to go out (its method, URL and headers as they will be sent).
    /// An error it throws fails the upload with that error; a name that is not an HTTP token, or a value with a
    /// control character, fails it with ``MultipartError/Reason/invalidHeaderValue(name:value:)``.
    public static func fresh(_ make: @escaping @Sendable (URLRequest) async throws -> [String: String])
        -> MultipartHeaders
    {
        MultipartHeaders(make: make)
    }

    /// `request` with the fresh headers set.
    func apply(to request: URLRequest) async throws -> URLRequest {
        var request = request
        for (name, value) in try await make(request) {
            guard !name.isEmpty, name.utf8.allSatisfy(Boundary.isTokenCharacter), PartHeaders.isValidValue(value)
            else { throw MultipartError(.invalidHeaderValue(name: name, value: value)) }
            request.setValue(value, forHTTPHeaderField: name)
        }
        return request
    }
}

extension Optional where Wrapped == MultipartHeaders {
    /// `request` with the fresh headers, where there is a hook.
    func apply(to request: URLRequest) async throws -> URLRequest {
        guard let self else { return request }
        return try await self.apply(to: request)
    }

    /// `request` as the whole form goes out in one request: with the form's method (POST for `URLRequest(url:)`'s
    /// GET), which the hook is shown, and the fresh headers.
    func applyToWholeForm(_ request: URLRequest) async throws -> URLRequest {
        var sent = request
        sent.httpMethod = request.formMethod
        return try await apply(to: sent)
    }
}
