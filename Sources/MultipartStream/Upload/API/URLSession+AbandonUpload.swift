import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSession {
    /// Gives up the saved upload of `form` to `request` on purpose: deletes its upload resource on the server (within
    /// a few seconds, whatever the answer) and its state in `resumption`'s ``MultipartResumption/stateDirectory``.
    ///
    /// The upload is found as a resumed one would be (the same method, URL, part names, file names and paths),
    /// even when a file changed since. `resumption`'s credential rule applies to the `DELETE`, and `headers` (asked
    /// just before it, as an upload asks) gives it fresh headers.
    ///
    /// - Returns: Whether there was a saved upload to abandon.
    /// - Throws: ``MultipartError/Reason/uploadInProgress(_:)`` when another process is sending it, or
    ///   ``MultipartError/Reason/stateUnwritable(_:errno:)``.
    @discardableResult
    public func abandonUpload(
        _ form: MultipartFormData, with request: URLRequest, resumption: MultipartResumption,
        headers: MultipartHeaders? = nil
    ) async throws -> Bool {
        guard let directory = resumption.stateDirectory,
            let state = try SavedState(
                form: form, request: request, directory: directory,
                interopVersions: ResumableUpload.InteropVersion.spoken, notices: { resumption.events?($0.event) })
        else { return false }
        defer { state.lock.release() }
        guard let record = state.record else { return false }
        let upload = ResumableUpload(
            form: form, request: request, session: self, policy: resumption, pacer: nil,
            requests: RequestMaker(
                hook: headers, origin: request.url, trustsOtherOrigins: resumption.credentialsToOtherOrigins),
            progress: nil)
        await upload.delete(
            URL(string: record.uploadURL), version: ResumableUpload.InteropVersion(rawValue: record.interopVersion))
        state.remove()
        return true
    }
}
