import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How `URLSession.upload(_:with:strategy:resumption:pacing:progress:)` sends a form. Every strategy sends the exact
/// `Content-Length`.
public enum MultipartUploadStrategy: Sendable, Equatable {
    /// ``stream``, except that the async `upload` sends a form held wholly in memory (no file or stream part) and no
    /// larger than 64 KiB, unpaced, as the request's own bytes: one copy of at most 64 KiB, no body stream, and about
    /// a tenth less time per upload on Linux.
    case automatic
    /// Streams the form lazily with a ``MultipartBodyStream`` (the body stream of a data task for the async
    /// `upload`, `uploadTask(withStreamedRequest:)` for `multipartUploadTask`), with its exact `Content-Length` and
    /// no chunked framing on every platform: no copy of the body anywhere. A retry (authentication, redirect) gets a
    /// fresh stream of the same bytes.
    case stream
    /// Writes the body to a temporary file first, then sends that file: for whoever wants the body fixed before the
    /// first byte goes out. `uploadTask(with:fromFile:)` on Apple platforms; on Linux the file is streamed with its
    /// exact length, since Linux URLSession's from-file path can crash the process when a task is cancelled. The
    /// file is removed when the task ends, whatever the outcome. Background sessions upload only from files: write
    /// the body with `writeEncodedData(to:)` for them.
    case file
    /// Streams as ``stream`` does, and survives a dropped connection: against a server that speaks
    /// draft-ietf-httpbis-resumable-upload (interop versions 6 to 9: SwiftNIO's `NIOResumableUpload`, Apple's
    /// URLSession), a connection failure, reset or timeout makes the upload ask the server how much of the form it
    /// has and send the rest from there (``MultipartFormData/makeBodyStream(startingAt:)``), within
    /// ``MultipartResumption``'s retries. Support is detected before any part of the form is sent (an `OPTIONS` in
    /// each version, newest first, answered with `Upload-Limit` or `Accept-Patch`, then a creation request with no
    /// body answered with `Location`); any other
    /// server gets the whole form in one request, exactly as with ``stream``. For the async `upload` only: a task
    /// from `multipartUploadTask` streams as ``stream`` does.
    case resumable
}
