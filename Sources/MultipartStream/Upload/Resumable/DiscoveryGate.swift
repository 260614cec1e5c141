import Foundation

/// What a server speaks, asked once for the uploads to it that start together: the first upload to a server nobody
/// has asked asks it (an `OPTIONS` in each version, five for a server that speaks none), and those that start
/// meanwhile wait for what it finds rather than each asking the same questions. An asker that ends without finding
/// out (a failure, a cancel) lets every upload that waits ask on its own, as it would have: a server out of reach is
/// then probed by one of them at a time through their ``OutageGate``, and none waits out another's retries before its
/// own. A queue keeps one for each origin; the uploads no queue gathers share their process's (``forProcess(of:)``),
/// which a queue's uploads tell what they find too, and read where a form goes in one request and the queue knows
/// nothing.
package final class DiscoveryGate: Sendable {
    /// What an upload goes on with.
    package enum Finding: Equatable, Sendable {
        /// Nobody knows, and nobody else asks: this upload asks.
        case ask
        /// The server speaks the draft, in this version and with these limits.
        case speaks(ResumableUpload.KnownServer)
        /// The server speaks no version of the draft: the form goes whole.
        case speaksNone
    }

    private struct State {
        /// What the last upload to find out found.
        var found: Finding?
        /// When, on ``clock``.
        var foundAt: UInt64 = 0
        /// The turn of the upload that asks, while one does.
        var asker: Int?
        /// The uploads that wait for the asker, in the order they came.
        var waiting: [(turn: Int, continuation: CheckedContinuation<Finding, Never>)] = []
        /// Turns taken whose wait has not begun, and those of them cancelled meanwhile.
        var taken: Set<Int> = []
        var cancelled: Set<Int> = []
        var lastTurn = 0
    }

    private let state = LockedValue(State())
    /// How long a finding of none holds, in nanoseconds; `nil` for as long as the gate.
    private let speaksNoneFor: UInt64?
    private let clock: @Sendable () -> UInt64

    /// A gate whose finding that the server speaks none holds for `speaksNoneFor` seconds on `clock` (nanoseconds),
    /// then the server is asked again, in case it took up the draft since; `nil` keeps it as long as the gate.
    package init(
        speaksNoneFor: TimeInterval? = nil,
        clock: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }
    ) {
        self.speaksNoneFor = speaksNoneFor.map { UInt64(clamping: Int64(($0 * 1e9).rounded())) }
        self.clock = clock
    }

    /// What was found, if it still holds: what an upload that waits for nobody (one that asks nothing first) may go
    /// on with.
    var known: Finding? {
        state.withLock { current(&$0) }
    }

    /// What `state` holds as found now, forgetting a finding of none past its time.
    private func current(_ state: inout State) -> Finding? {
        if state.found == .speaksNone, let speaksNoneFor,
            clock().subtractingSaturated(state.foundAt) >= speaksNoneFor
        {
            state.found = nil
        }
        return state.found
    }

    /// A turn at the gate, for one upload.
    func turn() -> Int {
        state.withLock { state in
            state.lastTurn += 1
            state.taken.insert(state.lastTurn)
            return state.lastTurn
        }
    }

    /// What the upload of `turn` goes on with: what was found, or ``Finding/ask`` where nobody asks now, and it asks
    /// (saying what it finds, ``found(_:)``, and leaving, ``leave(_:)``). Otherwise it waits for the asker; a cancel
    /// ends the wait at once with ``Finding/ask``, which a cancelled upload never sends.
    func finding(for turn: Int) async -> Finding {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Finding, Never>) in
                let now = state.withLock { state -> Finding? in
                    state.taken.remove(turn)
                    if state.cancelled.remove(turn) != nil { return .ask }
                    if let found = current(&state) { return found }
                    guard state.asker != nil else {
                        state.asker = turn
                        return .ask
                    }
                    state.waiting.append((turn, continuation))
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiting = state.withLock { state -> CheckedContinuation<Finding, Never>? in
                guard let index = state.waiting.firstIndex(where: { $0.turn == turn }) else {
                    // Cancelled before its wait began: it begins and ends at once.
                    if state.taken.contains(turn) { state.cancelled.insert(turn) }
                    return nil
                }
                return state.waiting.remove(at: index).continuation
            }
            waiting?.resume(returning: .ask)
        }
    }

    /// What an upload found the server to speak, said by whoever finds out (the asker, an upload that asked again
    /// after the server refused a creation made on an earlier finding, or to the process's gate a queue's upload, which
    /// holds no turn there): every upload that waits goes on with it, and every later one. An asker whose question was
    /// answered so meanwhile leaves without releasing anyone (``leave(_:)``), and what it finds replaces this.
    func found(_ finding: Finding) {
        guard finding != .ask else { return }
        let waiting = state.withLock { state -> [CheckedContinuation<Finding, Never>] in
            defer { state.waiting.removeAll() }
            (state.found, state.foundAt, state.asker) = (finding, clock(), nil)
            return state.waiting.map(\.continuation)
        }
        for continuation in waiting { continuation.resume(returning: finding) }
    }

    /// The upload of `turn` ended: if it asked and found nothing, every upload that waits asks on its own now.
    func leave(_ turn: Int) {
        let released = state.withLock { state -> [CheckedContinuation<Finding, Never>] in
            state.taken.remove(turn)
            state.cancelled.remove(turn)
            guard state.asker == turn else { return [] }
            state.asker = nil
            defer { state.waiting.removeAll() }
            return state.waiting.map(\.continuation)
        }
        for continuation in released { continuation.resume(returning: .ask) }
    }

    /// Whether an upload holds a turn at the gate: it asks, waits, or is about to.
    var isAsked: Bool {
        state.withLock { $0.asker != nil || !$0.waiting.isEmpty || !$0.taken.isEmpty }
    }

    /// How many uploads wait for the asker.
    var waiting: Int { state.withLock { $0.waiting.count } }
}
