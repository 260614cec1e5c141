import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The run: its loop of starts and ends, and the sleep between them.
extension MultipartUploadQueue {
    /// Sends the queue's uploads, ``maximumConcurrentUploads`` at a time in the order added, until none is left to
    /// send: each completed or failed. An upload the network or the server fails for now (a dropped or refused
    /// connection, a timeout, a 408, 429 or 5xx, an outage longer than its retries) waits and goes again; cancel the
    /// task that runs the queue to stop it, and the uploads in flight are kept for the next run.
    ///
    /// - Parameters:
    ///   - session: The session the uploads go through.
    ///   - headers: Fresh headers for each request, credentials included, which the queue never writes.
    ///   - pacing: The rate of all the uploads in flight together (``pacing``, which can be changed while the run
    ///     goes); `nil` keeps ``pacing`` as it is, unlimited unless set.
    /// - Throws: ``MultipartStream/MultipartError/Reason/queueInUse(_:)`` when another process (or another `run` of this queue)
    ///   runs it; `CancellationError` when cancelled. An upload's own failure is its state, never thrown.
    public func run(
        on session: URLSession = .shared, headers: MultipartHeaders? = nil, pacing: MultipartPacing? = nil
    ) async throws {
        await removeLetsGo()
        guard !isRunning else { throw MultipartError(.queueInUse(directory)) }
        if let pacing { self.pacing = pacing }
        let lock = try store.lock()
        running = (session, headers)
        var failure: (any Error)?
        do {
            try await drive(session: session, headers: headers)
        } catch {
            failure = error
        }
        // Uploads stopped by a cancel are pending again (paused, where the caller paused them): their saved state
        // resumes them.
        schedule.runEnded()
        cancels.removeAll()
        // A remove whose send's end the run did not record (none should be left) removes the upload now, before
        // another run can start it: no remove waits forever.
        for (id, waiting) in removers {
            var removal = Removal.removed
            if let upload = schedule.uploads[id] {
                removal = await removeNow(upload, on: (session, headers))
            }
            for remover in waiting { remover.resume(returning: removal) }
        }
        removers.removeAll()
        lock.release()
        running = nil
        if let failure { throw failure }
    }

    /// Starts uploads while there is room and one to start, and records each as it ends, until none is left.
    func drive(session: URLSession, headers: MultipartHeaders?) async throws {
        try await withThrowingTaskGroup(of: Finished?.self) { group in
            // What other processes say (an add, a pause, a removal) reaches the run within `lookAgain`.
            group.addTask {
                // A cancel ends the sleep with an error, and the loop with it.
                while (try? await Task.sleep(nanoseconds: Self.lookAgain)) != nil {
                    await self.applyChanges()
                }
                return nil
            }
            // The one task that sleeps until the next upload's time comes, or a server is back.
            var sleeping: (alarm: Alarm, until: Date)?
            // The sends that ended, as they say it, and those the run took: sends that end together are taken
            // together, and their ends and the starts of the next written in one commit.
            let ended = LockedValue(0)
            var taken = 0
            while true {
                // One moment for both questions: what may start now, and else when to look again.
                let now = clock.now()
                // Cancelled, the run starts nothing more, and records how each upload in flight ended (an upload
                // may complete as the cancel comes) before it returns.
                if ended.withLock({ $0 }) == taken {
                    if !Task.isCancelled {
                        for job in startAll(at: now, session: session, headers: headers) {
                            group.addTask {
                                let finished = await job.send()
                                ended.withLock { $0 += 1 }
                                return finished
                            }
                        }
                    }
                    // The completions no start took with it.
                    _ = try? recordCompletions()
                }
                let inFlight = schedule.inFlight.count
                let time = schedule.nextWake(after: now)
                if sleeping == nil, !Task.isCancelled,
                    // While uploads run, the run sleeps too: a server's return or the caller's move starts uploads at
                    // once, and an upload's wait is looked at in its time, not when an upload in flight ends.
                    let until = time ?? (inFlight > 0 ? now.addingTimeInterval(3_600) : nil)
                {
                    let alarm = Alarm()
                    (sleeping, sleep) = ((alarm, until), (alarm, until))
                    sleeps += 1
                    group.addTask { [clock] in await Self.sleep(until: until, orUntil: alarm, on: clock) }
                }
                if let (alarm, until) = sleeping {
                    // An earlier time came up, or nothing is left to wait for: the sleep ends, to begin again.
                    if time.map({ $0 < until }) ?? (inFlight == 0) { alarm.ring() }
                } else if inFlight == 0 {
                    group.cancelAll()
                    try Task.checkCancellation()
                    return
                }
                switch try await group.next() {
                case .some(.some(let finished)):
                    taken += 1
                    await finish(finished)
                case .some(.none):
                    sleeping = nil
                case .none:
                    continue
                }
            }
        }
    }

    /// Sleeps until `time` on `clock`, `alarm` rings, or a cancel.
    static func sleep(until time: Date, orUntil alarm: Alarm, on clock: QueueClock) async -> Finished? {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await clock.sleep(time) }
            group.addTask { await alarm.wait() }
            await group.next()
            group.cancelAll()
        }
        return nil
    }

    /// The servers whose outage is under way, as their gates say: the uploads in flight to them see it first.
    var outServers: Set<Origin> {
        Set(gates.filter { $0.value.isOut }.keys)
    }

    /// Ends the run's sleep early, once.
    final class Alarm: Sendable {
        private struct Held {
            var rung = false
            var waiter: CheckedContinuation<Void, Never>?
        }
        private let held = LockedValue(Held())

        /// Waits until rung, or cancelled.
        func wait() async {
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let now = held.withLock { held -> Bool in
                        if held.rung { return true }
                        held.waiter = continuation
                        return false
                    }
                    if now { continuation.resume() }
                }
            } onCancel: {
                ring()
            }
        }

        /// Whether it rang.
        var isRung: Bool { held.withLock { $0.rung } }

        func ring() {
            let waiter = held.withLock { held -> CheckedContinuation<Void, Never>? in
                held.rung = true
                defer { held.waiter = nil }
                return held.waiter
            }
            waiter?.resume()
        }
    }
}
