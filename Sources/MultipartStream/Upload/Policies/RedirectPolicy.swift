import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What an upload does with a redirect, decided without I/O: which of the caller's headers the new request keeps,
/// and whether URLSession may follow it, the upload must send the form again itself, or it must stop.
package enum RedirectPolicy {
    /// The headers that carry the caller's credentials. They never follow a redirect to another origin unless the
    /// caller's delegate puts them back, as curl (since 7.58, `--location-trusted` to opt in) and browsers do.
    package static let credentialHeaders = ["Authorization", "Cookie", "Proxy-Authorization"]

    /// The most times one upload sends its form again itself, as URLSession bounds its own redirects.
    static let maximumResends = 10

    /// The request URLSession proposes, as the caller's delegate is shown it: without the credential headers when
    /// it leaves `origin`, the origin of the upload's first request.
    static func proposal(_ proposed: URLRequest, leaving origin: Origin?) -> URLRequest {
        if let origin, Origin(proposed.url) == origin { return proposed }
        var request = proposed
        for name in credentialHeaders { request.setValue(nil, forHTTPHeaderField: name) }
        return request
    }

    /// What to do once the caller's delegate has answered.
    enum Decision {
        /// Hand this request to URLSession, which sends it (with the body, where it resends bodies itself).
        case follow(URLRequest)
        /// Stop URLSession's resend, and send the form with this request on a new task once the current one ends.
        case resend(URLRequest)
        /// Stop URLSession's resend and fail the upload: the form cannot be sent again here.
        case fail(MultipartError)
        /// The delegate kept the 3xx as the answer.
        case keepResponse
    }

    /// The decision for `answer`, the caller delegate's request (or `nil`), after a `statusCode` answer to `sent`.
    ///
    /// - Parameters:
    ///   - canResend: Whether the upload may replace its task (it owns the exchange) and has resends left.
    static func decide(
        statusCode: Int,
        answer: URLRequest?,
        sent: URLRequest?,
        canResend: Bool
    ) -> Decision {
        guard let answer else { return .keepResponse }
        #if canImport(Darwin)
            // Apple's URLSession resends the body itself: it asks for a new stream, or reads the file again.
            return .follow(answer)
        #else
            // swift-corelibs-foundation resends a request that keeps its body (307, 308, or a method the delegate
            // kept) with an empty one and reports success. A GET or HEAD has no body, but it keeps the headers that
            // described one: a Content-Length left on it would make the server wait for bytes that never come.
            if answer.httpMethod == "GET" || answer.httpMethod == "HEAD" {
                var request = answer
                request.removeBodyHeaders()
                return .follow(request)
            }
            guard canResend else {
                return .fail(MultipartError(.redirectNotFollowed(statusCode: statusCode, location: answer.url)))
            }
            // The request the delegate returned (its URL, headers and timeout), with the form's method.
            var resend = answer
            resend.httpMethod = sent?.httpMethod ?? answer.httpMethod
            return .resend(resend)
        #endif
    }
}
