import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How
/// `URLSession.upload(_:with:strategy:headers:credentialsToOtherOrigins:acceptableStatusCodes:responseBody:progress:)`
/// sends a form, with
/// what applies to that way only: pacing where the body can be paced, a ``MultipartResumption`` policy where the upload
/// can resume. Every strategy sends the exact `Content-Length`.
///
/// ```swift
/// try await URLSession.shared.upload(form, with: request)                                  // .automatic
/// try await URLSession.shared.upload(form, with: request, strategy: .stream(pacing: .init(bytesPerSecond: 1 << 20)))
/// try await URLSession.shared.upload(
///     form, with: request, strategy: .resumable(MultipartResumption(maximumAttempts: 8)))
/// ```
public struct MultipartUploadStrategy: Sendable {
    /// The way of sending, with what it carries.
    enum Kind: Sendable {
        case automatic
        case stream(MultipartPacing?)
        case file
        case resumable(MultipartResumption, MultipartPacing?)
    }

    let kind: Kind

    /// ``stream``, except that a form held wholly in memory (no file or stream part) and no larger than 64 KiB goes
    /// as the request's own bytes: one copy of at most 64 KiB, no body stream, and about a tenth less time per upload
    /// on Linux. The default.
    public static let automatic = MultipartUploadStrategy(kind: .automatic)

    /// Streams the form lazily with a ``MultipartBodyStream``, with its exact `Content-Length` and no chunked framing
    /// on every platform: no copy of the body anywhere. A retry (authentication, redirect) gets a fresh stream of the
    /// same bytes.
    public static let stream = MultipartUploadStrategy(kind: .stream(nil))

    /// ``stream``, paced: at most `pacing.packetSize` bytes per read, reads `pacing.delay` apart, as AFNetworking's
    /// throttling (for slow links).
    public static func stream(pacing: MultipartPacing) -> MultipartUploadStrategy {
        MultipartUploadStrategy(kind: .stream(pacing))
    }

    /// Writes the body to a temporary file first, then sends that file: for whoever wants the body fixed before the
    /// first byte goes out. `uploadTask(with:fromFile:)` on Apple platforms; on Linux the file is streamed with its
    /// exact length, since Linux URLSession's from-file path can crash the process when a task is cancelled. The file
    /// is removed when the upload ends, whatever the outcome. Never paced. Background sessions upload only from
    /// files: write the body with ``MultipartFormData/writeEncodedData(to:)`` for them.
    public static let file = MultipartUploadStrategy(kind: .file)

    /// ``resumable(_:pacing:)`` with the default policy: 5 retries, no saved state.
    public static let resumable = MultipartUploadStrategy.resumable(MultipartResumption())

    /// Streams as ``stream`` does, and survives a dropped connection: against a server that speaks
    /// draft-ietf-httpbis-resumable-upload (interop versions 6 to 10: SwiftNIO's `NIOResumableUpload`, Apple's
    /// URLSession), a connection failure, reset or timeout makes the upload ask the server how much of the form it
    /// has and send the rest from there, within `policy`'s retries; with ``MultipartResumption/stateDirectory`` it
    /// also survives the process. A form of at most ``MultipartResumption/singleRequestLimit`` bytes goes in one
    /// request, its creation carrying it whole, and again whole after a drop before the answer. For a larger form
    /// support is detected before any part of it is sent (an `OPTIONS` in each version, newest first, then a
    /// creation request with no body); any other server gets the whole form in one request, exactly as with
    /// ``stream``. See <doc:ResumableUploads>.
    ///
    /// - Parameters:
    ///   - policy: How the upload retries, notices stalls and keeps its state.
    ///   - pacing: How fast the upload goes out: one rate for all its requests, across appends, resends and
    ///     retries, so that the whole upload takes at least its length over the rate; `nil` for as fast as
    ///     URLSession reads it.
    public static func resumable(_ policy: MultipartResumption, pacing: MultipartPacing? = nil)
        -> MultipartUploadStrategy
    {
        MultipartUploadStrategy(kind: .resumable(policy, pacing))
    }

    /// The pacing the strategy carries.
    var pacing: MultipartPacing? {
        switch kind {
        case .stream(let pacing), .resumable(_, let pacing): pacing
        case .automatic, .file: nil
        }
    }

    /// The policy, for ``resumable(_:pacing:)``.
    var resumption: MultipartResumption? {
        if case .resumable(let policy, _) = kind { return policy }
        return nil
    }
}

/// How `URLSession.multipartUploadTask(with:form:strategy:credentialsToOtherOrigins:progress:completionHandler:)` sends
/// a form: a task is made
/// before its first byte and cannot be replaced, so it streams or sends a file, and cannot resume.
public struct MultipartTaskStrategy: Sendable {
    let pacing: MultipartPacing?
    let writesFile: Bool

    /// Streams the form with `uploadTask(withStreamedRequest:)`, with its exact `Content-Length`. The default.
    public static let stream = MultipartTaskStrategy(pacing: nil, writesFile: false)

    /// ``stream``, paced: at most `pacing.packetSize` bytes per read, reads `pacing.delay` apart.
    public static func stream(pacing: MultipartPacing) -> MultipartTaskStrategy {
        MultipartTaskStrategy(pacing: pacing, writesFile: false)
    }

    /// Writes the body to a temporary file when the task starts (a task never resumed leaves none), sends it, and
    /// removes it when the task ends. Never paced.
    public static let file = MultipartTaskStrategy(pacing: nil, writesFile: true)
}
