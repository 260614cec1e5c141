import Foundation

/// How an upload's body reaches URLSession.
enum UploadBody: Sendable {
    /// No body: a request of the resumable-upload protocol that only asks or announces.
    case none
    /// A new ``MultipartBodyStream`` of the whole form, for every send.
    case stream
    /// A new ``MultipartBodyStream`` of these bytes of the form, for every send: one append of a resumable upload.
    case part(Range<UInt64>)
    /// The whole encoded form as the request's own body, which URLSession sends (and sends again) itself.
    case inMemory(Data)
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
        case .none, .stream, .part, .inMemory, .failed: nil
        }
    }

    /// The bytes the request carries itself, if it does.
    var bytes: Data? {
        if case .inMemory(let data) = self { return data }
        return nil
    }

    /// The body `.automatic` sends `form` with: its bytes when every part is held in memory and the whole form fits
    /// one of URLSession's reads (64 KiB), since a body stream then only adds cost (Linux URLSession spends about a
    /// tenth more per upload on one), else a stream.
    static func automatic(for form: MultipartFormData) -> UploadBody {
        let inMemory = form.bodyParts.allSatisfy { part in
            if case .bytes = part.body { return true }
            return false
        }
        if inMemory, let length = form.contentLength, length <= BufferSize.read, let bytes = try? form.encode() {
            return .inMemory(bytes)
        }
        return .stream
    }

    /// Whether URLSession reads the body itself, bytes in memory or a file (`uploadTask(with:fromFile:)`), rather
    /// than a stream of it, and so is the one that counts what was sent.
    ///
    /// A file only on Apple platforms: on Linux that path can crash the process when a task is cancelled while it
    /// reads (`try!` in swift-corelibs-foundation's `_EasyHandle`), and sends no faster, so the file is streamed there.
    var isReadByURLSession: Bool {
        if case .inMemory = self { return true }
        #if canImport(Darwin)
            if case .file = self { return true }
        #endif
        return false
    }
}
