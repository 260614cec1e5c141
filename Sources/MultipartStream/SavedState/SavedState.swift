import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A resumable upload's saved state while it runs: its place in the state directory, held locked, and what an
/// earlier run left there.
struct SavedState {
    let directory: SavedUploadDirectory
    let key: String
    /// ``MultipartFormData/savedUploadShape`` of the form, digested once.
    let shape: String
    /// The form's length, which a form that can be saved always has.
    let contentLength: UInt64
    let method: String
    let requestURL: String
    let lock: SavedUploadLock
    /// What an earlier run saved, when it can be trusted.
    let record: SavedUpload?

    /// What opening the state tells: the form cannot be saved, another state's lifetime was over and it was
    /// removed, a state file was ignored.
    enum Notice {
        case notSaved
        case removedExpired(URL)
        case ignored(URL, reason: String)

        /// The notice as the upload's events say it.
        var event: MultipartResumption.Event {
            switch self {
            case .notSaved: .notSaved
            case .removedExpired(let file): .removedExpired(file)
            case .ignored(let file, let reason): .stateIgnored(file, reason: reason)
            }
        }
    }

    /// The state of `form` sent with `request`, locked, with what an earlier run saved (in one of
    /// `interopVersions`); `nil` for a form that cannot be sent again by another process (a stream part).
    /// - Throws: ``MultipartError/Reason/uploadInProgress(_:)`` or ``MultipartError/Reason/stateUnwritable(_:errno:)``.
    init?(
        form: MultipartFormData, request: URLRequest, directory url: URL, interopVersions: Set<Int>,
        notices: (Notice) -> Void
    ) throws(MultipartError) {
        guard let key = form.savedUploadKey(for: request), let shape = form.savedUploadShape,
            let contentLength = form.contentLength
        else {
            notices(.notSaved)
            return nil
        }
        directory = SavedUploadDirectory(url, interopVersions: interopVersions)
        try directory.prepare()
        for file in directory.prune(except: key) { notices(.removedExpired(file)) }
        lock = try directory.lock(key)
        self.key = key
        self.shape = shape
        self.contentLength = contentLength
        method = request.formMethod
        requestURL = request.url?.withoutUserInfo ?? ""
        record = directory.load(key) { notices(.ignored($0, reason: $1)) }
    }

    /// `form` as the saved upload's bytes went out (its boundary), or `nil` when it is another form: other parts,
    /// other file contents, another request, or a boundary or length that is not the one the form was saved with.
    func rebuilt(_ form: MultipartFormData, from record: SavedUpload) -> MultipartFormData? {
        guard record.method == method, record.requestURL == requestURL,
            let rebuilt = form.replacingBoundary(with: record.boundary),
            rebuilt.contentLength == record.contentLength, fingerprint(of: rebuilt) == record.fingerprint
        else { return nil }
        return rebuilt
    }

    /// The fingerprint of `form`, which has the shape this state was made for (the caller's form, or it with the
    /// saved boundary).
    private func fingerprint(of form: MultipartFormData) -> String {
        MultipartFormData.savedUploadFingerprint(
            shape: shape, boundary: form.boundary, contentLength: contentLength)
    }

    /// The record of `form`'s upload at `location`, made in `interopVersion`, `acknowledged` bytes in, its resource
    /// living `lifetime` seconds more where the server said.
    func record(
        of form: MultipartFormData, at location: URL, interopVersion: Int, acknowledged: UInt64, lifetime: Double?
    ) -> SavedUpload {
        let now = Date()
        return SavedUpload(
            method: method, requestURL: requestURL, uploadURL: location.absoluteString,
            uploadOnOtherOrigin: Origin(location) != Origin(URL(string: requestURL)), interopVersion: interopVersion,
            boundary: form.boundary, contentLength: contentLength, fingerprint: fingerprint(of: form),
            acknowledged: acknowledged, created: now, updated: now, expires: lifetime.map { now.addingTimeInterval($0) }
        )
    }

    func save(_ record: SavedUpload) throws(MultipartError) {
        try directory.save(record, as: key)
    }

    func remove() {
        directory.remove(key)
    }
}
