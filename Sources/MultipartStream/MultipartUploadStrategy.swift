import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How `URLSession.upload(_:with:strategy:progress:)` sends a form.
public enum MultipartUploadStrategy: Sendable, Equatable {
    /// ``stream`` unless the request needs an exact `Content-Length` that the platform cannot send with a stream:
    /// on Linux, where URLSession sends every stream chunked, a request that carries a `Content-Length` header
    /// goes as ``file``. On Apple platforms a stream is sent with its exact `Content-Length`, so it is always
    /// ``stream``.
    case automatic
    /// Streams the form lazily with ``MultipartBodyStream`` from `uploadTask(withStreamedRequest:)`: no copy of
    /// the body anywhere. A retry (authentication, redirect) gets a fresh stream of the same bytes.
    case stream
    /// Writes the body to a temporary file first, then `uploadTask(with:fromFile:)`: an exact `Content-Length`
    /// on every platform, for servers and proxies that refuse chunked bodies (S3 POST policies, some proxies).
    /// The file is removed when the task ends, whatever the outcome.
    case file

    /// `.stream` or `.file`: what `.automatic` means for `request`.
    func resolved(for request: URLRequest) -> MultipartUploadStrategy {
        guard self == .automatic else { return self }
        #if canImport(Darwin)
            return .stream
        #else
            return request.value(forHTTPHeaderField: "Content-Length") == nil ? .stream : .file
        #endif
    }
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
