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
    /// The bytes the server had said it has when the state was last saved.
    public var bytesAcknowledged: UInt64
    /// When the upload was created.
    public var created: Date
    /// When its state was last saved.
    public var saved: Date
    /// When it is removed: the server's `max-age`, else 7 days after it was last saved.
    public var expires: Date
    /// Its state file.
    public var stateFile: URL
}

extension MultipartResumption {
    /// The saved uploads in `directory` (a ``stateDirectory``), oldest first, once those whose lifetime is over (the
    /// server's `max-age`, else 7 days since last saved) are removed, as every resumable upload with that directory
    /// removes them. A state file that cannot be trusted is left alone and not listed; `events` hears of it
    /// (``Event/stateIgnored(_:reason:)``) and of each removed (``Event/removedExpired(_:)``).
    public static func savedUploads(
        in directory: URL, events: (@Sendable (Event) -> Void)? = nil
    ) -> [MultipartSavedUpload] {
        let states = SavedUploadDirectory(directory, interopVersions: ResumableUpload.InteropVersion.spoken)
        for file in states.prune() { events?(.removedExpired(file)) }
        return states.records { events?(.stateIgnored($0, reason: $1)) }.map { key, record in
            MultipartSavedUpload(
                method: record.method, url: record.requestURL, contentLength: record.contentLength,
                bytesAcknowledged: record.acknowledged, created: record.created, saved: record.updated,
                expires: record.expires ?? record.updated.addingTimeInterval(SavedUploadDirectory.defaultLifetime),
                stateFile: states.file(for: key))
        }
    }
}
