import Foundation
import MultipartStream

extension Command {
    /// `--list-saved`: a line on standard output for each saved upload `-C -` would resume, oldest first, once those
    /// past their lifetime are removed. Nothing is sent, so the offset is the last one the server acknowledged: a run
    /// killed in the middle of an append had sent more, which the next run asks the server for.
    static func listSavedUploads(_ options: Options) -> ExitStatus {
        let directory = options.stateDirectoryURL
        let log = ResumableUploadLog(silent: options.silent)
        let uploads = MultipartResumption.savedUploads(in: directory, events: log.record)
        if uploads.isEmpty, !options.silent { printError("multipart: no saved uploads in \(directory.path)") }
        let now = Date()
        for upload in uploads {
            printOut(
                "\(upload.method) \(upload.url) (interop version \(upload.interopVersion)): the server last acknowledged \(upload.bytesAcknowledged) of "
                    + "\(upload.contentLength) bytes (\(ResumableUploadLog.percent(upload.bytesAcknowledged, of: upload.contentLength))) "
                    + "when last asked (a run since may have sent more), saved \(duration(now.timeIntervalSince(upload.saved))) "
                    + "ago, removed in \(duration(upload.expires.timeIntervalSince(now))); \(upload.stateFile.path)")
        }
        return .success
    }

    /// `seconds` in the largest unit that keeps it at least 1: "40 s", "12 min", "3 h", "6 d".
    private static func duration(_ seconds: TimeInterval) -> String {
        let seconds = max(0, seconds.isFinite ? seconds : 0)
        switch seconds {
        case ..<60: return "\(Int(seconds)) s"
        case ..<3_600: return "\(Int(seconds / 60)) min"
        case ..<86_400: return "\(Int(seconds / 3_600)) h"
        default: return "\(Int(seconds / 86_400)) d"
        }
    }
}
