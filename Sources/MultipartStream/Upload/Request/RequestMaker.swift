import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The one place that makes the requests an upload sends, in one order: the caller's request aimed where the driver
/// says (``Aim``: its URL, method, timeout, no body of the caller's), then the headers hook's fields, then the origin
/// rule, then the draft's fields; and, when its task is made, the form's framing (``framed(_:contentType:body:)``).
/// So a rule holds for every header whatever gave it: a credential the hook adds is judged exactly as one set on the
/// request, and the hook cannot change the draft's fields or the form's framing. The drivers (the whole form, the
/// resumable steps, a redirect) and the policies (``RedirectPolicy``) hand it values; nothing else in the library
/// changes a request, which `RequestMakingTests` checks over the sources.
///
/// The form's own request, a resend after a redirect, the retry after a 401, every request of a resumable upload
/// (discovery, creation, append, offset, the clean-up `DELETE`, `abandonUpload`'s) and its fallback are made here.
struct RequestMaker: Sendable {
    /// The caller's fresh headers, if any.
    let hook: MultipartHeaders?
    /// The first request's URL: the caller's credentials go to its origin, and to others only when trusted.
    let origin: URL?
    /// Whether credentials may go to another origin (`credentialsToOtherOrigins:` of an upload, a task or the streamed
    /// delegate, or ``MultipartResumption/credentialsToOtherOrigins``).
    let trustsOtherOrigins: Bool

    init(hook: MultipartHeaders?, origin: URL?, trustsOtherOrigins: Bool = false) {
        self.hook = hook
        self.origin = origin
        self.trustsOtherOrigins = trustsOtherOrigins
    }

    /// Where a request goes and what it carries besides the caller's headers, as the driver that sends it says.
    struct Aim: Sendable {
        /// Its URL; `nil` for the caller's.
        var url: URL?
        /// Its method.
        var method = Method.kept
        /// A bound on its timeout below the caller's.
        var timeout: TimeInterval?
        /// It carries no body of the caller's, nor the headers that described one.
        var withoutBody = false
        /// Header fields removed from the caller's (a key that only the request that creates an upload carries).
        var removing: [String] = []
        /// The draft's fields, set after the hook's and the origin rule, so that nothing changes them (`nil` removes
        /// one).
        var fields: [(name: String, value: String?)] = []
        /// An empty body of this type (the creation's, which announces the form and carries none of it).
        var emptyBody: String?

        /// The form's own request: the caller's, with the form's method.
        static let form = Aim(method: .form)
        /// A redirect's: URLSession's proposal, as it is.
        static let asProposed = Aim()

        enum Method: Sendable {
            /// The request's own.
            case kept
            /// The form's: the caller's, POST for a GET (``Foundation/URLRequest/formMethod``).
            case form
            case named(String)
        }
    }

    /// `request` as it goes out for `reason`, aimed by `aim`: with the hook's headers, without the credentials
    /// another origin may not have, then the draft's fields.
    ///
    /// - Throws: The hook's error, or ``MultipartError/Reason/invalidHeaderName(_:)`` and
    ///   ``MultipartError/Reason/invalidHeaderValue(name:value:)`` for what it gave.
    func make(_ request: URLRequest, _ aim: Aim, for reason: MultipartHeaders.Reason) async throws -> URLRequest {
        var request = Self.aimed(request, aim)
        if let hook {
            for (name, value) in try await hook.fields(for: request, reason) {
                request.setValue(value, forHTTPHeaderField: name)
            }
        }
        return judged(request, aim)
    }

    /// What follows the hook in ``make(_:_:for:)``: the origin rule, then the draft's fields. Where there is no hook
    /// this is all of it, and needs no wait: a redirect's request, or a task handed to the caller.
    func judged(_ request: URLRequest, _ aim: Aim? = nil) -> URLRequest {
        var request = request
        switch RedirectPolicy.credentials(of: request.url, leaving: origin, trusted: trustsOtherOrigins) {
        case .kept:
            break
        case .removed:
            for name in CredentialHeaders.names { request.setValue(nil, forHTTPHeaderField: name) }
            request.url = request.url?.removingUserInfo
        case .restored(let url):
            request.url = url
        }
        guard let aim else { return request }
        for (name, value) in aim.fields { request.setValue(value, forHTTPHeaderField: name) }
        if let type = aim.emptyBody {
            request.setValue(type, forHTTPHeaderField: "Content-Type")
            request.httpBody = Data()
        }
        return request
    }

    /// Whether making a request may wait: only a hook does.
    var asksHook: Bool { hook != nil }

    /// `request` aimed as `aim` says, before the hook sees it.
    static func aimed(_ request: URLRequest, _ aim: Aim) -> URLRequest {
        var request = request
        if aim.withoutBody {
            request.httpBody = nil
            request.httpBodyStream = nil
            request.removeBodyHeaders()
        }
        for name in aim.removing { request.setValue(nil, forHTTPHeaderField: name) }
        if let url = aim.url { request.url = url }
        let method: String? =
            switch aim.method {
            case .kept: nil
            case .form: request.formMethod
            case .named(let name): name
            }
        if let method, request.httpMethod != method { request.httpMethod = method }
        if let timeout = aim.timeout { request.timeoutInterval = min(request.timeoutInterval, timeout) }
        return request
    }

    // MARK: Redirects

    /// The request the caller's delegate answered a redirect with, as ``RedirectPolicy/decide(statusCode:answer:sent:canResend:)``
    /// says it goes: as it is, without the headers of a body it no longer has, or with the form's method to send the
    /// form again.
    static func following(_ answer: URLRequest, _ edit: RedirectPolicy.Edit) -> URLRequest {
        var request = answer
        switch edit {
        case .none: break
        case .withoutBodyHeaders: request.removeBodyHeaders()
        case .method(let method): if let method, request.httpMethod != method { request.httpMethod = method }
        }
        return request
    }

    // MARK: The task's framing

    /// How the form goes on a request: its type and body, as the task made for it carries them.
    enum Body {
        /// Bytes in memory, with their exact length.
        case bytes(Data)
        /// A stream or file URLSession reads, of this length (from the form's first byte to its last, or one
        /// append's).
        case length(UInt64)
    }

    /// `request` as the form's, when its task is made: POST unless it names another method, the body's headers,
    /// no body of its own but `body`'s bytes.
    static func framed(_ request: URLRequest, contentType: String, body: Body) -> URLRequest {
        var request = request
        // Each only when it changes something: on Linux every write copies the request.
        let method = request.formMethod
        if request.httpMethod != method { request.httpMethod = method }
        if request.httpBodyStream != nil { request.httpBodyStream = nil }
        request.updateValue(contentType, forHTTPHeaderField: "Content-Type")
        switch body {
        case .bytes(let bytes):
            request.setBody(bytes)
        case .length(let length):
            request.httpBody = nil
            request.setBodyLength(length)
        }
        return request
    }

    /// `request` reading its body from `stream`, for a data task whose body is the form's.
    static func streaming(_ request: URLRequest, from stream: InputStream) -> URLRequest {
        var request = request
        request.httpBodyStream = stream
        return request
    }
}
