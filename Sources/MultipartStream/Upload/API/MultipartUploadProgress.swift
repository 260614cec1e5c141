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
