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
        var origin = ParsedOnce.origins
        for case .record(let summary) in written {
            await perform(schedule.seen(summary, origin: origin(summary.url)))
        }
        for id in removed.map(ID.init(rawValue:)) { await perform(schedule.seenRemoved(id)) }
    }
}
