import Foundation
import MultipartStream

/// What `-C -` says about its saved upload on stderr (resumed, started over, a state file ignored), and the state
/// file it keeps.
final class SavedUploadLog: @unchecked Sendable {
    // @unchecked: `saved` is guarded by `lock`; events come from the upload's task.
    private let lock = Lock()
    private let silent: Bool
    /// The attempt's progress, told where a saved upload resumed.
    private let progress: ProgressReporter?
    private var saved: URL?

    init(silent: Bool, progress: ProgressReporter? = nil) {
        self.silent = silent
        self.progress = progress
    }

    /// The state file, once the upload has one.
    var stateFile: URL? { lock.withLock { saved } }

    func record(_ event: MultipartResumption.Event) {
        let line: String?
        switch event {
        case .saved(let file):
            lock.withLock { saved = file }
            line = nil
        case .resumed(let offset, let length):
            progress?.resumed(at: offset)
            let percent = length == 0 ? 100 : Double(offset) * 100 / Double(length)
            line = "resuming the saved upload at byte \(offset) of \(length) (\(String(format: "%.1f", percent))%)"
        case .startedOver(.formChanged):
            line = "a file or field changed since the saved upload: starting over (the old upload is deleted)"
        case .startedOver(.uploadGone(let status)):
            line = "the server no longer has the saved upload (HTTP \(status)): starting over"
        case .startedOver(.offsetLost(let server, let saved)):
            line = "the server has \(server) bytes of the saved upload, fewer than the \(saved) it had: starting over"
        case .startedOver(.expired):
            line = "the saved upload's lifetime on the server (its max-age) has passed: starting over"
        case .stateIgnored(let file, let reason):
            line = "warning: ignoring the state file \(file.path): \(reason)"
        case .notSaved:
            line = nil
        case .removedExpired(let file):
            line = "removed the state of a saved upload whose lifetime was over: \(file.path)"
        }
        if let line, !silent { Command.printError("multipart: \(line)") }
    }
}
