import Foundation

extension QueueRecord {
    /// What a run writes of an upload's record, for one of its decisions or a fact its send reports, and the fields
    /// each writes: the one place they are said. The caller's own moves (a pause, a resume, a move) write the one
    /// field each is about.
    enum Change: Equatable {
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
            }
        }

        /// Whether the change is synced before it is taken as made. An upload's end for good, and a pause, are the
        /// caller's to rely on; a start and a completion outlive a kill, and a power cut that loses one sends the
        /// form again, under the same key, and counts it.
        var isSynced: Bool {
            switch self {
            case .failed, .paused: true
            case .started, .completed, .stopped, .sending: false
            }
        }
    }
}
