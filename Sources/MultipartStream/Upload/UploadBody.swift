import Foundation

/// How an upload's body reaches URLSession.
enum UploadBody: Sendable {
    /// No body: a request of the resumable-upload protocol that only asks or announces.
    case none
    /// A new ``MultipartBodyStream`` of the form, from byte `offset` on, for every send.
    case stream(startingAt: UInt64)
    /// The encoded body in a temporary file of the upload's own, written before the task was made.
    case file(URL)
    /// A temporary file to write when the task first asks for its body: a task handed to the caller may never be
    /// resumed, and must then leave no file behind.
    case fileToWrite(URL)
    /// The temporary file could not be written: every send fails, and the upload fails with this error.
    case failed(MultipartError)

    /// Whether the request carries bytes of the form.
    var carriesForm: Bool {
        if case .none = self { return false }
        return true
    }

    /// The temporary file the upload removes when it ends, if it has one.
    var temporaryFile: URL? {
        switch self {
        case .file(let url), .fileToWrite(let url): url
        case .none, .stream, .failed: nil
        }
    }

    /// Whether URLSession reads the body file itself (`uploadTask(with:fromFile:)`) rather than a stream of it.
    ///
    /// Only on Apple platforms: on Linux that path can crash the process when a task is cancelled while it reads
    /// (`try!` in swift-corelibs-foundation's `_EasyHandle`), and sends no faster, so the file is streamed there.
    var isReadByURLSession: Bool {
        #if canImport(Darwin)
            if case .file = self { return true }
        #endif
        return false
    }
}
