import Foundation

extension QueueRecord {
    /// What a write changes of an upload's state, for one of the run's decisions, a fact its send reports, or a
    /// caller's move in any process, and the fields each writes: the one place they are said. Every write of a state
    /// is one of these (``QueueStore/update(_:syncing:)``).
    enum Change: Equatable {
        /// The caller paused it: it stays as it is, in every process, until resumed. A run sending it stops it.
        case pauseAsked
        /// The caller resumed it, or took back a pause that had not yet stopped it.
        case resumeAsked
        /// The caller moved it to `priority`, before every upload of a lower one.
        case moved(priority: Int)
        /// The caller asked for its removal where another process runs the queue: that run removes it.
        case removalAsked
        /// Its send starts, in this process, at `at`; `whole`, as one whole request: to a server that speaks no draft,
        /// or a form small enough to go in one (``MultipartResumption/singleRequestLimit``).
        case started(whole: Bool, at: Date)
        /// The server has the form, and answered so.
        case completed(Answer)
        /// The upload is over without it.
        case failed(MultipartUploadQueue.Failure)
        /// Its send stopped for the caller's pause, where it stood: its saved state is kept.
        case paused
        /// Its send ended for now (it waits, or the run was cancelled): no process runs it.
        case stopped
        /// Its send is about to send the form from its first byte where the server may have it already (`again`), or
        /// whole, at `wholeAt`: written by the send before the request goes, so that a kill after it cannot hide it.
        case sending(again: Bool, wholeAt: Date?)

        /// Whether the change leaves `state` as it stands: a start, of an upload whose removal or pause another
        /// process asked for since the run last looked.
        func declines(_ state: State) -> Bool {
            guard case .started = self else { return false }
            return state.removing == true || state.paused == true
        }

        /// Changes `state` as the decision says.
        func apply(to state: inout State) {
            switch self {
            case .started(let whole, let now):
                state.starts += 1
                state.runner = getpid()
                // The form goes whole: said before it goes, and counted where a run before started it (see
                // `MultipartUploadQueue.Notes`).
                guard whole else { return }
                state.sentWhole = now
                if state.starts > 1 { state.sentAgain += 1 }
            case .completed(let answer):
                state.outcome = .completed(answer)
                state.runner = nil
                // A pause that came as it completed has nothing left to pause.
                state.paused = nil
            case .failed(let failure):
                state.outcome = .failed(failure)
                state.runner = nil
                state.paused = nil
            case .paused:
                state.paused = true
                state.runner = nil
            case .stopped:
                state.runner = nil
            case .sending(let again, let whole):
                if again { state.sentAgain += 1 }
                if let whole { state.sentWhole = whole }
            case .pauseAsked: state.paused = true
            case .resumeAsked: state.paused = nil
            case .moved(let priority): state.priority = priority
            case .removalAsked: state.removing = true
            }
        }

        /// Whether the change is synced before it is taken as made. An upload's end for good, a pause and the
        /// caller's moves are the caller's to rely on; a start and a completion outlive a kill, and a power cut that
        /// loses one sends the form again, under the same key, and counts it.
        var isSynced: Bool {
            switch self {
            case .failed, .paused, .pauseAsked, .resumeAsked, .moved, .removalAsked: true
            case .started, .completed, .stopped, .sending: false
            }
        }
    }
}
