import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The whole form in one request, the one driver of every upload that sends it so: the plain upload
/// (`.automatic`, `.stream`, `.file`) and a resumable upload's fallback to a server without the draft. It spools a
/// part of unknown length first (or refuses it, where the part says so), sends the form's own request, follows what
/// ``UploadRequest`` follows, and retries once after a 401 when the headers hook gives other headers for it.
struct WholeFormUpload {
    var form: MultipartFormData
    /// The caller's request.
    let request: URLRequest
    let session: URLSession
    /// How the body reaches URLSession, as the caller's strategy says: bytes in memory for a small form held in
    /// memory (``UploadBody/automatic(for:)``), a stream, or a temporary file written first; a resumable upload's
    /// fallback streams.
    let body: MultipartUploadStrategy.Kind
    /// The upload's pacing clock, shared by every request's body.
    let pacer: MultipartPacer?
    let requests: RequestMaker
    /// How the answer's body is kept.
    let reception: ResponseReception
    let progress: ProgressCoalescer?
    /// Told the spooled form's length, when a part of unknown length was spooled.
    var spooled: (@Sendable (UInt64) -> Void)? = nil
    /// Told how far into the form the last request's body reached.
    var bodySent: (@Sendable (UInt64) -> Void)? = nil
    /// Told of each request as it goes out, with the form's length, and of its answer (or the answer it failed on):
    /// a resumable upload's fallback tells its listener, as of the protocol's own requests.
    var requestSent: (@Sendable (URLRequest, UInt64?) -> Void)? = nil
    var answered: (@Sendable (HTTPURLResponse) -> Void)? = nil
    /// Whether each request goes once, on a connection of its own, never resent by URLSession itself: a resumable
    /// upload's fallback (see ``UploadRequest/Role/wholeForm(_:once:)``).
    var once = false

    /// Sends the form; its answer, whatever the status.
    ///
    /// - Throws: ``MultipartError``: ``MultipartError/Reason/lengthUnknown`` for a part that may not spool, a part's
    ///   failure, an early answer, a redirect not followed, and a retry after a 401 that a one-shot part keeps from
    ///   going out (``MultipartError/Reason/streamAlreadyConsumed``, naming it); the headers hook's error;
    ///   `CancellationError`; URLSession's error.
    func run() async throws -> (Data, URLResponse) {
        // No progress comes after the upload returns or throws; a retry after a 401 goes on with the same.
        defer { progress?.finish() }
        var upload = self
        var spools: [URL] = []
        defer { for file in spools { try? FileManager.default.removeItem(at: file) } }
        if form.contentLength == nil {
            // A plain request needs its exact length before the first byte.
            (upload.form, spools) = try await form.spooled()
            if let length = upload.form.contentLength {
                spooled?(length)
                progress?.lengthFound(length)
            }
        }
        let sent = try await requests.make(request, .form, for: .initial)
        let first: Result<(Data, URLResponse), any Error>
        do {
            first = .success(try await upload.send(sent))
        } catch {
            first = .failure(error)
        }
        guard requests.asksHook, let unauthorized = Self.unauthorized(first) else { return try first.get() }
        // Once more after a 401, where the hook gives other headers for it (a refreshed token).
        let again = try await requests.make(request, .form, for: .unauthorized(unauthorized))
        guard again.allHTTPHeaderFields != sent.allHTTPHeaderFields else { return try first.get() }
        if let oneShot = upload.form.resendFailure { throw oneShot }
        return try await upload.send(again)
    }

    /// The 401 a request ended with: its answer, or its failure where the caller refuses that status.
    private static func unauthorized(_ result: Result<(Data, URLResponse), any Error>) -> HTTPURLResponse? {
        let response: HTTPURLResponse? =
            switch result {
            case .success(let reply): reply.1 as? HTTPURLResponse
            case .failure(let error as MultipartError) where error.isRefusedAnswer: error.response
            case .failure: nil
            }
        return response?.statusCode == 401 ? response : nil
    }

    /// One request of the whole form, resends after redirects included.
    private func send(_ request: URLRequest) async throws -> (Data, URLResponse) {
        let uploadBody: UploadBody
        switch body {
        case .file: uploadBody = .file(try await TemporaryBody.write(form))
        case .automatic: uploadBody = .automatic(for: form)
        case .stream, .resumable: uploadBody = .stream
        }
        if Task.isCancelled {
            if let file = uploadBody.temporaryFile { try? FileManager.default.removeItem(at: file) }
            throw CancellationError()
        }
        let result = PendingResponse()
        let upload = UploadRequest(
            form: form, role: .wholeForm(uploadBody, once: once), callerSession: session, requests: requests,
            pacer: pacer,
            reception: reception, progress: progress, completion: result.resolve)
        defer { bodySent?(upload.furthestHandedOut) }
        requestSent?(request, form.contentLength)
        do {
            let reply = try await session.perform(request, upload, answeredTo: result)
            if let response = reply.1 as? HTTPURLResponse { answered?(response) }
            return reply
        } catch let error as MultipartError {
            if let response = error.response { answered?(response) }
            throw error
        }
    }
}
