import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A `.resumable` upload: carries out the actions its ``StateMachine`` decides, each request one ``MultipartUpload`` on
/// the caller session's private session, so that redirects, challenges, the caller's delegate, exact lengths and
/// cancellation behave as in every other upload. Progress is one count over all requests: it goes on from the
/// offset a request resumes at, and never counts a byte twice. An upload that fails once its upload resource exists
/// deletes that resource, so that the server keeps no part of a form that will not complete; one that is cancelled
/// does too, unless its state is saved for another process to resume (``SavedState``).
struct ResumableUpload {
    var form: MultipartFormData
    let request: URLRequest
    let session: URLSession
    let policy: MultipartResumption
    let pacing: MultipartPacing?
    let progress: ProgressCoalescer?

    func run() async throws -> (Data, URLResponse) {
        guard let directory = policy.stateDirectory else { return try await run(saving: nil) }
        guard
            let state = try SavedState(
                form: form, request: request, directory: directory, interopVersions: InteropVersion.spoken,
                events: policy.events)
        else { return try await run(saving: nil) }
        defer { state.lock.release() }
        var upload = self
        if let record = state.record {
            if let rebuilt = state.rebuilt(form, from: record) {
                upload.form = rebuilt
                return try await upload.run(saving: state, resuming: record)
            }
            // Another form, or other file contents: the old upload cannot be finished.
            policy.events?(.startedOver(.formChanged))
            await delete(URL(string: record.uploadURL))
            state.remove()
        }
        return try await upload.run(saving: state)
    }

    /// Runs the machine; with `state`, keeps it in step with the upload's location and offset.
    private func run(saving state: SavedState?, resuming record: SavedUpload? = nil) async throws -> (Data, URLResponse)
    {
        // Counts what the appends hand out, for the caller or only for the offsets' bound; ended before returning
        // or throwing: no progress comes after the upload returns.
        let progress = self.progress ?? ProgressCoalescer(totalBytes: form.contentLength) { _ in }
        defer { progress.finish() }
        let started = DispatchTime.now().uptimeNanoseconds
        var resumption = StateMachine(
            contentLength: form.contentLength, policy: policy, requestURL: request.url,
            resuming: record.flatMap { record in URL(string: record.uploadURL).map { ($0, record.acknowledged) } })
        var action = resumption.start()
        var record = record
        // A saved upload says where it resumes once the server has said so; its state is on disk already.
        var announcing = record != nil
        if let state, record != nil { policy.events?(.saved(state.directory.file(for: state.key))) }
        var last: (Data, URLResponse)?
        while true {
            if Task.isCancelled {
                // A saved upload is kept, resource and state, for the next run to resume.
                if state == nil { await delete(resumption.location) }
                throw CancellationError()
            }
            switch action {
            case .send(let step):
                do {
                    let answer = try await send(step, to: resumption.location, progress: progress)
                    if case .append = step { resumption.bodyHandedOut(upTo: progress.highest) }
                    last = answer
                    action = resumption.handle(.answered(Answer(answer.1)))
                } catch let error where Self.isConnectionFailure(error, during: step) {
                    if case .append = step { resumption.bodyHandedOut(upTo: progress.highest) }
                    action = resumption.handle(.connectionFailed(error))
                } catch is CancellationError where Task.isCancelled {
                    continue
                } catch {
                    // A part that failed, or the caller's headers: the upload ends here.
                    await delete(resumption.location)
                    state?.remove()
                    throw error
                }
                guard let state, case .send(.append) = action, let location = resumption.location else { continue }
                if announcing, location.absoluteString == record?.uploadURL {
                    policy.events?(.resumed(offset: resumption.acknowledged, contentLength: form.contentLength))
                }
                announcing = false
                record = try await save(location, resumption.acknowledged, to: state, after: record)
            case .wait(let seconds, let step):
                let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
                if let limit = policy.maximumDuration, elapsed + seconds > limit {
                    action = resumption.outOfTime(after: (elapsed * 10).rounded() / 10)
                    continue
                }
                // The machine bounds every wait (finite, at most an hour); a cancel ends it at once.
                try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
                action = .send(step)
            case .startOver(let reason, let step):
                policy.events?(.startedOver(reason))
                state?.remove()
                record = nil
                announcing = false
                action = .send(step)
            case .sendWhole:
                state?.remove()
                return try await session.perform(request) { completion in
                    MultipartUpload(
                        form: form, role: .wholeForm(.stream), callerSession: session,
                        origin: request.url, pacing: pacing, progress: progress, completion: completion)
                }
            case .answer:
                state?.remove()
                // Every action before `.answer` sent a request that answered.
                return last!
            case .fail(let error, let location):
                await delete(location)
                state?.remove()
                throw error
            }
        }
    }

    /// Writes the upload's location and offset when they changed. A state that cannot be written fails the
    /// upload, which the caller asked to keep.
    private func save(
        _ location: URL, _ acknowledged: UInt64, to state: SavedState, after record: SavedUpload?
    ) async throws -> SavedUpload {
        if let record, record.uploadURL == location.absoluteString, record.acknowledged == acknowledged {
            return record
        }
        var next = state.record(
            of: form, at: location, interopVersion: InteropVersion.current.rawValue, acknowledged: acknowledged)
        if let record, record.uploadURL == next.uploadURL { next.created = record.created }
        do {
            try state.save(next)
            policy.events?(.saved(state.directory.file(for: state.key)))
        } catch {
            await delete(location)
            state.remove()
            throw error
        }
        return next
    }

    /// Deletes the upload resource, if there is one, within a few seconds: on a task of its own, which a cancel of
    /// the upload does not stop.
    func delete(_ location: URL?) async {
        guard let location else { return }
        let upload = self
        await Task.detached { _ = try? await upload.send(.delete, to: location, progress: nil, timeout: 5) }.value
    }

    /// Sends one request of the protocol, with the caller's URL, headers and method where they apply, and the
    /// policy's fresh headers; an append that stalls fails as a dropped connection does.
    private func send(
        _ step: Step, to location: URL?, progress: ProgressCoalescer?, timeout: TimeInterval? = nil
    ) async throws -> (Data, URLResponse) {
        var request = step.request(
            from: request, location: location, contentLength: form.contentLength, contentType: form.contentType,
            credentialsToOtherOrigins: policy.credentialsToOtherOrigins)
        if let timeout { request.timeoutInterval = timeout }
        if let headers = policy.headers {
            for (name, value) in try await headers(request) {
                guard !name.isEmpty, name.utf8.allSatisfy(Boundary.isTokenCharacter), PartHeaders.isValidValue(value)
                else { throw MultipartError(.invalidHeaderValue(name: name, value: value)) }
                request.setValue(value, forHTTPHeaderField: name)
            }
        }
        let role: MultipartUpload.Role =
            switch step {
            case .append(let offset, let end): .append(from: offset, upTo: end)
            case .askOffset, .delete: .resourceRequest
            case .detect, .create: .protocolRequest
            }
        let perform: @Sendable () async throws -> (Data, URLResponse) = { [request] in
            try await session.perform(request) { completion in
                MultipartUpload(
                    form: form, role: role, callerSession: session, origin: self.request.url, pacing: pacing,
                    progress: progress, completion: completion)
            }
        }
        guard case .append(_, let end) = step, let stall = policy.stall, let progress else {
            return try await perform()
        }
        return try await withThrowingTaskGroup(of: (Data, URLResponse)?.self) { group in
            group.addTask { try await perform() }
            group.addTask {
                try await StallWatch(rule: stall, handedOut: { progress.highest }, end: end).run()
                return nil
            }
            defer { group.cancelAll() }
            while let answer = try await group.next() {
                if let answer { return answer }
            }
            throw CancellationError()
        }
    }

    /// Whether `error` is the connection's, which another request may not meet: dropped, reset, timed out, refused,
    /// stalled; or, while appending, URLSession's own resend of the part on a new connection, which the upload
    /// refused.
    static func isConnectionFailure(_ error: any Error, during step: Step) -> Bool {
        if case .append = step, let error = error as? MultipartError, case .appendResent = error.reason { return true }
        if error is StallWatch.Stalled { return true }
        guard let error = error as? URLError else { return false }
        let codes: Set<URLError.Code> = [
            .networkConnectionLost, .timedOut, .cannotConnectToHost, .notConnectedToInternet, .cannotFindHost,
            .dnsLookupFailed, .badServerResponse, .unknown,
        ]
        return codes.contains(error.code)
    }
}
