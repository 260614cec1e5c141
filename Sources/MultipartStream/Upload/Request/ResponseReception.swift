import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How one request keeps the bodies of its answers, so that no answer takes memory a server decides: the upload's
/// own answer as its ``MultipartResponseBody`` says, a refused status's as a bounded prefix, and every other answer
/// (the resumable protocol's own, which are read for their headers) as a bounded prefix too.
struct ResponseReception: Sendable {
    /// The statuses the caller accepts; `nil` for all.
    var acceptable: Range<Int>?
    /// Where the upload's answer goes, and the sink that takes it when it is not memory.
    var body: MultipartResponseBody
    var sink: ResponseSink?
    /// Whether this request's answer may be the upload's: else its body is only read for a prefix.
    var isTheAnswer: Bool
    /// Which answers may be the upload's, judged on an answer's head and how far into the form the request had handed
    /// out bytes when it came: not those the resumable protocol goes on from. ``settled(for:handedOut:)`` asks it
    /// once per answer.
    var answersWith: (@Sendable (HTTPURLResponse, _ handedOut: UInt64) -> Bool)?

    /// The upload's answer, kept as `body` says unless `acceptable` refuses its status.
    static func answer(accepting acceptable: Range<Int>?, body: MultipartResponseBody, sink: ResponseSink?) -> Self {
        Self(acceptable: acceptable, body: body, sink: sink, isTheAnswer: true)
    }

    /// An answer of the resumable protocol, which is read for its headers: its body's prefix only.
    static let protocolAnswer = Self(
        acceptable: nil, body: .inMemory(upTo: MultipartResponseBody.refusedBodyLimit), sink: nil, isTheAnswer: false)

    /// This reception for a request whose answer is not the upload's (an append that does not complete it): a
    /// protocol answer, whatever the upload's own says.
    var notTheAnswer: Self { .protocolAnswer }

    /// This reception for a request whose answer is the upload's only where `answersWith` takes its head.
    func answering(only answersWith: @escaping @Sendable (HTTPURLResponse, _ handedOut: UInt64) -> Bool) -> Self {
        var reception = self
        reception.answersWith = answersWith
        return reception
    }

    /// This reception for one answer, whose head is `response` and which came when the request had handed out
    /// `handedOut` bytes of the form: whether it may be the upload's is settled here, once, before any of its body
    /// arrives, so that the body of an answer the upload goes on from never reaches the caller's sink.
    func settled(for response: URLResponse?, handedOut: UInt64) -> Self {
        guard let answersWith else { return self }
        var settled = self
        settled.answersWith = nil
        if let response = response as? HTTPURLResponse {
            settled.isTheAnswer = isTheAnswer && answersWith(response, handedOut)
        }
        return settled
    }

    /// Whether an answer may be the upload's: this reception must be settled for it.
    private var isAnswer: Bool {
        precondition(answersWith == nil, "a reception that judges answers is settled for each answer first")
        return isTheAnswer
    }

    /// How the body of one answer is received.
    enum Plan: Equatable {
        /// Kept in memory up to `limit` bytes. Past it the rest is dropped, and where `stops` the task is stopped:
        /// nothing more of it is needed. An answer another may follow is never stopped, since URLSession needs it
        /// whole to follow (a redirect, a challenge).
        case memory(limit: Int, stops: Bool)
        /// Handed to the sink as it arrives.
        case deliver
    }

    /// How the body of an answer with `statusCode` (`nil`: not HTTP) is received.
    func plan(for statusCode: Int?) -> Plan {
        let status = statusCode ?? 200
        let mayBeFollowed = Self.mayBeFollowed(status)
        let prefix = Plan.memory(limit: MultipartResponseBody.refusedBodyLimit, stops: !mayBeFollowed)
        guard isAnswer, accepts(status) else { return prefix }
        switch body.destination {
        case .memory(let limit):
            return .memory(limit: limit, stops: !mayBeFollowed)
        case .file, .chunks:
            return mayBeFollowed ? .memory(limit: MultipartResponseBody.heldAnswerLimit, stops: false) : .deliver
        }
    }

    /// Whether the caller accepts an answer with `statusCode` (`nil`: not HTTP): the one test of
    /// ``MultipartResponseBody``'s and `acceptableStatusCodes`' statuses, wherever an answer arrives.
    func accepts(_ statusCode: Int?) -> Bool {
        acceptable.map { $0.contains(statusCode ?? 200) } ?? true
    }

    /// Whether an answer with `statusCode` (`nil`: not HTTP) is the upload's and its status one the caller refuses:
    /// the request's verdict is then ``MultipartError/Reason/unacceptableStatus(statusCode:body:)``, whichever request
    /// of the upload it came from (the resumable protocol's takes only its answer as the upload's).
    func refuses(_ statusCode: Int?) -> Bool {
        guard let statusCode else { return false }
        return isAnswer && !accepts(statusCode)
    }

    /// Whether an answer with this status may be followed by another to the same upload: a redirect, a challenge.
    static func mayBeFollowed(_ statusCode: Int) -> Bool {
        (300..<400).contains(statusCode) || statusCode == 401 || statusCode == 407
    }

    /// Whether an answer's body past its bound fails the upload: the upload's own answer, accepted, which the
    /// caller would otherwise get cut short. A refused one's prefix is all its error carries; a protocol answer's
    /// is all anyone reads.
    func failsPastLimit(statusCode: Int?) -> Bool {
        isAnswer && accepts(statusCode)
    }

    /// Whether a body held in memory goes to the sink once it is known to be the answer.
    func handsHeldBodyToSink(statusCode: Int?) -> Bool {
        sink != nil && isAnswer && accepts(statusCode)
    }
}

/// Where the upload's answer goes when it does not go into memory: a file or the caller's closure. One per upload,
/// shared by its requests, since the answer may come to any of them (a resumable upload's last append); the upload
/// keeps it only once the upload has succeeded.
final class ResponseSink: @unchecked Sendable {
    // @unchecked: `state` is guarded by `lock`; writes come from one URLSession delegate queue at a time.
    private enum Target {
        case file(URL)
        case chunks(@Sendable (HTTPURLResponse, Data) throws -> Void)
    }

    private struct State {
        /// The open file beside the destination, for a file.
        var descriptor: Int32 = -1
        var temporary: URL?
        /// The request whose answer the sink holds, and whether that answer broke before its end.
        var writer: ObjectIdentifier?
        var broken: (any Error)?
        /// Committed or discarded: a piece that comes after is refused.
        var isClosed = false
    }

    private let target: Target
    private let lock = Lock()
    private var state = State()

    /// The sink for `body`, or `nil` where the body goes into memory.
    init?(_ body: MultipartResponseBody) {
        switch body.destination {
        case .memory: return nil
        case .file(let url): target = .file(url)
        case .chunks(let receive): target = .chunks(receive)
        }
    }

    /// Writes a piece of the answer that `writer` received with `response`. A new writer's answer replaces what an
    /// earlier one wrote.
    func write(_ data: Data, of response: HTTPURLResponse, by writer: ObjectIdentifier) throws {
        switch target {
        case .chunks(let receive):
            try lock.withLock {
                guard !state.isClosed else { throw CancellationError() }
                state.writer = writer
                state.broken = nil
            }
            try receive(response, data)
        case .file(let url):
            try lock.withLock { () throws in
                guard !state.isClosed else { throw CancellationError() }
                if state.writer != writer {
                    try reset(url)
                    state.writer = writer
                }
                do throws(POSIX.Failure) {
                    try POSIX.writeAll(state.descriptor, data)
                } catch {
                    throw MultipartError(.outputWriteFailed(url, errno: error.code))
                }
            }
        }
    }

    /// The answer `writer` was writing ended: a failure (`error`) leaves a body cut short, which a file drops and a
    /// closure cannot take back.
    func ended(by writer: ObjectIdentifier, error: (any Error)?) {
        guard let error else { return }
        lock.withLock {
            // Once committed or discarded, the sink is the upload's no more: a request that ends later (a cancelled
            // task, after its upload threw) touches nothing.
            guard state.writer == writer, !state.isClosed else { return }
            state.broken = error
            state.writer = nil
            dropTemporary()
        }
    }

    /// The upload succeeded: the file replaces the destination (empty when no answer had a body). Throws where the
    /// closure was given part of an answer that broke, or the file cannot be put in place.
    func commit() throws {
        try lock.withLock { () throws in
            state.isClosed = true
            if let broken = state.broken, case .chunks = target { throw broken }
            guard case .file(let url) = target else { return }
            if state.descriptor < 0 { try reset(url) }
            let (descriptor, temporary) = (state.descriptor, state.temporary?.path ?? "")
            state.descriptor = -1
            do throws(POSIX.Failure) {
                try POSIX.closeAfterWriting(descriptor)
                try POSIX.rename(temporary, to: url.path)
                state.temporary = nil
            } catch {
                removeTemporary()
                throw MultipartError(.outputWriteFailed(url, errno: error.code))
            }
        }
    }

    /// The upload failed: nothing of the answer is kept.
    func discard() {
        lock.withLock {
            state.isClosed = true
            dropTemporary()
        }
    }

    /// A new, empty file beside `url`: the destination itself is touched only by the rename.
    private func reset(_ url: URL) throws(MultipartError) {
        dropTemporary()
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).multipart-\(UUID().uuidString)")
        do throws(POSIX.Failure) {
            state.descriptor = try POSIX.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode: 0o644)
            state.temporary = temporary
        } catch {
            throw MultipartError(.outputWriteFailed(url, errno: error.code))
        }
    }

    /// Closes and removes the file beside the destination, if there is one.
    private func dropTemporary() {
        if state.descriptor >= 0 { POSIX.close(state.descriptor) }
        state.descriptor = -1
        removeTemporary()
    }

    private func removeTemporary() {
        if let temporary = state.temporary { try? FileManager.default.removeItem(at: temporary) }
        state.temporary = nil
    }
}

/// One answer's body as its ``ResponseReception/Plan`` keeps it: in memory up to a bound, or handed on.
struct ReceivedBody {
    /// What memory holds of it.
    var data = Data()
    var plan = ResponseReception.Plan.memory(limit: 0, stops: false)
    var statusCode: Int?
    /// It passed its bound: the rest was dropped.
    var overflowed = false
    /// The task was stopped for it, having all of the answer it needs: the task's error is that stop.
    var cutShort = false
    /// The request's reception, settled for this answer.
    var reception = ResponseReception.protocolAnswer

    init() {}

    init(plan: ResponseReception.Plan, statusCode: Int?) {
        self.plan = plan
        self.statusCode = statusCode
    }

    /// The body of the answer whose head is `response`, which came when the request had handed out `handedOut`
    /// bytes of the form, kept as `reception` says.
    init(_ response: URLResponse?, handedOut: UInt64, as reception: ResponseReception) {
        let statusCode = (response as? HTTPURLResponse)?.statusCode
        let settled = reception.settled(for: response, handedOut: handedOut)
        self.init(plan: settled.plan(for: statusCode), statusCode: statusCode)
        self.reception = settled
    }

    /// The bound the body passed, where its reception fails the request for it.
    var passedLimit: Int? { passedLimit(reception) }

    /// Whether the body held in memory goes to the sink: it is the upload's answer, now known to be the last.
    var goesToSink: Bool { reception.handsHeldBodyToSink(statusCode: statusCode) }

    /// What to do with a piece of the body.
    enum Step: Equatable {
        case kept
        /// Hand it to the sink.
        case deliver
        /// Stop the task: the bound is reached and nothing more of the answer is needed.
        case stop
    }

    /// Takes `piece`: keeps what the bound lets memory hold.
    mutating func take(_ piece: Data) -> Step {
        guard !cutShort else { return .kept }
        guard case .memory(let limit, let stops) = plan else { return .deliver }
        let room = max(0, limit - data.count)
        guard piece.count > room else {
            data.append(piece)
            return .kept
        }
        data.append(piece.prefix(room))
        overflowed = true
        cutShort = stops
        return stops ? .stop : .kept
    }

    /// The bound the body passed, where `reception` fails the request for it.
    func passedLimit(_ reception: ResponseReception) -> Int? {
        guard overflowed, reception.failsPastLimit(statusCode: statusCode), case .memory(let limit, _) = plan else {
            return nil
        }
        return limit
    }
}
