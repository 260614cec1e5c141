import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A way to send a form, for tests that hold a promise to every path: `upload` with each strategy (resumable to a
/// server without the draft, which falls back to the whole form), a task, and the streamed delegate.
enum UploadPath: CaseIterable, CustomStringConvertible {
    case automatic, stream, file, task, streamedDelegate, resumableToAPlainServer

    var description: String {
        switch self {
        case .automatic: "upload .automatic"
        case .stream: "upload .stream"
        case .file: "upload .file"
        case .task: "multipartUploadTask"
        case .streamedDelegate: "MultipartStreamedUploadDelegate"
        case .resumableToAPlainServer: "upload .resumable to a server without the draft"
        }
    }

    /// The strategy of an `upload` path; `.automatic` for the others.
    var strategy: MultipartUploadStrategy {
        switch self {
        case .stream: .stream
        case .file: .file
        case .resumableToAPlainServer: .resumable(MultipartResumption(maximumAttempts: 0))
        case .automatic, .task, .streamedDelegate: .automatic
        }
    }

    /// Whether the path is `upload`'s.
    var isUpload: Bool { self != .task && self != .streamedDelegate }
}
