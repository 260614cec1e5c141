import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How `URLSession.upload(_:with:strategy:progress:)` sends a form. Both send the exact `Content-Length`.
public enum MultipartUploadStrategy: Sendable, Equatable {
    /// ``stream``.
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
}

/// How far an upload has come, from the bytes the body stream has handed to URLSession (on Linux URLSession's own
/// counts are 0 for streams).
public struct MultipartUploadProgress: Sendable, Equatable {
    /// Body bytes sent so far.
    public var bytesSent: UInt64
    /// The exact length of the body.
    public var totalBytes: UInt64

    /// `bytesSent / totalBytes`, from 0 to 1.
    public var fractionCompleted: Double {
        totalBytes == 0 ? 1 : Double(bytesSent) / Double(totalBytes)
    }

    /// Creates a progress value.
    public init(bytesSent: UInt64, totalBytes: UInt64) {
        self.bytesSent = bytesSent
        self.totalBytes = totalBytes
    }
}
