import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a failure means, decided here and nowhere else: the resumable protocol's retries, the queue's waits and the
/// command's `--retry` ask it, where each had worked it out on its own.
package enum FailureMeaning: Equatable, Sendable {
    /// No answer: the connection dropped, was refused or never made, timed out or stalled. A later try may meet
    /// none of it; many in a row are an outage of the server.
    case noAnswer
    /// The server answered that it is busy (``Transience/isBusy(statusCode:)``), or a resumable upload's retries ran
    /// out against its answers: try again later, no outage. The answer's status, where known.
    case busy(statusCode: Int?)
    /// URLSession would have sent the form's bytes again on a new connection by itself, which the upload refused:
    /// the connection dropped under it, and the next try counts what may go twice.
    case resendRefused
    /// The server holds the whole form, and its answer was lost with the connection: the upload is done.
    case answerLost
    /// The caller's own file, stream or form: no try changes it until the caller does.
    case local(MultipartError.Category)
    /// The server's final word (a status not busy, a breach of the protocol) or a failure no later try changes (a
    /// certificate refused, an URL that cannot be requested).
    case final
    /// The caller, or the run, cancelled it.
    case cancelled

    /// What `error` means. A resumable upload's failure after its retries means what its last try met: the
    /// server's busy answer, or no answer.
    package static func of(_ error: any Error) -> FailureMeaning {
        if error is CancellationError { return .cancelled }
        if error is StallWatch.Stalled { return .noAnswer }
        if let error = error as? URLError {
            if error.code == .cancelled { return .cancelled }
            return Transience.isTransient(error) ? .noAnswer : .final
        }
        if let answer = error as? ResumableUpload.UnexpectedAnswer {
            return answer.statusCode.map(of(statusCode:)) ?? .final
        }
        guard let error = error as? MultipartError else { return .final }
        switch error.reason {
        case .answerLost: return .answerLost
        case .appendResent: return .resendRefused
        case .unacceptableStatus(let status, _): return of(statusCode: status)
        case .resumeSaved, .resumeFailed, .resumeTimeExceeded, .outageOutlasted:
            // The retries ran out: against the server's answers (a 503, a 429: busy), or its silence.
            return lastAnswer(beneath: error).map { .busy(statusCode: $0.statusCode) } ?? .noAnswer
        default:
            switch error.category {
            case .file, .stream, .form, .output: return .local(error.category)
            case .upload, .resumable, .status: break
            }
            if let beneath = error.underlying, of(beneath) == .noAnswer { return .noAnswer }
            return .final
        }
    }

    /// An answer of the server's, with its status where known.
    private struct Answered {
        var statusCode: Int?
    }

    /// The last answer beneath `error`, if the server answered at all.
    private static func lastAnswer(beneath error: MultipartError) -> Answered? {
        var beneath = error.underlying
        while let error = beneath {
            if let answer = error as? ResumableUpload.UnexpectedAnswer {
                return Answered(statusCode: answer.statusCode)
            }
            guard let multipart = error as? MultipartError else { return nil }
            if case .unacceptableStatus(let status, _) = multipart.reason { return Answered(statusCode: status) }
            beneath = multipart.underlying
        }
        return nil
    }

    /// What an answer of `statusCode` to an upload that did not want it means: busy, or the server's final word.
    package static func of(statusCode: Int) -> FailureMeaning {
        Transience.isBusy(statusCode: statusCode) ? .busy(statusCode: statusCode) : .final
    }

    /// Whether a later try may succeed without the caller's doing anything.
    package var isTransient: Bool {
        switch self {
        case .noAnswer, .busy, .resendRefused: true
        case .answerLost, .local, .final, .cancelled: false
        }
    }
}
