import Foundation
import MultipartStream

/// What `-C -` says on stderr: with `-v` each request of the protocol and its answer; unless `-s`, each drop and
/// where the upload goes on from, a server that does not speak the draft, and what happens to the saved upload
/// (resumed, started over, a state file ignored). It keeps the state file and the bytes this run sent.
final class ResumableUploadLog: @unchecked Sendable {
    // @unchecked: `saved` and `sent` are guarded by `lock`; events come from the upload's task.
    private let lock = Lock()
    private let silent: Bool
    private let verbose: Bool
    /// The attempt's progress, told where a saved upload resumed, and above whose bar lines go.
    private let progress: ProgressReporter?
    private var saved: URL?
    private var sent: UInt64 = 0
    private var acknowledged: UInt64?

    init(silent: Bool, verbose: Bool = false, progress: ProgressReporter? = nil) {
        self.silent = silent
        self.verbose = verbose
        self.progress = progress
    }

    /// The state file, once the upload has one.
    var stateFile: URL? { lock.withLock { saved } }

    /// The form's bytes this run handed out, resent ones again: `%{size_upload}`.
    var bytesSent: UInt64 { lock.withLock { sent } }

    /// The bytes the server last said it has (an `Upload-Offset`, or where the upload resumed); `nil` before it said.
    var bytesAcknowledged: UInt64? { lock.withLock { acknowledged } }

    func record(_ event: MultipartResumption.Event) {
        let line: String?
        switch event {
        case .requestSent(let method, let url, let fields):
            line = nil
            if verbose { say(["> \(method) \(url.absoluteString)"] + Self.lines(fields, "> ")) }
        case .answerReceived(let status, let fields):
            line = nil
            if let offset = fields["Upload-Offset"].flatMap(UInt64.init) { lock.withLock { acknowledged = offset } }
            if verbose { say(["< HTTP \(status)"] + Self.lines(fields, "< ")) }
        case .retrying(let reason, let seconds):
            line = "\(reason); trying again in \(String(format: "%.1f", seconds)) s"
        case .continuing(let offset, let length?):
            lock.withLock { acknowledged = offset }
            line = "the server has \(offset) of \(length) bytes (\(Self.percent(offset, of: length))): resuming"
        case .continuing(let offset, nil):
            lock.withLock { acknowledged = offset }
            line = "the server has \(offset) bytes: resuming"
        case .streaming(let size):
            line = nil
            if verbose {
                say([
                    "* the server speaks the draft: streaming standard input as it is read, in appends of up to "
                        + "\(ProgressReporter.bytes(size)), with no temporary copy"
                ])
            }
        case .spooled(let length):
            line = nil
            if verbose {
                say(["* copied standard input to a temporary file to send the form with its length (\(length) bytes)"])
            }
        case .notResumable:
            line = "the server does not take resumable uploads: sending the whole form"
        case .underMinimumSize(let minSize):
            line = "the form is under the server's min-size for resumable uploads (\(minSize) bytes): sending it whole"
        case .settling(let offset):
            line = "the last run ended moments ago: the server has \(offset) bytes so far; asking again"
        case .bodySent(let bytes):
            lock.withLock { sent += bytes }
            line = nil
        case .saved(let file):
            lock.withLock { saved = file }
            line = nil
        case .resumed(let offset, let length):
            lock.withLock { acknowledged = offset }
            progress?.resumed(at: offset)
            line = "resuming the saved upload at byte \(offset) of \(length) (\(Self.percent(offset, of: length)))"
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
        if let line, !silent { say(["multipart: \(line)"]) }
    }

    /// Prints `lines` on stderr, above the progress bar when there is one.
    private func say(_ lines: [String]) {
        if let progress { progress.printAbove(lines) } else { Command.printError(lines.joined(separator: "\n")) }
    }

    /// `part` of `whole` as a percentage to a tenth: "50.0%"; all of nothing is 100%.
    static func percent(_ part: UInt64, of whole: UInt64) -> String {
        String(format: "%.1f%%", whole == 0 ? 100 : Double(part) * 100 / Double(whole))
    }

    /// The header lines of `fields`, sorted, each after `prefix`, credentials hidden.
    static func lines(_ fields: [String: String], _ prefix: String) -> [String] {
        fields.sorted { $0.key < $1.key }.map { "\(prefix)\($0.key): \(Redaction.header($0.key, value: $0.value))" }
    }
}
