import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What an upload does with a redirect, decided without I/O: which of the caller's headers the new request keeps,
/// and whether URLSession may follow it, the upload must send the form again itself, or it must stop.
package enum RedirectPolicy {
    /// The most times one upload sends its form again itself, as URLSession bounds its own redirects.
    static let maximumResends = 10

    /// What the origin rule does with the caller's credentials on a request to `url`.
    enum Credentials: Equatable {
        /// They go as they are.
        case kept
        /// The credential headers go, and the user and password in the URL, which libcurl would send as
        /// `Authorization: Basic`.
        case removed
        /// They go, and the URL (this one) names the first URL's user and password again.
        case restored(URL)
    }

    /// The origin rule, for a request to `url` where the upload's first request went to `first`: a request that
    /// leaves the first URL's origin carries none of its credentials unless `trusted`, when they go wherever the
    /// upload goes. A user and password written in `first` are the origin's, as those headers are: a request to the
    /// same origin (or, trusted, to any) whose URL names none carries them again.
    static func credentials(of url: URL?, leaving first: URL?, trusted: Bool = false) -> Credentials {
        // The first URL itself (every upload's first request): nothing to judge, and no origin to parse twice, which
        // every small upload would pay for.
        if url == first { return .kept }
        if !trusted, Origin(first).map({ Origin(url) != $0 }) ?? true { return .removed }
        if let first, first.user != nil, let url, url.user == nil { return .restored(url.withUserInfo(of: first)) }
        return .kept
    }

    /// Where a redirect to `location` from `sent` goes, resolved by RFC 3986; `nil` where it cannot be resolved
    /// (URLSession's proposal stands). swift-corelibs-foundation resolves a network-path reference
    /// (`//host:port/path`) by changing only the host and port of `sent`, so that its user and password ride along
    /// to the other origin, and a relative path from the root whatever the base's path.
    static func target(of location: String?, from sent: URL?) -> URL? {
        guard let location, let sent,
            let target = URL(string: location.trimmingCharacters(in: .whitespaces), relativeTo: sent)?.absoluteURL,
            target.scheme != nil, target.host != nil
        else { return nil }
        return target
    }

    /// What the request a redirect follows with needs, beside what the caller's delegate gave it.
    enum Edit: Equatable {
        case none
        /// A GET or HEAD without a body: the headers that described one go.
        case withoutBodyHeaders
        /// The form sent again: with this method (the one the form went with).
        case method(String?)
    }

    /// What to do once the caller's delegate has answered.
    enum Decision {
        /// Hand this request, edited so, to URLSession, which sends it (with the body, where it resends bodies
        /// itself).
        case follow(URLRequest, Edit)
        /// Stop URLSession's resend, and send the form with this request, edited so, on a new task once the current
        /// one ends.
        case resend(URLRequest, Edit)
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
            return .follow(answer, .none)
        #else
            // swift-corelibs-foundation resends a request that keeps its body (307, 308, or a method the delegate
            // kept) with an empty one and reports success. A GET or HEAD has no body, but it keeps the headers that
            // described one: a Content-Length left on it would make the server wait for bytes that never come.
            if answer.httpMethod == "GET" || answer.httpMethod == "HEAD" { return .follow(answer, .withoutBodyHeaders) }
            guard canResend else {
                return .fail(MultipartError(.redirectNotFollowed(statusCode: statusCode, location: answer.url)))
            }
            // The request the delegate returned (its URL, headers and timeout), with the form's method.
            return .resend(answer, .method(sent?.httpMethod))
        #endif
    }
}
