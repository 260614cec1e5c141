import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The ends of sends, and what their sends report while they go: progress and waits.
extension MultipartUploadQueue {
    /// An upload's send ended: the schedule's actions for it.
    func finish(_ finished: Finished) async {
        cancels[finished.id] = nil
        let actions = schedule.finished(
            finished.id, finished.verdict, speaksNone: finished.speaksNone, at: clock.now())
        // Its record as the send had it: another process's remove took the one on disk.
        await perform(actions, known: finished.record)
    }

    /// An upload in flight waits between its own tries until `until`, or (`nil`) tries again. `turn` orders one
    /// send's reports, which reach the queue each on a task of its own.
    func inFlight(_ id: ID, waitsUntil until: Date?, turn: Int) async {
        await perform(schedule.waits(id, until: until, turn: turn))
    }

    /// A server is back: its uploads that wait go now.
    func outageEnded(at origin: Origin) async {
        await perform(schedule.back(origin))
    }

    /// An upload in flight handed out `bytes` of its form.
    func sent(_ bytes: UInt64, by id: ID) async {
        await perform(schedule.sent(bytes, by: id))
    }

    /// Writes the uploads that completed since the last write as completed, with `starts` (the next uploads' starts)
    /// in the same transaction, not synced: a power cut that loses one sends the form again, under the same key, and
    /// counts it. Then each completed upload's saved state goes, and its event: a kill before the write resumes it,
    /// and the server says it has the form. The state each start wrote, or found and left, in order; `nil` for an
    /// upload gone.
    ///
    /// - Throws: The starts' failure to write; the completions are written alone then.
    @discardableResult
    func recordCompletions(with starts: [(ID, QueueRecord.Change)] = []) throws -> [QueueRecord.State?] {
        let ended = completing
        completing = []
        let changes = ended.map { id, answer in (id, QueueRecord.Change.completed(answer.stored)) }
        guard !changes.isEmpty || !starts.isEmpty else { return [] }
        var written: [QueueRecord.State?] = []
        var failure: (any Error)?
        do {
            written = try write(changes + starts)
        } catch {
            failure = error
            if !starts.isEmpty { written = (try? write(changes)) ?? [] }
        }
        for (index, (id, answer)) in ended.enumerated() {
            if index < written.count, written[index] != nil { removeState(of: id) }
            perform(.emit(.completed(id, answer)))
        }
        if let failure, !starts.isEmpty { throw failure }
        return Array(written.dropFirst(changes.count))
    }
}
