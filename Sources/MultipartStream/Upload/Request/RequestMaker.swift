import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Makes every request an upload sends, in one order: the caller's request, then the headers hook's, then the origin
/// rule, then the form's framing. So a rule holds for every header whatever gave it: a credential the hook adds is
/// judged exactly as one set on the request, and the hook cannot change the form's fields.
///
/// The form's own request, a resend after a redirect, the retry after a 401, every request of a resumable upload
/// (discovery, creation, append, offset, the clean-up `DELETE`, `abandonUpload`'s) and its fallback are made here.
/// The body's own framing (`Content-Type`, `Content-Length`, the body) is the task's, set when the task is made
/// (``UploadRequest/StateMachine/plan(for:)``), after this.
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

    /// `request` as it goes out for `reason`: with the hook's headers, without the credentials another origin may
    /// not have, then framed by `framing`.
    ///
    /// - Throws: The hook's error, or ``MultipartError/Reason/invalidHeaderName(_:)`` and
    ///   ``MultipartError/Reason/invalidHeaderValue(name:value:)`` for what it gave.
    func make(
        _ request: URLRequest, for reason: MultipartHeaders.Reason, framing: (inout URLRequest) -> Void = { _ in }
    ) async throws -> URLRequest {
        var request = request
        if let hook { request = try await hook.apply(to: request, reason) }
        return judged(request, framing: framing)
    }

    /// What follows the hook in ``make(_:for:framing:)``: the origin rule, then the framing. Where there is no hook
    /// this is all of it, and needs no wait.
    func judged(_ request: URLRequest, framing: (inout URLRequest) -> Void = { _ in }) -> URLRequest {
        var request = RedirectPolicy.proposal(request, leaving: origin, trusted: trustsOtherOrigins)
        framing(&request)
        return request
    }

    /// Whether making a request may wait: only a hook does.
    var asksHook: Bool { hook != nil }
}
