import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A `.resumable` upload: carries out the actions its ``StateMachine`` decides, each request one ``UploadRequest`` on
/// the caller session's private session, so that redirects, challenges, the caller's delegate, exact lengths and
/// cancellation behave as in every other upload. Progress is one count over all requests: it goes on from the
/// offset a request resumes at, and never counts a byte twice. An upload that fails or is cancelled once its upload
/// resource exists deletes that resource, so that the server keeps no part of a form that will not complete; unless
/// its state is saved for another process to resume (``SavedState``), which keeps it through every failure but the
/// server's word, a breach, the form's own and the time limit.
package struct ResumableUpload {
    var form: MultipartFormData
    let request: URLRequest
    let session: URLSession
    let policy: MultipartResumption
    /// The upload's pacing clock, shared by every request's body.
    let pacer: MultipartPacer?
    /// Makes every request of the protocol, and the whole form's: the caller's fresh headers, the origin rule.
    let requests: RequestMaker
    /// How the upload's answer is kept, which the append that completes the form (or the whole form) gets; every
    /// other answer is read for a bounded prefix.
    var reception = ResponseReception.answer(accepting: nil, body: .inMemory, sink: nil)
    let progress: ProgressCoalescer?
    /// What the upload's queue tells it, if it is a queue's.
    var membership = Membership.alone
    /// The creation's `Idempotency-Key` where the caller's request has none: the upload's own, one a creation.
    private(set) var ownKey: String?

    func run() async throws -> Reply {
        guard let directory = policy.stateDirectory else { return try await run(saving: nil) }
        guard
            let state = try SavedState(
                form: form, request: request, directory: directory, interopVersions: InteropVersion.spoken,
                notices: { policy.events?($0.event) })
        else { return try await run(saving: nil) }
        defer { state.lock.release() }
        var upload = self
        if let record = state.record {
            if let rebuilt = state.rebuilt(form, from: record) {
                upload.form = rebuilt
                return try await upload.run(saving: state, resuming: record, startingOver: self)
            }
            // Another form, or other file contents: the old upload cannot be finished.
            policy.events?(.startedOver(.formChanged))
            await delete(URL(string: record.uploadURL), version: InteropVersion(rawValue: record.interopVersion))
            state.remove()
        }
        return try await upload.run(saving: state)
    }

    /// Runs the machine, carrying out each action it gives; with `state`, keeps it in step with the upload's location
    /// and offset. A saved upload that cannot go on starts over as `fresh`: the caller's form, with its own boundary.
    private func run(
        saving state: SavedState?, resuming record: SavedUpload? = nil, startingOver fresh: ResumableUpload? = nil
    ) async throws -> Reply {
        // A key of the upload's own where the caller gave none: a creation sent again after a drop or a stall (the
        // whole form in one request too) is answered once by a server that honours it, as a queue's uploads are.
        if ownKey == nil, request.value(forHTTPHeaderField: Header.idempotencyKey) == nil {
            var keyed = self
            keyed.ownKey = UUID().uuidString.lowercased()
            return try await keyed.run(saving: state, resuming: record, startingOver: fresh)
        }
        // No progress comes after the upload returns or throws.
        defer { progress?.finish() }
        // A new upload to a server the queue knows nothing of waits for the one that asks what it speaks, unless it
        // asks nothing.
        var (known, knownNone) = (membership.knownServer, membership.speaksNone)
        // An upload no queue gathers goes on with what its process found of the server.
        let processGate = DiscoveryGate.forProcess(of: request.url)
        let gate = membership.discovery ?? processGate
        let oneRequest = policy.goesInOneRequest(form.contentLength)
        // The one request asks nothing and waits for nobody: it goes in the version found, if any, by its queue or
        // else by its process (a guess that misses costs the server's refusal and the form again).
        for finding in [gate?.known, processGate?.known] where oneRequest && known == nil {
            if case .speaks(let server)? = finding { known = server }
        }
        let discovery = record == nil && known == nil && !knownNone && !oneRequest ? gate : nil
        let turn = discovery?.turn()
        defer { if let turn { discovery?.leave(turn) } }
        if let discovery, let turn {
            switch await discovery.finding(for: turn) {
            case .ask: break
            case .speaks(let server): known = server
            case .speaksNone: knownNone = true
            }
        }
        // Whether the upload goes whole on what was known, which is no new finding that the server speaks none.
        let toldNone = knownNone
        var resumption = StateMachine(
            contentLength: form.contentLength, policy: policy, requestURL: request.url, savesState: state != nil,
            resuming: record.flatMap { record in
                URL(string: record.uploadURL).map { .init(location: $0, acknowledged: record.acknowledged) }
            },
            version: record.flatMap { InteropVersion(rawValue: $0.interopVersion) } ?? .newest,
            savedLifetime: record?.expires.map { $0.timeIntervalSinceNow },
            // Interrupted (Ctrl-C) or saved (a kill -9 leaves no mark) moments ago: the server may still be taking
            // what the last run had in flight.
            interruptedMomentsAgo: (record?.interrupted ?? record?.updated).map { -$0.timeIntervalSinceNow < 60 }
                ?? false,
            known: known)
        // A saved upload's state is on disk already.
        if let state, record != nil { policy.events?(.saved(state.directory.file(for: state.key))) }
        var record = record
        // One probe for a server, not one an upload: a queue that found it speaks no draft sends the form whole.
        var action = knownNone && record == nil ? .sendWhole(underMinimumSize: nil) : resumption.start()
        // Whether the queue was told what the server speaks.
        var told = false
        // Why the last request failed, until the upload goes on from where the server stands.
        var failure: String?
        // Whether the last request failed without an answer.
        var unreachable = false
        // A stream of unknown length, read as the appends go out; made at the first append.
        var buffer: AppendBuffer?
        defer { buffer?.close() }
        while true {
            switch action {
            case .send(let step):
                guard !Task.isCancelled else {
                    action = resumption.handle(.cancelled)
                    continue
                }
                if case .append(let offset, let end) = step, resumption.contentLength == nil || buffer != nil {
                    if let error = await hold(from: offset, upTo: end, in: &buffer) {
                        action = resumption.handle(Task.isCancelled ? .cancelled : .failed(error, handedOut: offset))
                        continue
                    }
                    if resumption.contentLength == nil, let length = buffer?.held.length {
                        // The stream ended within this append: it goes out saying so.
                        progress?.lengthFound(length)
                        action = resumption.lengthFound(length)
                        continue
                    }
                    // The next append's bytes are read while this one goes out.
                    buffer?.prefetch(through: end.addingSaturated(end.subtractingSaturated(offset)))
                }
                if case .append(let offset, _) = step, failure != nil {
                    policy.events?(.continuing(offset: offset, contentLength: resumption.contentLength))
                    failure = nil
                }
                let reason: String
                // The machine as it stands judges the head of the answer, so that only its answer reaches the sink.
                let judge = resumption
                switch await send(
                    step, version: resumption.version, to: resumption.location, contentLength: resumption.contentLength,
                    buffered: buffer, progress: progress, answering: { judge.takesAsAnswer($0, handedOut: $1) },
                    timeout: resumption.outageTimeLeft)
                {
                case (.success(let reply), let handedOut):
                    reason = "HTTP \((reply.1 as? HTTPURLResponse)?.statusCode ?? 0)"
                    // Any answer, a 503 too: the network is back for every upload that waits for it.
                    membership.outage?.answered()
                    unreachable = false
                    action = resumption.handle(.answered(Answer(reply.1), reply, handedOut: handedOut))
                    // Said once, as the server is found to speak the draft.
                    if let found = resumption.found, !told {
                        told = true
                        membership.learned?(found)
                        gate?.found(.speaks(found))
                        // What a queue's upload found holds for its process's other uploads too.
                        if gate !== processGate { processGate?.found(.speaks(found)) }
                    }
                case (.failure, _) where Task.isCancelled:
                    reason = "cancelled"
                    action = resumption.handle(.cancelled)
                case (.failure(let refused as MultipartError), _) where refused.isRefusedAnswer:
                    // The machine's own answer (only the one it takes as the upload's is judged), with a status the
                    // caller refuses: the upload ends with it, as it would with the answer.
                    membership.outage?.answered()
                    if !membership.keepsStateAfterAnswer { state?.remove() }
                    throw refused
                case (.failure(let failure as HeadersFailure), _):
                    reason = failure.error.localizedDescription
                    unreachable = false
                    action = resumption.handle(.headersFailed(failure.error))
                case (.failure(let error), let handedOut):
                    reason = error.localizedDescription
                    unreachable = true
                    action = resumption.handle(.failed(error, handedOut: handedOut))
                }
                if case .wait(let seconds, _) = action {
                    failure = reason
                    policy.events?(.retrying(reason: reason, seconds: seconds))
                }
            case .wait(let seconds, let step):
                // The machine bounds every wait (finite, at most an hour); a cancel ends it at once. Only the server's
                // silence is waited out with the other uploads to it: a busy answer is this upload's own.
                if let outage = membership.outage, unreachable {
                    await outage.wait(seconds: seconds, atMost: resumption.outageTimeLeft)
                } else {
                    try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
                }
                action = .send(step)
            case .settle(let offset, let seconds):
                policy.events?(.settling(offset: offset))
                try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
                action = .send(.askOffset)
            case .keep(let keeping, let step):
                if let offset = keeping.resumedAt {
                    policy.events?(.resumed(offset: offset, contentLength: resumption.contentLength ?? offset))
                }
                if let unwritten = write(keeping, in: resumption.version, to: state, after: &record) {
                    action = resumption.handle(.keepFailed(unwritten))
                } else {
                    action = .send(step)
                }
            case .startOver(let reason, let location):
                // The run again takes a turn of its own: one it held as the asker is not left for it to wait on.
                if let turn { discovery?.leave(turn) }
                policy.events?(.startedOver(reason))
                await delete(location, version: resumption.version)
                state?.remove()
                // Another creation, under another key of its own: the old one names the resource that is gone.
                var again = fresh ?? self
                again.ownKey = nil
                return try await again.run(saving: state)
            case .sendWhole(let minSize):
                // A server under whose min-size the form goes whole still speaks the draft, for the next upload.
                policy.events?(minSize.map(MultipartResumption.Event.underMinimumSize) ?? .notResumable)
                if minSize == nil, !toldNone { gate?.found(.speaksNone) }
                state?.remove()
                let events = policy.events
                return try await WholeFormUpload(
                    form: form, request: request, session: session, body: .stream(nil), pacer: pacer,
                    requests: requests, reception: reception, progress: progress,
                    spooled: { events?(.spooled(contentLength: $0)) },
                    bodySent: { events?(.bodySent(bytes: $0)) },
                    // Heard as the protocol's requests are: each of the form's requests, and its answer.
                    requestSent: { request, length in
                        guard let url = request.url else { return }
                        let fields = length.map { ["Content-Length": String($0)] } ?? [:]
                        events?(.requestSent(method: request.httpMethod ?? "POST", url: url, fields: fields))
                    },
                    answered: { events?(.answerReceived(statusCode: $0.statusCode, fields: Answer.fields(of: $0))) },
                    once: true
                ).run()
            case .answer(let reply):
                if !membership.keepsStateAfterAnswer { state?.remove() }
                return reply
            case .fail(let error, let location):
                await delete(location, version: resumption.version)
                state?.remove()
                throw error
            case .stop(let error, let keeping):
                // The server keeps the upload and the state stays: the next run resumes it.
                if let unwritten = write(keeping, in: resumption.version, to: state, after: &record) {
                    action = resumption.handle(.keepFailed(unwritten))
                    continue
                }
                throw error
            case .cancel(let location):
                // A saved upload is kept, resource and state, for the next run to resume; one soon after asks until
                // the server has taken what was in flight. Another is deleted on a task of its own: a cancel
                // returns at once, however long the headers hook takes to answer for the DELETE.
                let (upload, version) = (self, resumption.version)
                Task.detached { await upload.delete(location, version: version) }
                if let state, var interrupted = record {
                    interrupted.interrupted = Date()
                    try? state.save(interrupted)
                }
                throw CancellationError()
            }
        }
    }

    /// Holds the append from `offset` up to `end` of a form holding a stream of unknown length in `buffer` (made at
    /// the first append, a ring of two appends), releasing the bytes before `offset`, which the server acknowledged.
    /// Returns the stream's error, or ``MultipartError/Reason/offsetNotBuffered(offset:bufferStart:)`` for bytes
    /// released already (an upload created again after it expired).
    private func hold(from offset: UInt64, upTo end: UInt64, in buffer: inout AppendBuffer?) async -> MultipartError? {
        if buffer == nil {
            do throws(MultipartError) {
                buffer = try AppendBuffer(
                    form,
                    capacity: Int(
                        clamping: end.subtractingSaturated(offset).addingSaturated(1).multipliedSaturated(by: 2)))
            } catch {
                return error
            }
            policy.events?(.streaming(appendSize: end.subtractingSaturated(offset)))
        }
        let ring = buffer!
        ring.release(below: offset)
        guard ring.held.start <= offset else {
            return MultipartError(.offsetNotBuffered(offset: offset, bufferStart: ring.held.start))
        }
        do throws(MultipartError) {
            try await ring.fill(through: end)
        } catch {
            return error
        }
        return nil
    }

    /// Writes the position `keeping` names, if any, to the saved state as the new `record`, and says so; a record at
    /// the same location keeps the date it was created. Returns why it could not be written.
    private func write(
        _ keeping: StateMachine.Keeping?, in version: InteropVersion, to state: SavedState?,
        after record: inout SavedUpload?
    ) -> MultipartError? {
        guard let state, let keeping, let position = keeping.writing else { return nil }
        var next = state.record(
            of: form, at: position.location, interopVersion: version.rawValue, acknowledged: position.acknowledged,
            lifetime: keeping.lifetime)
        if let record, record.uploadURL == next.uploadURL { next.created = record.created }
        do throws(MultipartError) {
            try state.save(next)
        } catch {
            return error
        }
        policy.events?(.saved(state.directory.file(for: state.key)))
        record = next
        return nil
    }

    /// Deletes the upload resource made in `version`, if there is one, within a few seconds: on a task of its own,
    /// which a cancel of the upload does not stop.
    func delete(_ location: URL?, version: InteropVersion?) async {
        guard let location else { return }
        let upload = self
        _ = await Task.detached {
            await upload.send(
                .delete, version: version ?? .newest, to: location, contentLength: nil, progress: nil, timeout: 5)
        }.value
    }

    /// Sends one request of the protocol: its reply or failure, and how far into the form its bodies reached (an
    /// append's own count, which bounds the offset the server may say it has). An append that stalls fails as a
    /// dropped connection does.
    private func send(
        _ step: Step, version: InteropVersion, to location: URL?, contentLength: UInt64?, buffered: AppendBuffer? = nil,
        progress: ProgressCoalescer?,
        answering: @escaping @Sendable (HTTPURLResponse, UInt64) -> Bool = { _, _ in false },
        timeout: TimeInterval? = nil
    ) async -> (Result<Reply, any Error>, handedOut: UInt64) {
        let request: URLRequest
        do {
            request = try await self.request(
                for: step, version: version, to: location, contentLength: contentLength, timeout: timeout)
        } catch {
            return (.failure(HeadersFailure(error: error)), 0)
        }
        let role: UploadRequest.Role =
            switch step {
            case .append(let offset, let end): .append(from: offset, upTo: end, Self.appendFraming)
            // Once, as an append: libcurl's own resend on a reused connection that died fails it, and the machine
            // sends it again, said.
            case .createComplete: .wholeForm(.stream, once: true)
            case .askOffset, .delete: .resourceRequest
            case .detect, .create: .protocolRequest
            }
        // The creation's answer may be the application's (a refusal: 400, 401, 413), and an append's: the last
        // append's, and in interop 10 an early one to any append, `?0` too (a refusal with `Upload-Complete: ?1`).
        // Each is judged as a plain upload's answer is (`acceptableStatusCodes`, the body's bound and sink), and only
        // an answer the machine ends the upload with: the body of one it goes on from (a 307 to the moved upload, a
        // 5xx, a 413 to an append it makes smaller) is no one's.
        let mayAnswer =
            switch step {
            case .create, .createComplete, .append: true
            case .detect, .askOffset, .delete: false
            }
        let (upload, result) = makeUpload(
            role, buffered: buffered,
            reception: mayAnswer ? reception.answering(only: answering) : reception.notTheAnswer,
            progress: progress)
        if let url = request.url {
            policy.events?(.requestSent(method: request.httpMethod ?? "", url: url, fields: step.fields(of: request)))
        }
        defer {
            switch step {
            case .append(let offset, _) where upload.furthestHandedOut > offset:
                policy.events?(.bodySent(bytes: upload.furthestHandedOut - offset))
            case .createComplete where upload.furthestHandedOut > 0:
                policy.events?(.bodySent(bytes: upload.furthestHandedOut))
            default: break
            }
        }
        do {
            let reply = try await watchingForStalls(step, of: upload) {
                try await session.perform(request, upload, answeredTo: result)
            }
            if let response = reply.1 as? HTTPURLResponse {
                policy.events?(.answerReceived(statusCode: response.statusCode, fields: Answer.fields(of: response)))
            }
            // Judged, as its head was, on what had gone out when it came.
            return (.success(reply), upload.handedOutAtAnswer ?? upload.furthestHandedOut)
        } catch {
            return (.failure(error), upload.furthestHandedOut)
        }
    }

    /// One request of the upload in `role`, on the caller's session, and the answer it resolves.
    private func makeUpload(
        _ role: UploadRequest.Role, buffered: AppendBuffer? = nil, reception: ResponseReception,
        progress: ProgressCoalescer?
    ) -> (UploadRequest, PendingResponse) {
        let result = PendingResponse()
        let upload = UploadRequest(
            form: form, buffered: buffered, role: role, callerSession: session, requests: requests, pacer: pacer,
            reception: reception, progress: progress, completion: result.resolve)
        return (upload, result)
    }

    /// The request of `step`, made as every request is (``RequestMaker``): the caller's URL, headers and method
    /// where they apply, the fresh headers, the origin rule (the server chose the upload's URL, as it chooses a
    /// redirect's), then the draft's fields.
    private func request(
        for step: Step, version: InteropVersion, to location: URL?, contentLength: UInt64?, timeout: TimeInterval?
    ) async throws -> URLRequest {
        let aim = step.aim(
            location: location, version: version, contentLength: contentLength, contentType: form.contentType,
            timeout: timeout, key: ownKey)
        return try await requests.make(request, aim, for: .resumable(step.reason))
    }

    /// The headers hook failed for a request of the protocol: not the form's failure nor the server's word, so a
    /// saved upload is kept.
    struct HeadersFailure: Error {
        let error: any Error
    }

    /// Runs `perform`; for a request carrying the form's bytes under the policy's stall rule, ends it as stalled when
    /// `upload` hands out its bytes too slowly.
    private func watchingForStalls(
        _ step: Step, of upload: UploadRequest, _ perform: @escaping @Sendable () async throws -> Reply
    ) async throws -> Reply {
        let end: UInt64? =
            switch step {
            case .append(_, let end): end
            case .createComplete: form.contentLength
            default: nil
            }
        guard let end, let stall = policy.stall else { return try await perform() }
        return try await withThrowingTaskGroup(of: Reply?.self) { group in
            group.addTask { try await perform() }
            group.addTask {
                try await StallWatch(rule: stall, handedOut: { upload.furthestHandedOut }, end: end).run()
                return nil
            }
            defer { group.cancelAll() }
            while let answer = try await group.next() {
                if let answer { return answer }
            }
            throw CancellationError()
        }
    }
}
