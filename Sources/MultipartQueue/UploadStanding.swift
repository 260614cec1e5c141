import Foundation
import MultipartStream

/// Where an upload stands, in the one vocabulary the queue has for it: its record's state makes it, its row's
/// `standing` column holds it as text, the schedule takes it in as one of its states, and the public
/// ``MultipartUploadQueue/State`` is the schedule's state with what the row says beside. Each of those readings is
/// here, and only here.
enum UploadStanding: Equatable, Sendable {
    case pending, paused, completed
    /// Another process asked for its removal while this one ran the queue.
    case removing
    case failed(reason: String)

    /// Where an upload in `state` stands: a removal asked for first, then its end, then a pause.
    init(_ state: QueueRecord.State) {
        self =
            switch state.outcome {
            case _ where state.removing == true: .removing
            case .completed?: .completed
            case .failed(let failure)?: .failed(reason: failure.reason)
            case nil: state.paused == true ? .paused : .pending
            }
    }

    /// Its text in the `standing` column, which listings and indexes read.
    var column: String {
        switch self {
        case .pending: "pending"
        case .paused: "paused"
        case .completed: "completed"
        case .removing: "removing"
        case .failed: "failed"
        }
    }

    /// The standing a `standing` column's text says, with a failure's `reason` from its own column; `nil` for text
    /// this version does not write.
    init?(column: String, reason: String?) {
        switch column {
        case "pending": self = .pending
        case "paused": self = .paused
        case "completed": self = .completed
        case "removing": self = .removing
        case "failed": self = .failed(reason: reason ?? "")
        default: return nil
        }
    }

    /// The schedule's state of an upload that stands so as a queue opens or hears of it.
    var scheduled: QueueSchedule.State {
        switch self {
        // One whose removal another process asked for is removed as the run starts it.
        case .pending, .removing: .pending
        case .paused: .paused
        case .completed: .completed
        case .failed(let reason): .failed(reason: reason)
        }
    }
}

extension QueueSchedule.State {
    /// The state a caller reads, with what the upload's row says beside: the process sending it (another process's
    /// send shows a pending upload as running), and a completion's or a failure's answer and kind.
    func published(runner: Int32?, listing: QueueStore.Listing?) -> MultipartUploadQueue.State {
        switch self {
        case .pending where runner != nil: .running
        case .pending: .pending
        case .running: .running
        case .waiting(let until): .waiting(until: until)
        case .paused: .paused
        case .failed(let reason):
            .failed(
                MultipartUploadQueue.Failure(
                    reason: reason, category: listing?.category,
                    answer: listing?.answer.map(MultipartUploadQueue.Answer.init)))
        case .completed:
            .completed(
                listing?.answer.map(MultipartUploadQueue.Answer.init) ?? MultipartUploadQueue.Answer(statusCode: nil))
        }
    }
}
