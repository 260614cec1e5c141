import Foundation

/// Why a form could not be built, encoded, streamed or uploaded, and which part was at fault.
///
/// Match ``reason`` for the exact cause, or ``category`` for the kind of problem; both may gain cases in a later
/// version, so a `switch` over either needs an `@unknown default`. ``underlying`` keeps the error beneath, when
/// another library's failure (a stream's, an encoder's, URLSession's) caused this one.
public struct MultipartError: Error, CustomStringConvertible, LocalizedError {
    /// The part at fault: its zero-based index, and its field name when it has one.
    public struct Part: Sendable, Equatable {
        /// The zero-based index of the part in the form.
        public var index: Int
        /// The part's field name, when it has one.
        public var name: String?

        /// Creates a part reference.
        public init(index: Int, name: String?) {
            self.index = index
            self.name = name
        }
    }

    /// The part at fault, or `nil` when the form as a whole is (its boundary, an output file) or the upload is.
    public var part: Part?
    /// What went wrong.
    public var reason: Reason
    /// The error that caused this one, when there is one: a caller stream's, an encoder's, or the connection's a
    /// resumable upload gave up on.
    public var underlying: (any Error)? {
        if let storedUnderlying { return storedUnderlying }
        switch reason {
        case .jsonEncodingFailed(let error), .streamFactoryFailed(let error): return error
        case .streamFailed(let error): return error
        default: return nil
        }
    }
    private var storedUnderlying: (any Error)?
    /// The server's response (an `HTTPURLResponse`), where the error is about one: kept untyped here, since the form
    /// knows no transport; `MultipartStream` shows it as `response`.
    package var serverResponse: (any Sendable)?

    /// The kind of problem: what the caller may do about it.
    public var category: Category { reason.category }

    /// Creates an error for `part`, caused by `underlying` if given.
    public init(_ reason: Reason, part: Part? = nil, underlying: (any Error)? = nil) {
        self.reason = reason
        self.part = part
        storedUnderlying = underlying
    }

    /// Creates an error for the part at `partIndex` named `partName`.
    package init(_ reason: Reason, partIndex: Int?, partName: String? = nil) {
        self.init(reason, part: partIndex.map { Part(index: $0, name: partName) })
    }

    /// The kinds of problem, each with its own remedy.
    #if hasAttribute(nonexhaustive)
        @nonexhaustive
    #endif
    public enum Category: Sendable, Equatable {
        /// A file part: missing, unreadable, not a regular file, or changed since it was appended.
        case file
        /// The form as built: a boundary, name, header value or MIME type that cannot be sent, or a body too long.
        case form
        /// A body stream or chunk sequence: a caller's stream that failed or lied about its length, or a body
        /// read in a way it cannot be (reopened with a one-shot part, started past its end).
        case stream
        /// An upload: a server's answer or redirect the upload cannot honour, or a session it cannot use.
        case upload
        /// A resumable upload: the server refused, lost or expired it, broke the protocol, or the retries ran out.
        case resumable
        /// The server's answer had a status the upload does not accept (its `acceptableStatusCodes`).
        case status
        /// An encoded copy of the body: a file that exists or cannot be written, or too much for memory.
        case output
    }

    /// The reasons a form fails, at append time, while it streams, or while it uploads.
    #if hasAttribute(nonexhaustive)
        @nonexhaustive
    #endif
    public enum Reason: Error, Sendable {
        // Found while appending.

        /// The URL given for a file part is not a `file:` URL.
        case notAFileURL(URL)
        /// Nothing exists at the file part's path.
        case fileNotFound(URL)
        /// The file part's path names a directory.
        case isDirectory(URL)
        /// The path is not a regular file (a FIFO, socket or device), so its length cannot be known up front.
        case fileSizeUnavailable(URL)
        /// The file could not be opened for reading; `errno` says why.
        case fileUnreadable(URL, errno: Int32)
        /// The boundary is not 1 to 70 characters of RFC 2046 `bchars`, or ends in a space.
        case invalidBoundary(String)
        /// The `multipart/` subtype is empty or holds a character outside RFC 9110's `token`.
        case invalidSubtype(String)
        /// The `JSONEncoder` of a JSON part threw this error.
        case jsonEncodingFailed(any Error)
        /// A custom header name is empty or holds a character outside RFC 9110's `token`.
        case invalidHeaderName(String)
        /// A header value holds CR, LF or another control character, which would forge headers.
        case invalidHeaderValue(name: String, value: String)
        /// A MIME type is empty or holds CR, LF or another control character.
        case invalidMIMEType(String)
        /// The part's `partLength` bytes would make the body longer than a `Content-Length` can say (2^63 − 1).
        case bodyTooLong(partLength: UInt64)
        /// The part's headers or in-memory body hold the text of the boundary you chose: it could end the part early,
        /// and Node's parser rejects such a form. Choose another boundary, or let the form draw a random one.
        case boundaryInPart(String)

        // Found while streaming.

        /// The file was removed after it was appended.
        case fileVanished(URL)
        /// The file's length differs from the one recorded when it was appended.
        case fileSizeChanged(URL, expected: UInt64, actual: UInt64)
        /// The file has its appended length but is not the file appended: replaced (renamed over, or a link put in
        /// its place) or modified since. Seen from its device, inode, and modification and change times, so a
        /// change within one tick of the file system's clock of the previous one goes unseen. A `chmod` or `chown`
        /// moves the change time too, and fails the part: the change time is what catches a same-length rewrite
        /// whose writer put the old modification time back, and it cannot tell that from a change of permissions.
        case fileChanged(URL)
        /// Reading the file failed; `errno` says why.
        case fileReadFailed(URL, errno: Int32)
        /// The part's stream ended after `received` of its declared `expected` bytes.
        case streamEndedEarly(expected: UInt64, received: UInt64)
        /// The part's stream still had bytes after its declared `length`.
        case streamLongerThanDeclared(length: UInt64)
        /// The part's stream failed to open or read; the stream's own error, when it gave one.
        case streamFailed((any Error)?)
        /// The closure that makes the part's stream threw.
        case streamFactoryFailed(any Error)
        /// The part's one-shot `InputStream` was already read by another body stream or encode of this form.
        case streamAlreadyConsumed
        /// `read` was called on a body stream that is not open (never opened, or closed).
        case streamNotOpen
        /// `read` was called with a negative `maxLength`.
        case invalidReadLength(Int)
        /// The body stream was opened again after it handed out bytes, and a one-shot `InputStream` part cannot be
        /// read twice.
        case notReplayable
        /// A body was asked to start at byte `offset`, past its `contentLength`.
        case offsetPastEnd(offset: UInt64, contentLength: UInt64)
        /// A body was asked to start at byte `offset`, inside or after this one-shot `InputStream` part, whose
        /// earlier bytes cannot be read again: append it with a stream factory to make it resumable.
        case cannotResumeOneShotStream(offset: UInt64)
        /// A ``MultipartFilledChunks`` chunk of `size` bytes came back with nothing written: its maker returned
        /// without calling `fill`, or gave it no room.
        case chunkNotFilled(size: Int)

        // Found while uploading.

        /// The server redirected with 307 or 308, which must resend the body, where Linux URLSession would send an
        /// empty body and the upload cannot send it again itself (another origin, or a task handed to the caller).
        case redirectNotFollowed(statusCode: Int, location: URL?)
        /// The server answered `statusCode`, which is not among the upload's `acceptableStatusCodes`; `body` is its
        /// answer's body, its first 64 KiB at most (the rest is neither kept nor waited for), and
        /// ``MultipartError/response`` the response.
        case unacceptableStatus(statusCode: Int, body: Data)
        /// The server's answer (`statusCode`) has a body longer than the `limit` bytes the upload may hold in memory
        /// (its `responseBody`, 16 MiB unless raised): the upload stopped reading it, and ``MultipartError/response``
        /// is the response. Raise the bound, or take the body as it arrives, to a file or in chunks.
        case responseTooLarge(statusCode: Int, limit: Int)
        /// `upload` was given a background session, which only uploads from a file through its delegate.
        case backgroundSession
        /// The server answered `statusCode` (a success) when only `bytesSent` of the body's `contentLength` bytes
        /// (`nil` while a stream's length is unknown) had been handed to it: it answered without reading the form,
        /// which it cannot have received.
        case answeredBeforeBodySent(statusCode: Int, bytesSent: UInt64, contentLength: UInt64?)
        /// This part is a stream of unknown length, appended with `whenLengthIsNeeded: .fail`, and the upload needs
        /// the form's length before its first byte (a strategy other than `.resumable`, a server that does not speak
        /// the resumable-upload draft, or a task from `multipartUploadTask`): nothing of it was read or sent.
        case lengthUnknown
        /// A resumable upload gave up after `retries` retries, the server having `bytesAcknowledged` of the form's
        /// `contentLength` bytes (`nil` while a stream's length is unknown); ``MultipartError/underlying`` is the
        /// last failure.
        case resumeFailed(retries: Int, bytesAcknowledged: UInt64, contentLength: UInt64?)
        /// A resumable upload whose state is saved (``MultipartResumption/stateDirectory``) stopped after `retries`
        /// retries (spent, or after a failure no retry mends that is not the form's), the server having
        /// `bytesAcknowledged` of the form's `contentLength` bytes; the server keeps the upload and the state stays,
        /// so the same upload run again resumes it at that offset. ``MultipartError/underlying`` is the last failure.
        case resumeSaved(retries: Int, bytesAcknowledged: UInt64, contentLength: UInt64)
        /// URLSession sent a part of a resumable upload again by itself (a reused connection died under it), which
        /// the server would take for a conflict: that request fails, and the upload asks the server where it stands.
        /// The same for the whole form that a resumable upload sends to a server without the draft, which the server
        /// could get twice.
        case appendResent
        /// The server said it resumes uploads, then answered the request that creates one (`statusCode`) as a plain
        /// request, without an upload to resume.
        case resumptionRefused(statusCode: Int)
        /// The resumable upload expired on the server (`statusCode`, 404 or 410) twice: once it was created again from
        /// the first byte, and it expired again.
        case uploadExpired(statusCode: Int)
        /// The server has every byte of the form, but its answer was lost with the connection that carried them.
        /// The upload is left on the server: it is never deleted once the server said it holds the whole form.
        case answerLost(contentLength: UInt64)
        /// The server's `Upload-Limit` takes forms of at most `maxSize` bytes, and this one has `contentLength`:
        /// nothing of it was sent.
        case formOverUploadLimit(maxSize: UInt64, contentLength: UInt64)
        /// The server said it has `offset` bytes of the form where only `allowed` can be true (never fewer than it
        /// acknowledged before, nor more than was sent): the upload was deleted rather than continued from there.
        case offsetOutOfRange(offset: UInt64, allowed: ClosedRange<UInt64>)
        /// The server asked for a form of unknown length from byte `offset`, which the upload no longer holds: it
        /// keeps a stream's bytes only from `bufferStart`, what the server had acknowledged. The upload was deleted
        /// rather than sent with a gap.
        case offsetNotBuffered(offset: UInt64, bufferStart: UInt64)
        /// The server called an upload of unknown length complete after `bytesSent` bytes, before the stream's end
        /// had been sent. The upload it calls complete is not deleted.
        case completedBeforeEnd(bytesSent: UInt64)
        /// The server called the upload complete (at `offset`, or naming none) when the client had handed out
        /// `bytesSent` of the form's `contentLength` bytes and not yet its last with `Upload-Complete: ?1`: it cannot
        /// have the whole form, and its answer is not taken as the application's. The upload it calls complete is
        /// not deleted.
        case completionClaimedEarly(offset: UInt64?, bytesSent: UInt64, contentLength: UInt64?)
        /// The server put the upload at a URL that cannot be requested (`url`, cut to 200 characters), for `flaw`:
        /// another scheme than http or https, no host, a user or password in it, a length past 8,192 bytes, or
        /// `https:` on the host and port that answered the request in plain HTTP.
        /// Nothing of the form went there, and nothing was saved.
        case unusableUploadLocation(String, flaw: String)
        /// The server's `Upload-Length` is not the form's: it holds another upload.
        case uploadLengthMismatch(serverLength: UInt64, contentLength: UInt64)
        /// The server put the upload at a plain `http:` URL for an `https:` request.
        case insecureUploadLocation(URL)
        /// The server answered an append or a `HEAD` with `statusCode`, a success, and no `Upload-Complete` (or one
        /// that is no boolean), which its interop version (7 or later) requires: that answer says neither that the
        /// form reached the application nor that it did not, so the upload is never taken as complete. After an
        /// append the upload is deleted; after a `HEAD`, which said the server may hold it whole, nothing is deleted,
        /// and a saved upload is kept, resource and state, for a later run to ask again.
        case uploadCompleteMissing(statusCode: Int)
        /// The server answered a `HEAD` with `Upload-Complete: ?1` at `Upload-Offset` `offset`, short of the form's
        /// `contentLength` bytes (`nil`: a stream whose end the client had not reached): a complete upload holds every
        /// byte, so that answer says neither that the form reached the application nor that it did not, and the
        /// upload is never taken as complete. Nothing is deleted, and a saved upload is kept, resource and state, for a
        /// later run to ask again.
        case completeAtShortOffset(offset: UInt64, contentLength: UInt64?)
        /// The server's `Upload-Limit` asks for appends of at least `minAppendSize` bytes and at most
        /// `maxAppendSize`, which no append can keep.
        case appendLimitsConflict(minAppendSize: UInt64, maxAppendSize: UInt64)
        /// Another process is sending the upload saved in this state file: two never append to one upload at once.
        case uploadInProgress(URL)
        /// The saved upload's state cannot be kept at this path (the directory or a file in it); `errno` says why.
        /// Nothing was sent.
        case stateUnwritable(URL, errno: Int32)
        /// A resumable upload gave up after `seconds`, the total time ``MultipartResumption/maximumDuration`` allows.
        case resumeTimeExceeded(seconds: Double, bytesAcknowledged: UInt64, contentLength: UInt64?)
        /// Another process runs the upload queue kept in this directory (or this one runs it already): two never run
        /// one queue at once.
        case queueInUse(URL)
        /// The upload queue kept in this directory cannot be opened, for `reason`: its database is damaged or open to
        /// others, or the directory holds an earlier layout of the queue (a file a record), which this version does
        /// not read. Nothing in it was changed.
        case queueUnreadable(URL, reason: String)
        /// A request given to an upload queue carries a credential (`Authorization`, `Cookie`,
        /// `Proxy-Authorization`, or a user and password in its URL, as named), which a queue never writes to disk:
        /// give it through the `headers` hook of the queue's `run` instead.
        case credentialNotQueued(String)
        /// A stream part cannot outlive the process: an upload queue takes fields, data and file parts only.
        case streamNotQueued
        /// A resumable upload made no progress for `seconds` of failures and waits (an outage), the most
        /// ``MultipartResumption/maximumWaitWithoutProgress`` allows: not the server's word, so an upload whose state
        /// is saved keeps it and its upload resource, for a later run to resume.
        case outageOutlasted(seconds: Double, bytesAcknowledged: UInt64, contentLength: UInt64?)

        // Found while encoding.

        /// The body is larger than fits in memory as one `Data`.
        case tooLargeForMemory(UInt64)
        /// `writeEncodedData(to:)` will not replace an existing file.
        case outputFileExists(URL)
        /// Creating or writing the output file failed; `errno` says why.
        case outputWriteFailed(URL, errno: Int32)
    }

    /// A sentence naming the part and the reason, and the underlying error where the reason does not already.
    public var description: String {
        let subject: String
        switch (part?.index, part?.name) {
        case (let index?, let name?): subject = "part \(index) (\"\(name)\")"
        case (let index?, nil): subject = "part \(index)"
        // Said under the error's category, so that a refused status does not read as a fault of the form.
        default:
            switch category {
            case .file, .form, .stream: subject = "form"
            case .upload: subject = "upload"
            case .resumable: subject = "resumable upload"
            case .status: subject = "response"
            case .output: subject = "output"
            }
        }
        guard let storedUnderlying else { return "\(subject): \(reason)" }
        return "\(subject): \(reason): \(storedUnderlying.localizedDescription)"
    }

    /// The same text as ``description``, so `localizedDescription` names the part and reason.
    public var errorDescription: String? { description }
}

extension MultipartError.Reason: CustomStringConvertible {
    /// The reason in words, without the part: "no file at /tmp/a.jpg".
    public var description: String {
        switch self {
        case .notAFileURL(let url): "\(url) is not a file URL"
        case .fileNotFound(let url): "no file at \(url.path)"
        case .isDirectory(let url): "\(url.path) is a directory"
        case .fileSizeUnavailable(let url): "\(url.path) is not a regular file, so its length is unknown"
        case .fileUnreadable(let url, let code): "cannot open \(url.path): \(POSIX.errnoText(code))"
        case .invalidBoundary(let boundary):
            "invalid boundary \"\(boundary)\": it must be 1 to 70 characters of letters, digits and '()+_,-./:=? "
                + "and must not end in a space"
        case .invalidSubtype(let subtype):
            "invalid multipart subtype \(subtype.debugDescription): it must be a non-empty HTTP token, such as mixed"
        case .jsonEncodingFailed(let underlying): "encoding the JSON value failed: \(underlying)"
        case .invalidHeaderName(let name): "invalid header name \"\(name)\": it must be a non-empty HTTP token"
        case .invalidHeaderValue(let name, let value):
            "header \(name) has a control character in its value \(value.debugDescription)"
        case .invalidMIMEType(let type): "invalid MIME type \(type.debugDescription)"
        case .bodyTooLong(let partLength):
            "its \(partLength) bytes would make the body longer than a Content-Length can say (2^63 - 1 bytes)"
        case .invalidReadLength(let length): "read asked for \(length) bytes; a length must not be negative"
        case .boundaryInPart(let boundary): "the part holds the boundary \"\(boundary)\"; choose another boundary"
        case .fileVanished(let url): "\(url.path) was removed after it was appended"
        case .fileSizeChanged(let url, let expected, let actual):
            "\(url.path) is \(actual) bytes now, \(expected) when it was appended"
        case .fileChanged(let url):
            "\(url.path) was replaced, modified, or had its permissions or owner changed after it was appended"
        case .fileReadFailed(let url, let code): "reading \(url.path) failed: \(POSIX.errnoText(code))"
        case .streamEndedEarly(let expected, let received):
            "stream ended after \(received) of its declared \(expected) bytes"
        case .streamLongerThanDeclared(let length): "stream has more than its declared \(length) bytes"
        case .streamFailed(let underlying?): "stream failed: \(underlying.localizedDescription)"
        case .streamFailed(nil): "stream failed without saying why"
        case .streamFactoryFailed(let underlying): "making the stream failed: \(underlying.localizedDescription)"
        case .streamAlreadyConsumed: "its one-shot InputStream was already read; use a stream factory to replay it"
        case .streamNotOpen: "read from a body stream that is not open"
        case .notReplayable:
            "the body stream was reopened after sending bytes, and a one-shot InputStream part cannot be sent again"
        case .offsetPastEnd(let offset, let contentLength):
            "the body cannot start at byte \(offset): it is \(contentLength) bytes long"
        case .cannotResumeOneShotStream(let offset):
            "the body cannot start at byte \(offset), inside or after this one-shot InputStream, which cannot be "
                + "read again; use a stream factory to make it resumable"
        case .chunkNotFilled(let size):
            "a chunk of the body (\(size) bytes) came back empty: make each chunk by calling fill with room for it"
        case .redirectNotFollowed(let statusCode, let location):
            "the server redirected (\(statusCode)) to \(location?.withoutUserInfo ?? "an unknown location"), and this "
                + "platform's URLSession would resend the request with an empty body; upload to that URL instead"
        case .unacceptableStatus(let statusCode, let body):
            "the server answered \(statusCode), which the upload does not accept"
                + (body.isEmpty ? "" : ": " + String(decoding: body.prefix(200), as: UTF8.self))
        case .responseTooLarge(let statusCode, let limit):
            "the server's answer (\(statusCode)) is longer than the \(limit) bytes the upload holds in memory; raise "
                + "the bound with responseBody: .inMemory(upTo:), or take the body as it arrives with .file(_:) or "
                + ".chunks(_:)"
        case .backgroundSession:
            "background sessions upload only from a file through their delegate: write the body with "
                + "writeEncodedData(to:) and call uploadTask(with:fromFile:)"
        case .answeredBeforeBodySent(let statusCode, let bytesSent, let contentLength):
            "the server answered \(statusCode) after \(Self.bytes(bytesSent, of: contentLength, "body")), so it "
                + "never received the whole form; the upload failed"
        case .lengthUnknown:
            "a stream of unknown length, which this upload needs before the first byte, and which may not be copied "
                + "to a temporary file (whenLengthIsNeeded: .fail); upload it with .resumable to a server that speaks "
                + "the resumable-upload draft, or let it spool"
        case .resumeFailed(let retries, let acknowledged, let contentLength):
            "the resumable upload gave up after \(retries) \(retries == 1 ? "retry" : "retries"), the server having "
                + Self.bytes(acknowledged, of: contentLength, "form")
        case .resumeSaved(let retries, let acknowledged, let contentLength):
            "the resumable upload is saved for another run, which resumes it where the server stands: it stopped "
                + "after \(retries) \(retries == 1 ? "retry" : "retries") with the server having \(acknowledged) of "
                + "the form's \(contentLength) bytes"
        case .appendResent:
            "URLSession sent the resumable upload's bytes again by itself, which the server would refuse or take "
                + "twice"
        case .resumptionRefused(let statusCode):
            "the server offered resumable uploads, then answered \(statusCode) to the request creating one, as if it "
                + "were the whole form"
        case .uploadExpired(let statusCode):
            "the resumable upload expired on the server (\(statusCode)) again after it was started over"
        case .answerLost(let contentLength):
            "the server has all \(contentLength) bytes of the form, but its answer was lost with the connection; "
                + "the upload was left on the server, not deleted"
        case .formOverUploadLimit(let maxSize, let contentLength):
            "the server takes uploads of at most \(maxSize) bytes (Upload-Limit max-size), and the form has "
                + "\(contentLength); nothing was sent"
        case .offsetOutOfRange(let offset, let allowed):
            "the server said it has \(offset) bytes of the form, where only \(allowed.lowerBound) to "
                + "\(allowed.upperBound) can be true; the upload was deleted"
        case .offsetNotBuffered(let offset, let start):
            "the server asked for the stream from byte \(offset), and only the bytes from \(start) (what it had "
                + "acknowledged) were still held; the upload was deleted"
        case .completedBeforeEnd(let bytesSent):
            "the server called the upload complete after \(bytesSent) bytes, before the stream's end was sent; its "
                + "answer was not taken"
        case .completionClaimedEarly(let offset, let sent, let contentLength):
            "the server called the upload complete"
                + (offset.map { " at offset \($0)" } ?? " naming no offset")
                + " when the client had sent \(Self.bytes(sent, of: contentLength, "form")) and not its last byte "
                + "with Upload-Complete: ?1, so it cannot have the whole form; its answer was not taken"
        case .unusableUploadLocation(let url, let flaw):
            "the server put the upload at \(url.withoutUserInfo.debugDescription), which cannot be requested: \(flaw); nothing "
                + "was sent there"
        case .uploadLengthMismatch(let serverLength, let contentLength):
            "the server's upload has \(serverLength) bytes (Upload-Length), the form \(contentLength); the upload was "
                + "deleted"
        case .insecureUploadLocation(let url):
            "the server put the upload at \(url.withoutUserInfo), which is not https as the request is"
        case .uploadCompleteMissing(let statusCode):
            "the server answered \(statusCode) without Upload-Complete, which its version of the draft requires: "
                + "it did not say whether the upload is complete"
        case .completeAtShortOffset(let offset, let contentLength):
            "the server said Upload-Complete: ?1 at Upload-Offset \(offset), and the form has "
                + (contentLength.map { "\($0) bytes" } ?? "more bytes than were sent")
                + ": a complete upload holds every byte, so it did not say that the form reached the application"
        case .appendLimitsConflict(let least, let most):
            "the server asks for appends of at least \(least) bytes (Upload-Limit min-append-size) and at most "
                + "\(most) (max-append-size), which no append can keep"
        case .uploadInProgress(let state):
            "another process is sending this upload (its state is \(state.path)); wait for it, or stop it first"
        case .stateUnwritable(let url, let code):
            "the upload's state cannot be kept at \(url.path): \(POSIX.errnoText(code)); nothing was sent"
        case .resumeTimeExceeded(let seconds, let acknowledged, let contentLength):
            "the resumable upload gave up after \(String(format: "%.1f", seconds)) s in all, the server having "
                + Self.bytes(acknowledged, of: contentLength, "form")
        case .queueInUse(let directory):
            "another process runs the upload queue in \(directory.path); two never run one queue at once"
        case .queueUnreadable(let directory, let reason):
            "the upload queue in \(directory.path) cannot be opened: \(reason)"
        case .credentialNotQueued(let credential):
            "the request carries \(credential), which an upload queue never writes to disk: give credentials through "
                + "the headers hook of the queue's run(on:headers:pacing:) instead"
        case .streamNotQueued:
            "a stream part cannot outlive the process: an upload queue takes fields, data and files"
        case .outageOutlasted(let seconds, let acknowledged, let contentLength):
            "the resumable upload made no progress for \(String(format: "%.1f", seconds)) s, the server having "
                + Self.bytes(acknowledged, of: contentLength, "form")
        case .tooLargeForMemory(let length): "a body of \(length) bytes does not fit in memory"
        case .outputFileExists(let url): "\(url.path) already exists"
        case .outputWriteFailed(let url, let code): "writing \(url.path) failed: \(POSIX.errnoText(code))"
        }
    }
}

extension MultipartError.Reason {
    /// "`count` of the form's `length` bytes", or "`count` bytes of the form" while its length is unknown.
    fileprivate static func bytes(_ count: UInt64, of length: UInt64?, _ whole: String) -> String {
        guard let length else { return "\(count) bytes of the \(whole)" }
        return "\(count) of the \(whole)'s \(length) bytes"
    }

    /// The reason's kind of problem.
    public var category: MultipartError.Category {
        switch self {
        case .notAFileURL, .fileNotFound, .isDirectory, .fileSizeUnavailable, .fileUnreadable, .fileVanished,
            .fileSizeChanged, .fileChanged, .fileReadFailed:
            .file
        case .invalidBoundary, .invalidSubtype, .jsonEncodingFailed, .invalidHeaderName, .invalidHeaderValue,
            .invalidMIMEType, .bodyTooLong, .boundaryInPart, .streamNotQueued:
            .form
        case .streamEndedEarly, .streamLongerThanDeclared, .streamFailed, .streamFactoryFailed, .streamAlreadyConsumed,
            .streamNotOpen, .invalidReadLength, .notReplayable, .offsetPastEnd, .cannotResumeOneShotStream,
            .chunkNotFilled:
            .stream
        case .redirectNotFollowed, .backgroundSession, .answeredBeforeBodySent, .lengthUnknown, .responseTooLarge,
            .queueInUse, .queueUnreadable, .credentialNotQueued:
            .upload
        case .unacceptableStatus:
            .status
        case .resumeFailed, .resumeSaved, .appendResent, .resumptionRefused, .uploadExpired, .answerLost,
            .formOverUploadLimit,
            .offsetOutOfRange, .uploadLengthMismatch, .insecureUploadLocation, .uploadCompleteMissing,
            .completeAtShortOffset,
            .appendLimitsConflict, .uploadInProgress, .stateUnwritable, .resumeTimeExceeded, .outageOutlasted,
            .offsetNotBuffered,
            .completedBeforeEnd, .completionClaimedEarly, .unusableUploadLocation:
            .resumable
        case .tooLargeForMemory, .outputFileExists, .outputWriteFailed:
            .output
        }
    }
}
