import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension MultipartUploadQueue {
    /// How one send of an upload ended.
    struct Finished: Sendable {
        var id: ID
        /// What the upload layer made of the send's end.
        var verdict: QueueSchedule.Verdict
        /// Whether the server was found to speak no version of the draft: its next forms go whole. A form under a
        /// server's `min-size` goes whole too, and that server speaks the draft.
        var speaksNone: Bool
        /// The record as the send left it, with the form's sends again counted.
        var record: QueueRecord
    }

    /// One send of an upload, as a resumable upload with its saved state in the queue's directory, run on a task of
    /// the run's group.
    struct Job: Sendable {
        let id: ID
        /// The upload's record as the send starts, and the directory it is kept in.
        let record: QueueRecord
        let store: QueueStore
        let form: MultipartFormData
        let request: URLRequest
        let stateDirectory: URL
        /// How the upload retries, but for where its state is kept and who hears its events.
        let resumption: MultipartResumption
        /// Whether a run before this one started the upload.
        let startedBefore: Bool
        /// Whether an earlier upload of the queue found that the server speaks no version of the draft.
        let speaksNone: Bool
        /// Whether the form goes whole in one request, which its start said in the record.
        let goesWhole: Bool
        /// What an earlier upload of the queue, in this run or one before, found the server to speak.
        let knownServer: ResumableUpload.KnownServer?
        /// Told what this upload found the server to speak, where it asked.
        let learned: @Sendable (ResumableUpload.KnownServer) -> Void
        /// Where the uploads to its server wait for the one that asks what it speaks, while the queue knows nothing
        /// of it: three uploads that start together ask once.
        let discovery: DiscoveryGate?
        /// Its place among the uploads to its server that wait out an outage together.
        let outage: OutageGate.Pass?
        /// The queue's clock, shared by the uploads in flight.
        let pacer: MultipartPacer
        let session: URLSession
        let headers: MultipartHeaders?
        let cancel: CancelHandle
        /// Told when the upload waits between its own tries, until when (`nil`: it tries again now), with a number
        /// that orders the reports of this send.
        let waits: @Sendable (Date?, Int) -> Void
        let progress: @Sendable (UInt64) -> Void
        /// The queue's clock, for the times the send reports and records.
        let clock: QueueClock

        /// The most of an answer's body a completed upload keeps.
        static let answerPrefix = 64 << 10

        func send() async -> Finished {
            let notes = Notes(
                record: record, store: store, startedBefore: startedBefore, goesWhole: goesWhole,
                now: clock.now)
            var policy = resumption
            // A server that speaks no draft gets the whole form, and has nothing to resume; nor has a form that goes
            // whole in one request, which goes again whole after a drop, unless a run before left a state to go on from
            // (a creation without the form, under a smaller threshold).
            let nothingToResume = goesWhole && !FileManager.default.fileExists(atPath: stateDirectory.path)
            policy.stateDirectory = speaksNone || nothingToResume ? nil : stateDirectory
            // The reports so far, and whether the last said a wait: a request sent after none says nothing new.
            let (waits, reports, now) = (waits, LockedValue((turn: 0, waits: false)), clock.now)
            let report = { @Sendable (until: Date?) in
                let turn = reports.withLock { reports -> Int? in
                    guard until != nil || reports.waits else { return nil }
                    reports = (reports.turn + 1, until != nil)
                    return reports.turn
                }
                if let turn { waits(until, turn) }
            }
            policy.events = { event in
                notes.record(event)
                switch event {
                case .retrying(_, let seconds): report(now().addingTimeInterval(seconds))
                case .requestSent: report(nil)
                default: break
                }
                // The caller's own listener hears every event too.
                if let heard = resumption.events { MultipartUploadQueue.$uploadHeard.withValue(id) { heard(event) } }
            }
            // The record, not the answer, says when the state may go.
            let membership = ResumableUpload.Membership(
                keepsStateAfterAnswer: true, speaksNone: speaksNone, outage: outage,
                knownServer: knownServer, learned: learned, discovery: discovery, pacer: pacer)
            defer { outage?.leave() }
            // The same key for every send of this upload, in every process: a server that honours it creates the
            // upload resource, or takes the whole form, once. A key of the caller's own is kept.
            var request = request
            if request.value(forHTTPHeaderField: ResumableUpload.Header.idempotencyKey) == nil {
                request.setValue(
                    StructuredField.string(record.idempotencyKey),
                    forHTTPHeaderField: ResumableUpload.Header.idempotencyKey)
            }
            let (form, session, headers, progress) = (form, session, headers, progress)
            let work = Task {
                try await session.upload(
                    form, with: request, strategy: .resumable(policy), headers: headers,
                    credentialsToOtherOrigins: false, acceptableStatusCodes: 200..<300,
                    responseBody: .chunks { _, data in notes.keep(data) }, progress: { progress($0.bytesSent) },
                    membership: membership)
            }
            cancel.set { work.cancel() }
            // A cancel of the run reaches the upload, which keeps its saved state for the next.
            let result = await withTaskCancellationHandler {
                await work.result
            } onCancel: {
                work.cancel()
            }
            let speaksNone = speaksNone || notes.speaksNone
            switch result {
            case .success(let (_, response)):
                let http = response as? HTTPURLResponse
                let fields = (http?.allHeaderFields as? [String: String]) ?? [:]
                let answer = Answer(statusCode: http?.statusCode, headers: fields, body: notes.answer)
                return Finished(id: id, verdict: .completed(answer), speaksNone: speaksNone, record: notes.record)
            case .failure(let error):
                return Finished(
                    id: id, verdict: Self.verdict(of: error), speaksNone: speaksNone, record: notes.record)
            }
        }

        /// What an upload's error makes of it, as ``FailureMeaning`` says: the network's or a busy server's is for
        /// now, the form's own or the server's final word ends it; a form the server holds whole, its answer lost, is
        /// completed.
        static func verdict(of error: any Error) -> QueueSchedule.Verdict {
            switch FailureMeaning.of(error) {
            case .cancelled: .stopped
            case .noAnswer: .waiting(outage: true)
            // URLSession would have sent the whole form again on a new connection: the next send counts it.
            case .busy, .resendRefused: .waiting(outage: false)
            case .answerLost: .completed(Answer(statusCode: nil, headers: [:], body: Data()))
            case .local, .final: .failed(failure(error))
            }
        }

        /// A failure as the queue keeps it: in words, its kind, and the answer that refused the form, as the upload
        /// threw them.
        static func failure(_ error: any Error) -> Failure {
            if let error = error as? URLError { return Failure(reason: error.localizedDescription) }
            guard let error = error as? MultipartError else { return Failure(reason: String(describing: error)) }
            guard case .unacceptableStatus(let status, let body) = error.reason else {
                return Failure(reason: error.description, category: error.category)
            }
            let fields = (error.response?.allHeaderFields as? [String: String]) ?? [:]
            let answer = Answer(statusCode: status, headers: fields, body: body.prefix(answerPrefix))
            return Failure(reason: "the server answered \(status)", category: error.category, answer: answer)
        }
    }

    /// What one send saw: the start of the answer's body, whether its server speaks no draft, and its record, in which
    /// a send of the form from its first byte that may give the server a second copy is counted
    /// (``QueueRecord/sentAgain``) before the request goes, so that a kill after it cannot hide it: the whole form
    /// after a run that started the upload, a new upload after the server forgot the one a run before made, or any
    /// send from the first byte after a run that sent the form whole; at most one of those a send. And each time a
    /// small form sent whole in one request goes again after its connection dropped before any answer.
    final class Notes: Sendable {
        private struct Seen {
            /// The record as this send last wrote it.
            var record: QueueRecord
            var speaksNone = false
            var counted = false
            /// Whether the record says the form went whole.
            var noted = false
            /// Whether the form went whole in one request and no answer has come since.
            var wholeUnanswered = false
            var answer = Data()
        }
        private let seen: LockedValue<Seen>
        private let store: QueueStore
        /// Whether a run before this one started the upload.
        private let startedBefore: Bool
        /// Whether a run before this one began to send the form whole.
        private let sentWholeBefore: Bool
        /// Whether the send's start said in the record that the form goes whole, and counted it where it goes again:
        /// the queue knew the server speaks no draft.
        private let goesWhole: Bool
        private let now: @Sendable () -> Date

        init(
            record: QueueRecord, store: QueueStore, startedBefore: Bool, goesWhole: Bool,
            now: @escaping @Sendable () -> Date
        ) {
            self.now = now
            seen = LockedValue(
                Seen(record: record, counted: goesWhole && startedBefore, noted: goesWhole))
            self.store = store
            self.startedBefore = startedBefore
            self.goesWhole = goesWhole
            sentWholeBefore = !goesWhole && record.state.sentWhole != nil
        }

        func record(_ event: MultipartResumption.Event) {
            switch event {
            case .notResumable:
                // The whole form goes next, in one request.
                seen.withLock { $0.speaksNone = true }
                note(again: startedBefore, whole: true)
            case .underMinimumSize:
                note(again: startedBefore, whole: true)
            case .startedOver(.uploadGone):
                note(again: startedBefore)
            case .requestSent(_, _, let fields)
            where fields[ResumableUpload.Header.complete] == "?1"
                && fields[ResumableUpload.Header.offset] == nil:
                // The form in one request: again where the last went unanswered.
                let resent = seen.withLock { seen in
                    defer { seen.wholeUnanswered = true }
                    return seen.wholeUnanswered
                }
                note(again: startedBefore, whole: true, resent: resent)
            case .answerReceived:
                seen.withLock { $0.wholeUnanswered = false }
            case .requestSent("PATCH", _, let fields) where fields[ResumableUpload.Header.offset] == "0":
                note(again: sentWholeBefore)
            default: break
            }
        }

        /// Counts a send again where `again` says so and none was counted yet, or where it is `resent`, and says that
        /// the form goes `whole`, in the record as it stands on disk (another process may have paused it meanwhile).
        /// Not synced, as a start's write: it outlives a kill, the failure it is for.
        private func note(again: Bool, whole: Bool = false, resent: Bool = false) {
            let (count, say) = seen.withLock { seen -> (Bool, Bool) in
                let count = resent || (again && !seen.counted)
                let say = whole && !seen.noted
                seen.counted = seen.counted || count
                seen.noted = seen.noted || say
                return (count, say)
            }
            guard count || say else { return }
            let change = QueueRecord.Change.sending(again: count, wholeAt: say ? now() : nil)
            let written = try? store.update([(seen.withLock { $0.record.id }, change)])
            if let written = written?.first ?? nil { seen.withLock { $0.record.state = written } }
        }

        func keep(_ data: Data) {
            seen.withLock { seen in
                let room = Job.answerPrefix - seen.answer.count
                if room > 0 { seen.answer.append(data.prefix(room)) }
            }
        }

        var record: QueueRecord { seen.withLock { $0.record } }
        var speaksNone: Bool { seen.withLock { $0.speaksNone } }
        var answer: Data { seen.withLock { $0.answer } }
    }

    /// Cancels a send from the queue: before its task exists, the task is cancelled as soon as it does.
    final class CancelHandle: Sendable {
        private struct Held {
            var cancel: (@Sendable () -> Void)?
            var cancelled = false
        }
        private let held = LockedValue(Held())

        func set(_ cancel: @escaping @Sendable () -> Void) {
            let now = held.withLock { held -> Bool in
                held.cancel = cancel
                return held.cancelled
            }
            if now { cancel() }
        }

        func cancel() {
            let cancel = held.withLock { held -> (@Sendable () -> Void)? in
                held.cancelled = true
                return held.cancel
            }
            cancel?()
        }
    }
}
