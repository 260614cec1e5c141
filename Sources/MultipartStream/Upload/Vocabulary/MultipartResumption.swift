import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How a resumable upload (``MultipartUploadStrategy/resumable(_:pacing:)``) retries, notices a stalled connection,
/// and keeps its state for another process. Fresh headers for each of its requests come from the upload's own
/// `headers` hook.
public struct MultipartResumption: Sendable {
    /// Failures in a row (a dropped connection, a refused one, a stall, a timeout, a conflict, a 5xx) before the
    /// upload gives up. Progress gives them back: they are counted since the server's offset last moved on, so that a
    /// drop an hour into an upload costs no less patience than one at the start.
    public var maximumAttempts: Int
    /// The shortest wait in seconds before a retry. Each wait is drawn at random between half a ceiling and the
    /// ceiling, which starts here and doubles with each failure that makes no progress, up to ``maximumDelay``. Any
    /// value is taken: one that is negative or NaN waits nothing, and none waits over an hour.
    public var initialDelay: Double
    /// The longest wait in seconds between two retries, also for a server's `Retry-After`; bounded as
    /// ``initialDelay`` is. It is also how long after the network's return the upload may take to notice it.
    public var maximumDelay: Double
    /// The longest the upload may take in all, retries and waits included, in seconds; `nil` (the default) for no
    /// limit. A retry that would start after it ends the upload with
    /// ``MultipartError/Reason/resumeTimeExceeded(seconds:bytesAcknowledged:contentLength:)``: with saved state,
    /// the state and the server's upload are kept, as ``MultipartError/Reason/resumeSaved(retries:bytesAcknowledged:contentLength:)``.
    public var maximumDuration: Double?
    /// The longest the upload waits out failures without progress (an outage), in seconds, from the first failure
    /// since the server's offset last moved on; `nil` (the default) for no bound but ``maximumAttempts``. Unlike
    /// ``maximumDuration`` it never ends an upload that is moving, however long it takes. Its last retry starts at
    /// the bound, and its failure ends the upload with
    /// ``MultipartError/Reason/outageOutlasted(seconds:bytesAcknowledged:contentLength:)``: not the server's word,
    /// so with saved state the state and the server's upload are kept for a later run
    /// (``MultipartError/Reason/resumeSaved(retries:bytesAcknowledged:contentLength:)`` with it beneath).
    public var maximumWaitWithoutProgress: Double?
    /// Whether requests to an upload resource that the server put on another origin (its `Location`) carry the
    /// request's `Authorization`, `Cookie` and `Proxy-Authorization`, as `curl --location-trusted` lets them follow
    /// redirects; off by default, since the server chose that URL. The upload's own `credentialsToOtherOrigins:`
    /// trusts them the same way, for redirects too; either one is enough.
    public var credentialsToOtherOrigins: Bool
    /// When a part of the form going out counts as stalled, and is sent again from where the server stands as after a
    /// dropped connection; `nil` for never. By default, nothing handed out for 30 s.
    public var stall: Stall?
    /// Forms of at most this many bytes go in one request, as Apple's URLSession sends an upload: the creation
    /// carries the whole form with `Upload-Complete: ?1` and the request's `Idempotency-Key`, on the session's
    /// kept-alive connections, asking the server nothing first; a server without the draft takes it as a plain
    /// upload. A connection that drops before the answer sends it again whole (a queue counts it in `sentAgain`),
    /// which below this size costs less than the round trips that creating the upload first takes every time. 1 MiB
    /// unless set, measured on a 40 ms round trip (<doc:ResumableUploads>); 0 creates every upload first.
    public var singleRequestLimit: UInt64
    /// The most bytes one append of a form holding a stream of unknown length carries (8 MiB unless set, at most
    /// 1 GiB; the server's `Upload-Limit` may ask for fewer or more): what the upload holds in memory until the server
    /// acknowledges it, so that a dropped append can be sent again, in a ring of two appends.
    public var bufferedAppendSize = 8 << 20
    /// A directory to keep the upload's state in, so that the same form sent to the same URL by another process
    /// (after Ctrl-C, a crash, a reboot) resumes where the server stands; `nil` (the default) keeps none. See
    /// <doc:SavedState> for what is kept, and ``standardStateDirectory(named:)``.
    ///
    /// With saved state a cancelled upload keeps its upload resource and state, to be resumed later; one that fails
    /// or completes leaves neither; `URLSession.abandonUpload(_:with:resumption:)` gives one up on purpose.
    public var stateDirectory: URL?
    /// Told what happens: each request of the protocol and its answer, a retry and where the upload goes on from,
    /// a server that does not speak the draft, and what happens to saved state (an upload resumed or started over,
    /// its state written, a state file ignored). Called on the upload's task; keep it quick.
    public var events: (@Sendable (Event) -> Void)?

    /// The stall rule, as curl's `--speed-limit` and `--speed-time`: fewer than `bytesPerSecond` for `seconds`.
    public struct Stall: Sendable, Equatable {
        /// The slowest rate that is not a stall.
        public var bytesPerSecond: UInt64
        /// How long the rate must stay below it.
        public var seconds: Double

        /// Creates a stall rule; `seconds` is taken between 0.5 and an hour.
        public init(bytesPerSecond: UInt64, seconds: Double) {
            self.bytesPerSecond = bytesPerSecond
            self.seconds = seconds.isNaN ? 30 : min(max(seconds, 0.5), MultipartResumption.longestWait)
        }
    }

    /// What happened to a resumable upload, or to its saved state.
    public enum Event: Sendable, Equatable {
        /// A request of the protocol went out: its method, URL, and the draft's fields it carries (with an append's
        /// `Content-Length`), by name; or, to a server that speaks no version of the draft, the whole form's request
        /// with its `Content-Length` (after ``notResumable`` or ``underMinimumSize(minSize:)``).
        case requestSent(method: String, url: URL, fields: [String: String])
        /// Its answer came: the status, and the draft's fields with `Location` and `Retry-After`, by name.
        case answerReceived(statusCode: Int, fields: [String: String])
        /// A request failed for `reason` (a dropped connection, a 503): the upload asks where the server stands after
        /// `seconds`.
        case retrying(reason: String, seconds: Double)
        /// After a failure, the server said it has `offset` of the form's `contentLength` bytes (`nil` while a
        /// stream's length is unknown): the rest goes from there.
        case continuing(offset: UInt64, contentLength: UInt64?)
        /// A stream of unknown length goes out as it is read, in appends of at most `appendSize` bytes, with no copy
        /// on disk: the server speaks the draft.
        case streaming(appendSize: UInt64)
        /// A stream of unknown length was copied to a temporary file, to be sent with an exact length (the form's
        /// `contentLength`): the server speaks no version of the draft. The file is removed when the upload ends.
        case spooled(contentLength: UInt64)
        /// The server speaks no version of the draft: the whole form goes in one request.
        case notResumable
        /// The server speaks the draft, and takes no form shorter than its `min-size` (`minSize` bytes) as an
        /// upload resource: the whole form goes in one request, as to a server that speaks none. The next upload to
        /// it is resumable all the same.
        case underMinimumSize(minSize: UInt64)
        /// The saved upload's run before ended moments ago (interrupted, killed, or stopped), and the server, which
        /// has `offset` bytes, may still be taking what that run had in flight: it is asked again shortly, until its
        /// offset stops growing.
        case settling(offset: UInt64)
        /// A request handed out `bytes` of the form's bytes (an append, or the whole form): counted again when
        /// resent.
        case bodySent(bytes: UInt64)
        /// A saved upload of this form was found, and goes on from `offset` of `contentLength` bytes.
        case resumed(offset: UInt64, contentLength: UInt64)
        /// A saved upload could not go on, so a new one starts from the first byte; the old resource was deleted
        /// where it still existed.
        case startedOver(StartOverReason)
        /// The upload's state was written to this file: where it was created, or how far the server has it.
        case saved(URL)
        /// The state file at this URL was ignored, for the reason given.
        case stateIgnored(URL, reason: String)
        /// The form has a stream part, which another process cannot send again: no state is kept.
        case notSaved
        /// The state of another saved upload whose lifetime was over (the server's `max-age`, else 7 days since it
        /// was last saved) was removed: this file.
        case removedExpired(URL)
    }

    /// Why a saved upload started over.
    public enum StartOverReason: Sendable, Equatable {
        /// A part, or a file's contents, size or modification time, is not what was saved.
        case formChanged
        /// The server no longer has the upload (`statusCode`, 404 or 410).
        case uploadGone(statusCode: Int)
        /// The server has fewer bytes (`serverOffset`) than it acknowledged before (`savedOffset`).
        case offsetLost(serverOffset: UInt64, savedOffset: UInt64)
        /// The upload's lifetime (the server's `Upload-Limit` `max-age`) had passed: the old resource was not asked
        /// about, nor deleted.
        case expired
    }

    /// Creates a policy. The defaults wait out an outage of 3 minutes at least: 30 failures in a row without
    /// progress, waiting from 0.25 s, doubling, up to 15 s between tries (at least 188 s of waits in all, at most
    /// 376 s), so that an upload tries again within 15 s of the network's return; they count a part that hands out
    /// nothing for 30 s as stalled, send forms of up to 1 MiB in one request, and keep no state.
    public init(
        maximumAttempts: Int = 30,
        initialDelay: Double = 0.25,
        maximumDelay: Double = 15,
        maximumDuration: Double? = nil,
        maximumWaitWithoutProgress: Double? = nil,
        credentialsToOtherOrigins: Bool = false,
        stall: Stall? = Stall(bytesPerSecond: 1, seconds: 30),
        singleRequestLimit: UInt64 = MultipartResumption.defaultSingleRequestLimit,
        stateDirectory: URL? = nil,
        events: (@Sendable (Event) -> Void)? = nil
    ) {
        self.maximumAttempts = max(0, maximumAttempts)
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.maximumDuration = maximumDuration
        self.maximumWaitWithoutProgress = maximumWaitWithoutProgress
        self.credentialsToOtherOrigins = credentialsToOtherOrigins
        self.stall = stall
        self.singleRequestLimit = singleRequestLimit
        self.stateDirectory = stateDirectory
        self.events = events
    }

    /// Whether a new upload of `contentLength` bytes (`nil`: unknown yet) goes in one request, asking nothing first.
    package func goesInOneRequest(_ contentLength: UInt64?) -> Bool {
        guard let contentLength, singleRequestLimit > 0 else { return false }
        return contentLength <= singleRequestLimit
    }

    /// The default ``singleRequestLimit``.
    public static let defaultSingleRequestLimit: UInt64 = 1 << 20

    /// The longest any wait lasts, whatever the policy says.
    static let longestWait: Double = 3_600

    /// `seconds` as a wait: finite, from 0 to ``longestWait``, and at most ``maximumDelay`` (bounded the same way).
    package func wait(_ seconds: Double) -> Double {
        min(Self.bounded(seconds), max(Self.bounded(maximumDelay), Self.bounded(initialDelay)))
    }

    private static func bounded(_ seconds: Double) -> Double {
        seconds.isNaN ? 0 : min(max(seconds, 0), longestWait)
    }
}
