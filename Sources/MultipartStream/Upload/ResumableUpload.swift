import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A `.resumable` upload: carries out the actions its ``StateMachine`` decides, each request one ``MultipartUpload`` on
/// the caller session's private session, so that redirects, challenges, the caller's delegate, exact lengths and
/// cancellation behave as in every other upload. Progress is one count over all requests: it goes on from the
/// offset a request resumes at, and never counts a byte twice. An upload that fails or is cancelled once its upload
/// resource exists deletes that resource, so that the server keeps no part of a form that will not complete.
struct ResumableUpload {
    let form: MultipartFormData
    let request: URLRequest
    let session: URLSession
    let policy: MultipartResumption
    let pacing: MultipartPacing?
    let progress: ProgressCoalescer?

    func run() async throws -> (Data, URLResponse) {
        // Counts what the appends hand out, for the caller or only for the offsets' bound; ended before returning
        // or throwing: no progress comes after the upload returns.
        let progress = self.progress ?? ProgressCoalescer(totalBytes: form.contentLength) { _ in }
        defer { progress.finish() }
        var resumption = StateMachine(contentLength: form.contentLength, policy: policy, requestURL: request.url)
        var action = resumption.start()
        var last: (Data, URLResponse)?
        while true {
            if Task.isCancelled {
                await delete(resumption.location)
                throw CancellationError()
            }
            switch action {
            case .send(let step):
                do {
                    let answer = try await send(step, to: resumption.location, progress: progress)
                    resumption.bodyHandedOut(upTo: progress.highest)
                    last = answer
                    action = resumption.handle(.answered(Answer(answer.1)))
                } catch let error where Self.isConnectionFailure(error, during: step) {
                    resumption.bodyHandedOut(upTo: progress.highest)
                    action = resumption.handle(.connectionFailed(error))
                } catch is CancellationError {
                    await delete(resumption.location)
                    throw CancellationError()
                }
            case .wait(let seconds, let step):
                // The machine bounds every wait (finite, at most an hour); a cancel ends it at once.
                try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
                action = .send(step)
            case .sendWhole:
                return try await session.perform(request) { completion in
                    MultipartUpload(
                        form: form, role: .wholeForm(.stream(startingAt: 0)), callerSession: session,
                        origin: request.url, pacing: pacing, progress: progress, completion: completion)
                }
            case .answer:
                // Every action before `.answer` sent a request that answered.
                return last!
            case .fail(let error, let location):
                await delete(location)
                throw error
            }
        }
    }

    /// Deletes the upload resource, if there is one, within a few seconds: on a task of its own, which a cancel of
    /// the upload does not stop.
    private func delete(_ location: URL?) async {
        guard let location else { return }
        let upload = self
        await Task.detached { _ = try? await upload.send(.delete, to: location, progress: nil, timeout: 5) }.value
    }

    /// Sends one request of the protocol, with the caller's URL, headers and method where they apply.
    private func send(
        _ step: Step, to location: URL?, progress: ProgressCoalescer?, timeout: TimeInterval? = nil
    ) async throws -> (Data, URLResponse) {
        var request = step.request(
            from: request, location: location, contentLength: form.contentLength, contentType: form.contentType,
            credentialsToOtherOrigins: policy.credentialsToOtherOrigins)
        if let timeout { request.timeoutInterval = timeout }
        let role: MultipartUpload.Role =
            switch step {
            case .append(let offset, let end): .append(from: offset, upTo: end)
            case .askOffset, .delete: .resourceRequest
            case .detect, .create: .protocolRequest
            }
        return try await session.perform(request) { completion in
            MultipartUpload(
                form: form, role: role, callerSession: session, origin: self.request.url, pacing: pacing,
                progress: progress, completion: completion)
        }
    }

    /// Whether `error` is the connection's, which another request may not meet: dropped, reset, timed out, refused;
    /// or, while appending, URLSession's own resend of the part on a new connection, which the upload refused.
    static func isConnectionFailure(_ error: any Error, during step: Step) -> Bool {
        if case .append = step, let error = error as? MultipartError, case .appendResent = error.reason { return true }
        guard let error = error as? URLError else { return false }
        let codes: Set<URLError.Code> = [
            .networkConnectionLost, .timedOut, .cannotConnectToHost, .notConnectedToInternet, .cannotFindHost,
            .dnsLookupFailed, .badServerResponse, .unknown,
        ]
        return codes.contains(error.code)
    }
}
