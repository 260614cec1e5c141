/// How far an upload has come, from the bytes the body stream has handed to URLSession (on Linux URLSession's own
/// counts are 0 for streams).
public struct MultipartUploadProgress: Sendable, Equatable {
    /// Body bytes sent so far.
    public var bytesSent: UInt64
    /// The exact length of the body; `nil` while a stream's length is unknown (it is sent as it is read).
    public var totalBytes: UInt64?

    /// `bytesSent / totalBytes`, from 0 to 1; `nil` while the length is unknown.
    public var fractionCompleted: Double? {
        totalBytes.map { $0 == 0 ? 1 : Double(bytesSent) / Double($0) }
    }

    /// Creates a progress value.
    public init(bytesSent: UInt64, totalBytes: UInt64?) {
        self.bytesSent = bytesSent
        self.totalBytes = totalBytes
    }
}
