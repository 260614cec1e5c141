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

    /// The origin rule: `proposed` as it may go out, where it leaves the origin of `first` (the upload's first
    /// request's URL): without the credential headers, and without a user and password in its URL, which libcurl
    /// would send as `Authorization: Basic`; unless `trusted`, when they go wherever the upload goes. A user and
    /// password written in `first` are the origin's, as those headers are: a request to the same origin (or, trusted,
    /// to any) whose URL names none carries them again.
    static func proposal(_ proposed: URLRequest, leaving first: URL?, trusted: Bool = false) -> URLRequest {
        // The first URL itself (every upload's first request): nothing to judge, and no origin to parse twice, which
        // every small upload would pay for.
        if proposed.url == first { return proposed }
        var request = proposed
        if !trusted, Origin(first).map({ Origin(proposed.url) != $0 }) ?? true {
            for name in credentialHeaders { request.setValue(nil, forHTTPHeaderField: name) }
            request.url = proposed.url?.removingUserInfo
            return request
        }
        if let first, first.user != nil, let url = proposed.url, url.user == nil {
            request.url = url.withUserInfo(of: first)
        }
        return request
    }

    /// The request URLSession proposes for a redirect to `location` from `sent`, its URL resolved by RFC 3986.
    /// swift-corelibs-foundation resolves a network-path reference (`//host:port/path`) by changing only the host
    /// and port of `sent`, so that its user and password ride along to the other origin, and a relative path from
    /// the root whatever the base's path.
    static func resolving(_ proposed: URLRequest, to location: String?, from sent: URL?) -> URLRequest {
        var request = proposed
        if let location, let sent,
            let target = URL(string: location.trimmingCharacters(in: .whitespaces), relativeTo: sent)?.absoluteURL,
            target.scheme != nil, target.host != nil
        {
            request.url = target
        }
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
