import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UploadRequest {
    /// What this layer needs to send a part of the form for a protocol above it (a resumable upload's append),
    /// given as values by that protocol, which this layer knows nothing of.
    struct PartFraming: Sendable {
        /// The part's `Content-Type`.
        var contentType: String
        /// Whether a success that came before the part's last byte was handed out is an answer all the same: the
        /// server saying it kept part of it.
        var takesEarlySuccess: @Sendable (HTTPURLResponse) -> Bool
    }

    /// What one upload sends, and so how it may send it: the facts every decision of its ``StateMachine`` starts
    /// from.
    enum Role: Sendable {
        /// The whole form, on tasks the upload makes and owns (the async API): it sends the form again itself
        /// after a 307 or 308, and streams through a data task, whose every 64 KiB Linux URLSession does not report
        /// to the delegate queue as it does an upload task's. The body is `.stream` or a `.file`
        /// already written. `once`, for a resumable upload's fallback to a server without the draft: the form goes
        /// once, as an append does, since libcurl resends a request by itself on a reused connection that died, and a
        /// server that had processed the form would get it twice with no one knowing: that resend fails the request
        /// instead, and the resumable upload's caller (a queue) sends it again, counting it. Unlike an append it keeps
        /// the session's connections: a connection of its own would cost a session a form.
        case wholeForm(UploadBody, once: Bool = false)
        /// The whole form, on the one upload task handed to the caller, which may never resume it. The body is
        /// `.stream` or a `.fileToWrite` when the task first asks for it.
        case callerTask(UploadBody)
        /// A request of the resumable-upload protocol to the caller's URL that carries no body of the form
        /// (`OPTIONS`, the creation), sent as it is.
        case protocolRequest
        /// A request to the upload resource that carries no body of the form (`HEAD`, `DELETE`), sent as it is.
        case resourceRequest
        /// One append of a resumable upload: the form's bytes from `from` up to `upTo`, sent once, since the server
        /// counts what arrives; on a connection of its own, since libcurl resends a request by itself on a reused
        /// one that died. How it is framed comes from the protocol that sends it, as values.
        case append(from: UInt64, upTo: UInt64, PartFraming)

        /// Whether `response`, a success that came before the whole body was handed out, is an answer all the same:
        /// to an append, where its framing says the server kept part of it, which the protocol goes on from.
        func takesEarlySuccess(_ response: HTTPURLResponse) -> Bool {
            guard case .append(_, _, let framing) = self else { return false }
            return framing.takesEarlySuccess(response)
        }

        /// The `Content-Type` of the request's body: the form's, or a part's own.
        func contentType(ofForm form: String) -> String {
            guard case .append(_, _, let framing) = self else { return form }
            return framing.contentType
        }

        /// The body the role starts with.
        var body: UploadBody {
            switch self {
            case .wholeForm(let body, _), .callerTask(let body): body
            case .protocolRequest, .resourceRequest: .none
            case .append(let offset, let end, _): .part(offset..<max(offset, end))
            }
        }

        /// Whether a redirect goes to the caller's delegate and the redirect policy; otherwise the 3xx is the
        /// answer: an append's, which the resumable upload's machine decides on (the upload resource moved, or the
        /// upload ends), as it does for `HEAD` and `DELETE`.
        var followsRedirects: Bool {
            switch self {
            case .wholeForm, .callerTask, .protocolRequest: true
            case .resourceRequest, .append: false
            }
        }

        /// Whether the upload makes its tasks and may replace them.
        var ownsTask: Bool {
            if case .callerTask = self { return false }
            return true
        }

        /// Whether the request goes on a connection of its own (a session that carries it alone): an append, which
        /// libcurl would otherwise resend by itself on a reused connection that died.
        var ownsConnection: Bool {
            if case .append = self { return true }
            return false
        }

        /// Whether each body goes out once only: a resend URLSession starts by itself fails the request.
        var sendsBodyOnce: Bool {
            switch self {
            case .append, .wholeForm(_, once: true): true
            default: false
            }
        }

        /// Whether the upload's end ends its progress: only a task handed to the caller, which is the whole upload.
        /// Not one request of a whole form, which a 401 may send again, nor of a resumable upload: their drivers end
        /// the progress when they return.
        var finishesProgress: Bool {
            switch self {
            case .callerTask: true
            case .wholeForm, .protocolRequest, .resourceRequest, .append: false
            }
        }
    }
}
