import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension MultipartUploadQueue {
    /// An upload's identity in its queue, kept in its record: the same in every process that runs the queue.
    public struct ID: Hashable, Sendable, CustomStringConvertible {
        /// The ID as text, as its record holds it.
        public let rawValue: String

        /// The ID `rawValue` says, as ``description`` printed it (a command line's, a log's).
        public init(rawValue: String) {
            self.rawValue = rawValue
        }

        /// The ID as text.
        public var description: String { rawValue }
    }

    /// An upload to add with ``MultipartUploadQueue/add(contentsOf:)``: what ``MultipartUploadQueue/add(_:with:key:again:)``
    /// takes.
    public struct NewUpload: Sendable {
        /// The form: fields, data and file parts.
        public var form: MultipartFormData
        /// The request, without credentials.
        public var request: URLRequest
        /// What identifies the upload for the caller; `nil` adds every time.
        public var key: String?
        /// Whether it is added even though the key's last upload completed or was removed.
        public var again: Bool

        /// An upload of `form` with `request`, once a `key` (and once it ended, unless `again`).
        public init(form: MultipartFormData, request: URLRequest, key: String? = nil, again: Bool = false) {
            self.form = form
            self.request = request
            self.key = key
            self.again = again
        }
    }

    /// How the upload of a key ended, once it left the queue (``MultipartUploadQueue/end(ofKey:)``).
    public enum KeyEnd: Sendable, Equatable {
        /// It completed: the server has the form. Then it was removed, or cleared by
        /// ``MultipartUploadQueue/removeCompleted()``.
        case completed
        /// It was removed before it completed.
        case removed
    }

    /// Where an upload of the queue stands; printed as one line (`completed (HTTP 201)`, `failed (reason)`).
    public enum State: Sendable, Equatable, CustomStringConvertible {
        /// Waiting for its turn.
        case pending
        /// Being sent.
        case running
        /// The network or the server failed it for now: it goes again at this time.
        case waiting(until: Date)
        /// The server has the form: its answer, kept until the upload is removed.
        case completed(Answer)
        /// The upload ended without the server's having the form (a file deleted or changed, a refused status, the
        /// server's final word), as ``Failure`` says; it can be retried or removed.
        case failed(Failure)
        /// The caller paused it (``MultipartUploadQueue/pause(_:)``): it stays so, in every process, until resumed,
        /// its saved state kept.
        case paused

        /// One line: the answer's status, not its headers and body (read them from ``Answer``).
        public var description: String {
            switch self {
            case .pending: "pending"
            case .running: "running"
            case .waiting(let until): "waiting until \(until)"
            case .completed(let answer): "completed (\(answer))"
            case .failed(let failure): "failed (\(failure))"
            case .paused: "paused"
            }
        }
    }

    /// What ``MultipartUploadQueue/remove(_:on:headers:)`` did.
    public enum Removal: Sendable, Equatable {
        /// The upload is gone before the server had its form: no byte of it goes again, and its upload resource on
        /// the server, if there was one, is deleted.
        case removed
        /// The upload is gone from the queue, and the server has its whole form, with this answer: it had completed,
        /// or completed as the remove came. Nothing was deleted on the server.
        case completed(Answer)
        /// Another process runs the queue and had not stopped the upload within 10 s, or before the remove's task
        /// was cancelled: that run removes it once it can, and starts no send of it.
        case asked
        /// The queue holds no upload of that ID.
        case notInQueue
    }

    /// The server's answer to a completed upload; printed as its status (`HTTP 201`).
    public struct Answer: Sendable, Equatable, CustomStringConvertible {
        /// An answer of `statusCode` (`nil`: lost with its connection), with its `headers` and the start of its
        /// `body`.
        public init(statusCode: Int?, headers: [String: String] = [:], body: Data = Data()) {
            self.statusCode = statusCode
            self.headers = headers
            self.body = body
        }

        /// The answer's status; `nil` when the answer was lost with its connection and the server then said it holds
        /// the whole form.
        public var statusCode: Int?
        /// The answer's header fields.
        public var headers: [String: String]
        /// The first 64 KiB of its body.
        public var body: Data

        /// Its status, or that it was lost.
        public var description: String { statusCode.map { "HTTP \($0)" } ?? "its answer lost" }
    }

    /// Why an upload failed, as the upload threw it (``MultipartStream/MultipartError``), kept across processes: in
    /// words, its kind, and the server's answer where the server refused the form, so that an app tells a form too
    /// large (413) from a credential refused (401, 403) and reads what the server said; printed as its reason.
    public struct Failure: Sendable, Equatable, CustomStringConvertible {
        /// The failure in words: a file deleted or changed, `the server answered 413`, a breach of the protocol.
        public var reason: String
        /// The kind of ``MultipartStream/MultipartError`` it was: `.status` for an answer whose status the queue does
        /// not accept (any but 2xx; 408, 429 and 5xx are waited out instead), `.file` for a file gone or changed,
        /// `.resumable` for a server that broke the protocol. `nil` for a failure of the system or the network that
        /// no later try changes (a certificate refused), or of the queue's own record.
        public var category: MultipartError.Category?
        /// The answer that refused the form
        /// (``MultipartStream/MultipartError/Reason/unacceptableStatus(statusCode:body:)``): its status, header
        /// fields and the first 64 KiB of its body. `nil` where no answer refused it.
        public var answer: Answer?

        /// A failure for `reason`, of `category`, with the refusing `answer` if any.
        public init(reason: String, category: MultipartError.Category? = nil, answer: Answer? = nil) {
            self.reason = reason
            self.category = category
            self.answer = answer
        }

        /// The status of the answer that refused the form; `nil` where none did.
        public var statusCode: Int? { answer?.statusCode }

        /// The reason.
        public var description: String { reason }
    }

    /// One upload of the queue.
    public struct Upload: Sendable, Identifiable {
        /// Its identity.
        public let id: ID
        /// The key it was added with (see ``MultipartUploadQueue/add(_:with:key:again:)``); `nil` for none.
        public var key: String?
        /// The paths of its form's file parts, in order.
        public var files: [URL]
        /// Where it stands.
        public var state: State
        /// The URL it goes to.
        public var url: URL
        /// When it was added.
        public var added: Date
        /// The form's length.
        public var contentLength: UInt64
        /// Times the form went again from its first byte after a run that had started it ended unfinished (the
        /// server forgot the upload, or does not speak the resumable draft, or took the form whole before): where it
        /// is more than 0, the server may have had the form more than once. Counted before the form goes again, so
        /// that a kill cannot hide a copy: a count may stand for a send that a kill stopped before it reached the
        /// server.
        public var sentAgain: Int
        /// The process that is sending it (its process ID), this one or another: `nil` while none is. An upload
        /// another process sends is ``State/running`` in this process's listing too.
        public var runner: Int32?
    }

    /// What happens in the queue, as ``events`` tells it.
    public enum Event: Sendable, Equatable {
        /// An upload was added.
        case added(ID)
        /// An upload started (again).
        case started(ID)
        /// An upload handed out this many of its form's bytes.
        case progress(ID, bytesSent: UInt64, of: UInt64)
        /// An upload waits for the network or the server until then.
        case waiting(ID, until: Date)
        /// An upload completed: the server has the form.
        case completed(ID, Answer)
        /// An upload failed, as ``Failure`` says.
        case failed(ID, Failure)
        /// An upload was paused, in this process or another: it stays out of every run until resumed.
        case paused(ID)
        /// A paused upload was resumed, in this process or another: it waits for its turn again.
        case resumed(ID)
        /// A failed upload was retried, in this process or another: it waits for its turn again.
        case retried(ID)
        /// An upload was moved to the front of the queue, in this process or another.
        case prioritized(ID)
        /// An upload left the queue, in this process or another: removed, or cleared once completed.
        case removed(ID)
    }
}

extension MultipartUploadQueue.Answer {
    init(_ stored: QueueRecord.Answer) {
        self.init(statusCode: stored.statusCode, headers: stored.headers, body: stored.body)
    }

    var stored: QueueRecord.Answer { .init(statusCode: statusCode, headers: headers, body: body) }
}
