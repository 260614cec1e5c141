import Foundation
import MultipartQueue
import MultipartStream

/// What `--queue DIR --run` hears of its uploads' requests: with `-v` each request and its answer, named by the
/// upload they are of (several go at once); and the bytes each upload sent, resent ones again, for `-w`.
final class QueueRunLog: @unchecked Sendable {
    // @unchecked: `sent` is guarded by `lock`; events come from the uploads' tasks.
    private let lock = Lock()
    private let verbose: Bool
    /// The run's bar, above which lines go.
    private let bar: ProgressReporter
    private var sent: [MultipartUploadQueue.ID: UInt64] = [:]

    init(verbose: Bool, bar: ProgressReporter) {
        self.verbose = verbose
        self.bar = bar
    }

    /// The bytes `id` sent in this run, resent ones again: its `%{size_upload}`.
    func bytesSent(by id: MultipartUploadQueue.ID) -> UInt64 { lock.withLock { sent[id] ?? 0 } }

    /// Takes an event of the upload `id` (``MultipartUploadQueue/uploadHeard``).
    func record(_ event: MultipartResumption.Event, of id: MultipartUploadQueue.ID?) {
        let upload = id.map { " (upload \($0.rawValue))" } ?? ""
        switch event {
        case .bodySent(let bytes):
            guard let id else { return }
            lock.withLock { sent[id, default: 0] += bytes }
        case .requestSent(let method, let url, let fields) where verbose:
            bar.printAbove(["> \(method) \(url.absoluteString)\(upload)"] + ResumableUploadLog.lines(fields, "> "))
        case .answerReceived(let status, let fields) where verbose:
            bar.printAbove(["< HTTP \(status)\(upload)"] + ResumableUploadLog.lines(fields, "< "))
        default:
            break
        }
    }
}
