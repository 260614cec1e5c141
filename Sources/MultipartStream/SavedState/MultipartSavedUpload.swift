import Foundation

/// A resumable upload whose state is saved, as ``MultipartResumption/savedUploads(in:events:)`` lists it: what the same
/// form sent again to the same URL would resume. No header, credential or field value is kept, so none is here.
public struct MultipartSavedUpload: Sendable, Equatable {
    /// The request's method.
    public var method: String
    /// The request's URL, without user and password.
    public var url: String
    /// The form's length.
    public var contentLength: UInt64
    /// The last offset the server acknowledged (in an answer to an append or a `HEAD`) when the state was last saved.
    /// A run killed during an append had sent more, which the server may hold: the next run asks it.
    public var bytesAcknowledged: UInt64
    /// The draft's interop version the upload was made in, which the next run speaks to it.
    public var interopVersion: Int
    /// When the upload was created.
    public var created: Date
    /// When its state was last saved.
    public var saved: Date
    /// When it is removed: the server's `max-age`, else 7 days after it was last saved.
    public var expires: Date
    /// Its state file.
    public var stateFile: URL
}
