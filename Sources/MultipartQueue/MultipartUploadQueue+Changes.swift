import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// What other processes wrote, taken up by a run.
extension MultipartUploadQueue {
    /// Applies what other processes wrote since the queue last looked, as their calls here would have: an added
    /// upload joins, a paused or removed one that has not started never starts and one under way is stopped (a
    /// removed one is deleted on the server as it ends), a resumed, retried or moved one goes as it says. What this
    /// process wrote comes back too, and changes nothing.
    func applyChanges() async {
        guard let (version, written, removed) = store.changes(since: seenVersion) else { return }
        seenVersion = version
        for case .record(let summary) in written { await apply(summary) }
        for id in removed.map(ID.init(rawValue:)) {
            guard schedule.uploads[id] != nil else { continue }
            if schedule.stop(id, for: .remove) {
                cancels[id]?.cancel()
            } else if let upload = schedule.remove(id) {
                ended(upload)
            }
        }
    }

    func apply(_ summary: QueueRecord.Summary) async {
        let id = ID(rawValue: summary.id)
        guard let upload = schedule.uploads[id] else {
            let added = Self.upload(summary, origin: Origin(URL(string: summary.url)))
            nextSequence = max(nextSequence, summary.sequence + 1)
            schedule.add(added)
            progress.totalUnitCount += Int64(clamping: added.contentLength)
            if added.state == .completed { endedBytes += added.contentLength }
            eventSink.yield(.added(id))
            wake()
            return
        }
        if (summary.priority ?? 0) > upload.rank.priority {
            schedule.prioritize(id)
            eventSink.yield(.prioritized(id))
            wake()
        }
        switch summary.standing {
        case .removing:
            if schedule.stop(id, for: .remove) {
                cancels[id]?.cancel()
            } else {
                await removeAsked(id)
            }
        case .paused where !schedule.isPaused(id):
            if schedule.pause(id) { cancels[id]?.cancel() }
            eventSink.yield(.paused(id))
        case .paused:
            break
        case .pending where upload.isInFlight:
            // Its own send's write, or a resume of a pause not yet taken: the send's end decides.
            break
        case .pending:
            if schedule.isPaused(id) {
                if schedule.resume(id) { wake() }
                eventSink.yield(.resumed(id))
            } else if case .failed = upload.state {
                let length = summary.contentLength
                progress.totalUnitCount += Int64(clamping: length) - Int64(clamping: upload.contentLength)
                schedule.update(id) {
                    ($0.sent, $0.contentLength) = (min($0.sent, length.subtractingSaturated(1)), length)
                }
                schedule.retry(id)
                eventSink.yield(.retried(id))
                wake()
            }
        case .completed, .failed:
            break
        }
    }

    /// Removes the upload `id`, not in flight, whose removal another process asked for, as its remove would have.
    func removeAsked(_ id: ID) async {
        guard let upload = schedule.uploads[id], !upload.isInFlight, let (session, headers) = running else { return }
        await forget(upload, session: session, headers: headers, givingUp: upload.state != .completed)
    }
}
