import Foundation

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
                bytesAcknowledged: record.acknowledged, interopVersion: record.interopVersion, created: record.created,
                saved: record.updated,
                expires: record.expires ?? record.updated.addingTimeInterval(SavedUploadDirectory.defaultLifetime),
                stateFile: states.file(for: key))
        }
    }
}
