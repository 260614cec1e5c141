import Foundation

/// The waits of uploads to one server through an outage (no answer: a dropped or refused connection, a timeout),
/// shared: the first upload to fail probes the server at its own pace, and those that fail meanwhile wait for it
/// rather than each probing on its own. The server's first answer, whatever its status, ends the outage and releases
/// them all; a prober that ends hands the probe to one of them. A busy server's answer (a 503) is each upload's own to
/// wait out, and does not pass through here.
package final class OutageGate: Sendable {
    private struct State {
        /// Whether an upload failed and none has been answered since.
        var isOut = false
        /// The pass whose upload probes the server.
        var prober: Int?
        /// The uploads that wait for the prober, in the order they came.
        var parked: [(wait: Int, continuation: CheckedContinuation<Void, Never>)] = []
        /// Waits released before they parked (cancelled, or their bound passed, as they came).
        var released: Set<Int> = []
        var nextNumber = 0

        mutating func number() -> Int {
            nextNumber += 1
            return nextNumber
        }

        mutating func takeParked() -> [CheckedContinuation<Void, Never>] {
            defer { parked.removeAll() }
            return parked.map(\.continuation)
        }
    }

    private let state = LockedValue(State())
    /// Told when an outage ends.
    private let ended: @Sendable () -> Void

    package init(ended: @escaping @Sendable () -> Void = {}) {
        self.ended = ended
    }

    /// Whether an upload failed and none has been answered since.
    package var isOut: Bool { state.withLock { $0.isOut } }

    /// How many uploads wait for the prober.
    var parked: Int { state.withLock { $0.parked.count } }

    /// A place at the gate for one upload.
    package func pass() -> Pass {
        Pass(gate: self, number: state.withLock { $0.number() })
    }

    /// Marks an outage that ended an upload: none is under way to probe it.
    package func markOut() {
        state.withLock { $0.isOut = true }
    }

    /// The server answered: the outage is over, and every waiting upload goes on.
    package func answered() {
        let (wasOut, parked) = state.withLock { state in
            defer { (state.isOut, state.prober) = (false, nil) }
            return (state.isOut, state.takeParked())
        }
        for continuation in parked { continuation.resume() }
        if wasOut { ended() }
    }

    /// One upload's place at the gate.
    package final class Pass: Sendable {
        let gate: OutageGate
        let number: Int

        fileprivate init(gate: OutageGate, number: Int) {
            self.gate = gate
            self.number = number
        }

        /// The wait before the upload's next try, `seconds` as its own policy says: the prober waits that long, every
        /// other upload until the outage ends, the probe is handed to it, or `limit` seconds pass (its own bound on
        /// the outage). A cancel ends the wait at once.
        func wait(seconds: Double, atMost limit: Double?) async {
            let probes = gate.state.withLock { state in
                state.isOut = true
                if state.prober == nil { state.prober = number }
                return state.prober == number
            }
            if probes {
                try? await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1e9))
            } else {
                await gate.park(until: limit)
            }
        }

        /// A request of the upload was answered, whatever the status: the server is reachable again.
        func answered() {
            gate.answered()
        }

        /// The upload ended: a probe it held goes to the first upload waiting.
        package func leave() {
            let next = gate.state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard state.prober == number else { return nil }
                state.prober = nil
                return state.parked.isEmpty ? nil : state.parked.removeFirst().continuation
            }
            next?.resume()
        }
    }

    /// Waits until released, cancelled, or `limit` seconds pass.
    private func park(until limit: Double?) async {
        let wait = state.withLock { $0.number() }
        let timer = limit.map { limit in
            Task { [weak self] in
                try? await Task.sleep(nanoseconds: UInt64(max(0, limit) * 1e9))
                self?.release(wait)
            }
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    if state.released.remove(wait) != nil || !state.isOut || state.prober == nil { return true }
                    state.parked.append((wait, continuation))
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            release(wait)
        }
        timer?.cancel()
    }

    /// Ends one parked wait, or the wait that has yet to park.
    private func release(_ wait: Int) {
        let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let at = state.parked.firstIndex(where: { $0.wait == wait }) else {
                state.released.insert(wait)
                return nil
            }
            return state.parked.remove(at: at).continuation
        }
        continuation?.resume()
    }
}
