import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension ResumableUpload {
    /// A request's answer as the caller gets it: its body and response.
    typealias Reply = (Data, URLResponse)

    /// The decisions of a resumable upload (draft-ietf-httpbis-resumable-upload, interop versions 6 to 10), without
    /// I/O: each answer or failure of a request, a cancel, and the saved state written or not is an event, and each
    /// event gives the action the driver carries out. The requests and answers are typed in
    /// `ResumableUpload+Protocol.swift`.
    ///
    /// A form of at most ``MultipartResumption/singleRequestLimit`` bytes goes in one request, asking nothing first:
    /// the creation carries it whole with `Upload-Complete: ?1`, and its answer is the application's (a server
    /// without the draft takes it as a plain upload). Linux URLSession shows no `104`, so the upload cannot learn
    /// where it lives before that answer: a drop before it sends the form again whole, which costs less than the
    /// round trips a larger form's way takes.
    ///
    /// Support for a larger form is detected before any part of it goes out: an `OPTIONS` in the newest version, then
    /// in each older one until an answer has `Upload-Limit` or `Accept-Patch: application/partial-upload` (a probe
    /// carries no body, so nothing is delivered twice); then a creation request with no body and `Upload-Complete: ?0`
    /// answered with `Location`. A server that does neither gets the whole form in one request, as `.stream` sends
    /// it, and never a part of it. The version found is spoken to the end, and saved with the upload.
    ///
    /// Every answer is untrusted: the upload ends in the application's answer only when the server says
    /// `Upload-Complete: ?1` (or, as older servers do, answers an append with a 2xx and no `Upload-Complete`), an
    /// offset must lie between what the server acknowledged before and what was sent, and a failure after the
    /// upload resource exists deletes it; unless its state is saved and the failure is not the server's word that
    /// the upload is over, a breach, the form's own or the time limit (spent retries, a cancel, a TLS failure),
    /// which keeps it for the next run.
    struct StateMachine: Sendable {
        enum Action {
            /// Send this request.
            case send(Step)
            /// Send the whole form in one request, as `.stream` does: the server speaks no version of the draft
            /// (`underMinimumSize` `nil`), or speaks it and takes no form under its `min-size` as an upload resource.
            case sendWhole(underMinimumSize: UInt64?)
            /// Wait, then send this request.
            case wait(seconds: Double, then: Step)
            /// The run before was interrupted moments ago, and the server, which has `offset` bytes, may still be
            /// taking what it had in flight: wait, then ask again.
            case settle(offset: UInt64, seconds: Double)
            /// Keep the saved state in step, then send this append; a write that fails is ``Event/keepFailed(_:)``.
            case keep(Keeping, then: Step)
            /// The upload's answer.
            case answer(Reply)
            /// Give up with `error`: delete the upload resource at `deleting`, if any, and the saved state.
            case fail(any Error, deleting: URL?)
            /// Give up this run with `error`, keeping the upload resource and the saved state for the next run to
            /// resume: write `keeping`'s position first, where there is one.
            case stop(MultipartError, keeping: Keeping?)
            /// The caller cancelled: delete the upload resource at `deleting`, if any (none when the saved state
            /// keeps it for another run to resume), and keep the saved state.
            case cancel(deleting: URL?)
            /// The saved upload cannot go on: say why, forget the saved state, delete the old upload at `deleting`
            /// (none where the server no longer has it, or its lifetime is over), and send the caller's form as a new
            /// upload, with its own boundary rather than the saved one.
            case startOver(MultipartResumption.StartOverReason, deleting: URL?)

            /// This action, deleting nothing: for an upload the server said it holds complete.
            var sparingUpload: Action {
                switch self {
                case .fail(let error, _): .fail(error, deleting: nil)
                case .cancel: .cancel(deleting: nil)
                case .startOver(let reason, _): .startOver(reason, deleting: nil)
                default: self
                }
            }
        }

        /// Where the upload resource is and how far the server has it, as the saved state keeps it.
        struct Position: Equatable {
            var location: URL
            var acknowledged: UInt64
        }

        /// What keeping the saved state in step takes before an append.
        struct Keeping: Equatable {
            /// Say that the saved upload goes on at this offset: the first time the server confirmed where it stands.
            var resumedAt: UInt64?
            /// Write this position, which the saved state does not hold yet.
            var writing: Position?
            /// Seconds the upload resource has left, as the server's `max-age` last said; saved with the position.
            var lifetime: Double?

            /// Whether there is nothing to keep.
            var isEmpty: Bool { resumedAt == nil && writing == nil }
        }

        enum Event {
            /// The request under way was answered; `handedOut` is how far into the form the upload's requests handed
            /// out bytes (an append cannot have sent more), every byte when not counted.
            case answered(Answer, Reply, handedOut: UInt64 = .max)
            /// The request under way failed: the machine tells a failure of the connection, which another request
            /// may not meet, from one that ends the upload.
            case failed(any Error, handedOut: UInt64 = .max)
            /// The caller cancelled.
            case cancelled
            /// The saved state could not be written.
            case keepFailed(any Error)
            /// The caller's headers hook failed (its error, or a header it gave that cannot be sent) before the
            /// request went out: neither the form's failure nor the server's word, so a saved upload is kept.
            case headersFailed(any Error)
        }

        /// The upload resource, once created.
        struct Resource {
            var location: URL
            /// The bytes of the form the server said it has.
            var acknowledged: UInt64
            /// The most bytes of the form the server can have: none after the creation, which carries none; the
            /// end of the furthest append that went out, or less where fewer bytes were handed out.
            var sent: UInt64
            /// Where the upload last answered as one (created there, or said how far it has the form): a `Location`
            /// that moved it is saved only once something there has answered so.
            var answered: URL

            init(location: URL, acknowledged: UInt64, sent: UInt64) {
                (self.location, self.acknowledged, self.sent, answered) = (location, acknowledged, sent, location)
            }
        }

        /// What outlives one request.
        struct Course {
            /// What the server said it takes, from the `OPTIONS` and creation answers.
            var limits = Limits()
            /// Failures since the server's offset last moved on, of ``MultipartResumption/maximumAttempts``.
            var retries = 0
            /// When the first of them came, on the monotonic clock: the outage's start, which
            /// ``MultipartResumption/maximumWaitWithoutProgress`` bounds.
            var failingSince: UInt64?
            /// The ceiling of the wait before the next retry; back to the initial one once the offset moves on.
            var delay: Double
            /// Whether the upload expired once already and was created again.
            var restarted = false
            /// The position the saved state holds, when the upload keeps one.
            var saved: Position?
            /// The upload goes on from one another process saved, which is still to be announced.
            var announcesResume = false
            /// When the upload resource's lifetime ends on the monotonic clock, as the last `max-age` said.
            var expiry: UInt64?
            /// The saved upload's run before was interrupted moments ago: where the server stood at the last ask,
            /// and how many asks were made, until its offset stops growing.
            var settling: Settling?
            /// The creation goes without an `OPTIONS`, on what an earlier upload to the server found: a refusal of it
            /// asks the server again, as it may have changed since.
            var assumed = false
        }

        /// Asks about a saved upload whose run was interrupted moments ago, while the server drains what was in
        /// flight (the draft lets an offset grow while a cancelled request is still read).
        struct Settling {
            var last: UInt64?
            var asks = 0

            /// The wait between two asks, and the most asks.
            static let wait = 0.5
            static let most = 20
        }

        enum State {
            /// `OPTIONS`: does the server speak the draft.
            case detecting(Course)
            /// The creation request, with none of the form.
            case creating(Course)
            /// The creation request carrying the whole form, in the version spoken.
            case creatingComplete(Course)
            /// An append of the form's bytes from the acknowledged offset up to `end`.
            case appending(Resource, end: UInt64, Course)
            /// `HEAD`: where the server stands; `savedOffset` on the first ask about a saved upload, until the
            /// server says where it stands.
            case askingOffset(Resource, savedOffset: UInt64?, Course)
            /// `HEAD` after the retries were spent on an append, so that the upload kept for the next run says where
            /// the server stands; `failure` is why the run gives up.
            case askingFinalOffset(Resource, Course, failure: any Error)
            /// The last action has been given.
            case finished
        }

        /// The form's length; for a form holding a stream of unknown length, `nil` until the stream's end has been
        /// read (``lengthFound(_:)``).
        private(set) var contentLength: UInt64?
        let policy: MultipartResumption
        /// The caller's request URL: an upload resource on `http:` for an `https:` request is refused.
        let requestURL: URL?
        /// Whether the upload keeps a saved state, which a cancel leaves for another run to resume.
        let savesState: Bool
        /// A wait drawn from a range: at random (full jitter), or a fixed point of it in tests.
        private let jitter: @Sendable (ClosedRange<Double>) -> Double
        /// Nanoseconds on a monotonic clock, and when the upload began on it.
        private let clock: @Sendable () -> UInt64
        private let began: UInt64
        /// What this upload's `OPTIONS` found the server to speak, for the next upload to it (``KnownServer``).
        private(set) var found: KnownServer?
        /// The interop version the upload speaks: the newest until the server's `OPTIONS` answer says another, the
        /// saved one for a saved upload.
        private(set) var version: InteropVersion
        private(set) var state: State

        /// A machine for a new upload, or for one another process saved at `resuming` in `version`, whose resource
        /// has `savedLifetime` seconds left (none left: it is not asked about, and a new one starts), and whose run
        /// was `interruptedMomentsAgo` (its server is asked until its offset stops growing). A new upload to a server
        /// `known` to speak the draft creates its resource at once, in the version and limits an earlier one found.
        init(
            contentLength: UInt64?,
            policy: MultipartResumption,
            requestURL: URL? = nil,
            savesState: Bool = false,
            resuming saved: Position? = nil,
            version: InteropVersion = .newest,
            savedLifetime: Double? = nil,
            interruptedMomentsAgo: Bool = false,
            known: KnownServer? = nil,
            jitter: @escaping @Sendable (ClosedRange<Double>) -> Double = { .random(in: $0) },
            clock: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }
        ) {
            self.contentLength = contentLength
            self.policy = policy
            self.requestURL = requestURL
            self.savesState = savesState
            self.jitter = jitter
            self.clock = clock
            began = clock()
            self.version = saved == nil ? .newest : version
            expiredSave = saved != nil && savedLifetime.map { !($0 > 0) } == true
            var course = Course(delay: policy.wait(policy.initialDelay))
            guard let saved else {
                if let known { (self.version, course.limits, course.assumed) = (known.version, known.limits, true) }
                if policy.goesInOneRequest(contentLength) {
                    state = .creatingComplete(course)
                } else {
                    state = known == nil ? .detecting(course) : .creating(course)
                }
                return
            }
            guard !expiredSave else {
                // Past the server's `max-age`: the resource is not to be touched again, not even deleted.
                state = .finished
                return
            }
            if let savedLifetime { course.expiry = began.addingSaturated(Self.nanoseconds(savedLifetime)) }
            // The saved upload's server may have any byte of the form, up to every one: how far the other process
            // got is not known.
            if savesState { (course.saved, course.announcesResume) = (saved, true) }
            if interruptedMomentsAgo { course.settling = Settling() }
            // A saved form always has a length.
            let resource = Resource(
                location: saved.location, acknowledged: saved.acknowledged, sent: contentLength ?? saved.acknowledged)
            state = .askingOffset(resource, savedOffset: saved.acknowledged, course)
        }

        /// A saved upload whose lifetime had passed, which starts over.
        private let expiredSave: Bool

        /// The first action: send a small form in one request, or detect support, or ask a saved upload's offset, or
        /// create the upload on a server known to speak the draft; a saved upload past its lifetime starts over.
        mutating func start() -> Action {
            switch state {
            case .askingOffset: .send(.askOffset)
            case .creatingComplete(let course): createComplete(course)
            case .creating(let course) where course.assumed: create(course)
            default: expiredSave ? .startOver(.expired, deleting: nil) : .send(.detect)
            }
        }

        /// Where the upload lives, once created: where the request under way goes.
        var location: URL? {
            switch state {
            case .appending(let resource, _, _), .askingOffset(let resource, _, _),
                .askingFinalOffset(let resource, _, _):
                resource.location
            case .detecting, .creating, .creatingComplete, .finished: nil
            }
        }

        /// The bytes of the form the server said it has.
        var acknowledged: UInt64 { resource?.acknowledged ?? 0 }

        /// Retries made so far.
        var retries: Int { course?.retries ?? 0 }

        /// Seconds left of the outage's bound (``MultipartResumption/maximumWaitWithoutProgress``) while the upload
        /// fails without progress, 1 at least: a request sent then waits no longer for the network, so that a try
        /// that hangs (a connection the network left open) cannot outlast the bound. `nil` otherwise.
        var outageTimeLeft: Double? {
            guard let bound = policy.maximumWaitWithoutProgress, let since = course?.failingSince else { return nil }
            return max(1, bound - Double(clock().subtractingSaturated(since)) / 1e9)
        }

        private var resource: Resource? {
            switch state {
            case .appending(let resource, _, _), .askingOffset(let resource, _, _),
                .askingFinalOffset(let resource, _, _):
                resource
            case .detecting, .creating, .creatingComplete, .finished: nil
            }
        }

        private var course: Course? {
            switch state {
            case .detecting(let course), .creating(let course), .creatingComplete(let course),
                .appending(_, _, let course), .askingOffset(_, _, let course), .askingFinalOffset(_, let course, _):
                course
            case .finished: nil
            }
        }

        /// The next action after `event`.
        mutating func handle(_ event: Event) -> Action {
            switch event {
            case .cancelled:
                let location = location
                state = .finished
                return .cancel(deleting: savesState ? nil : location)
            case .keepFailed(let error):
                return fail(error)
            case .headersFailed(let error):
                return ended(by: error, formsOwn: false)
            case .answered(let answer, let reply, let handedOut):
                // Read in the version spoken: an older version's field says nothing in a newer one.
                let answer = answer.read(in: version)
                let action = answered(answer, reply, handedOut: handedOut)
                // An upload the server says it holds complete is never deleted, whatever else its answer says.
                return answer.isComplete == true ? action.sparingUpload : action
            case .failed(let error, let handedOut):
                guard Self.isConnectionFailure(error, during: state) else {
                    // A MultipartError of a request is the form's own: a part that changed or could not be read.
                    return ended(by: error, formsOwn: error is MultipartError)
                }
                switch state {
                case .detecting(let course): return retry(State.detecting, course, because: error)
                case .creating(let course): return retry(State.creating, course, because: error)
                case .creatingComplete(let course): return retry(State.creatingComplete, course, because: error)
                case .appending(let resource, _, let course):
                    return retry(asking(bounded(resource, by: handedOut)), course, because: error)
                case .askingOffset(let resource, _, let course):
                    return retry(asking(resource), course, because: error)
                case .askingFinalOffset(let resource, let course, let failure):
                    return stop(because: failure, resource, course, at: resource.acknowledged)
                case .finished:
                    return fail(error)
                }
            }
        }

        /// Whether an answer whose head is `response`, to the request under way, which had handed out `handedOut`
        /// bytes of the form when it came, ends the upload as its answer: judged on a copy, before its body, as
        /// ``handle(_:)`` will judge it once it ends, so that the body of an answer the upload goes on from never
        /// reaches the caller.
        func takesAsAnswer(_ response: HTTPURLResponse, handedOut: UInt64) -> Bool {
            var judge = self
            if case .answer = judge.handle(.answered(Answer(response), (Data(), response), handedOut: handedOut)) {
                return true
            }
            return false
        }

        private mutating func answered(_ answer: Answer, _ reply: Reply, handedOut: UInt64) -> Action {
            note(answer.limits)
            if let length = answer.length, let contentLength, length != contentLength, !isDetecting {
                // Any answer about the upload that counts another length holds another upload.
                return fail(
                    MultipartError(.uploadLengthMismatch(serverLength: length, contentLength: contentLength)))
            }
            switch state {
            case .detecting(let course): return detected(answer, course)
            case .creating(let course): return created(answer, reply, course)
            case .creatingComplete(let course): return createdComplete(answer, reply, handedOut: handedOut, course)
            case .appending(let resource, let end, let course):
                return appended(answer, reply, bounded(resource, by: handedOut), end: end, course)
            case .askingOffset(let resource, let savedOffset, let course):
                return offsetAnswered(answer, resource, savedOffset: savedOffset, course)
            case .askingFinalOffset(let resource, let course, let failure):
                return finalOffsetAnswered(answer, resource, course, failure: failure)
            case .finished:
                // The driver sends nothing once the machine has ended the upload.
                preconditionFailure("an answer after the resumable upload ended")
            }
        }

        private var isDetecting: Bool {
            if case .detecting = state { true } else { false }
        }

        /// Takes the limits an answer gives: a later answer refines an earlier one, and its `max-age` counts from now.
        private mutating func note(_ limits: Limits?) {
            guard let limits else { return }
            let now = clock()
            func noted(_ course: Course) -> Course {
                var course = course
                course.limits = course.limits.merging(limits)
                if let maxAge = limits.maxAge { course.expiry = now.addingSaturated(Self.nanoseconds(Double(maxAge))) }
                return course
            }
            switch state {
            case .detecting(let course): state = .detecting(noted(course))
            case .creating(let course): state = .creating(noted(course))
            case .creatingComplete(let course): state = .creatingComplete(noted(course))
            case .appending(let resource, let end, let course): state = .appending(resource, end: end, noted(course))
            case .askingOffset(let resource, let savedOffset, let course):
                state = .askingOffset(resource, savedOffset: savedOffset, noted(course))
            case .askingFinalOffset(let resource, let course, let failure):
                state = .askingFinalOffset(resource, noted(course), failure: failure)
            case .finished: break
            }
        }

        /// `seconds` on the monotonic clock, bounded to a century.
        private static func nanoseconds(_ seconds: Double) -> UInt64 {
            UInt64(min(max(seconds, 0), 3_153_600_000) * 1e9)
        }

        /// Seconds left of the upload resource's lifetime, where a `max-age` gave one.
        private func lifetime(_ course: Course) -> Double? {
            course.expiry.map { (Double($0) - Double(clock())) / 1e9 }
        }

        /// A failure that another request would meet too (TLS, the caller's headers, a URLSession error other than
        /// the connection's) ends this run. An upload whose state is saved is kept for the next run, unless the form
        /// itself failed (a part that changed or could not be read), which no run can send: the failure is not the
        /// server's word that the upload is over.
        private mutating func ended(by error: any Error, formsOwn: Bool) -> Action {
            guard savesState, !formsOwn, let resource, let course else { return fail(error) }
            if case .askingFinalOffset(_, _, let failure) = state {
                return stop(because: failure, resource, course, at: resource.acknowledged)
            }
            return stop(because: error, resource, course, at: resource.acknowledged)
        }

        /// The append handed out the form's bytes up to `handedOut` only: the server cannot have more, whatever the
        /// append's length.
        private func bounded(_ resource: Resource, by handedOut: UInt64) -> Resource {
            var resource = resource
            resource.sent = min(resource.sent, max(handedOut, resource.acknowledged))
            return resource
        }

        /// Whether `error` is the connection's, which another request may not meet: dropped, reset, timed out,
        /// refused, stalled; or, while sending the form's bytes, URLSession's own resend of them on a new connection,
        /// which the upload refused. Anything else (a part that failed, the caller's headers) ends the upload.
        private static func isConnectionFailure(_ error: any Error, during state: State) -> Bool {
            // The request's own failure, not one the upload made of it: a part that failed, or an answer that came
            // with a failure of the connection beneath it, is the request's, which the answer's handling decides.
            if let error = error as? MultipartError {
                switch state {
                case .appending, .creatingComplete: return FailureMeaning.of(error) == .resendRefused
                default: return false
                }
            }
            return FailureMeaning.of(error) == .noAnswer
        }

        // MARK: Answers

        private mutating func detected(_ answer: Answer, _ course: Course) -> Action {
            let supported =
                (200..<300).contains(answer.statusCode) && (answer.hasUploadLimit || answer.acceptsPartialUpload)
            if let named = answer.interopVersion, named != version.rawValue {
                // The server names another version (`NIOResumableUpload` refuses a newer one with a 400 that names
                // 6): an older one this client speaks is taken, or asked in at once.
                guard let other = InteropVersion(rawValue: named), other < version else {
                    return ask(in: version.older, course)
                }
                guard supported else { return ask(in: other, course) }
                version = other
            }
            guard supported else { return ask(in: version.older, course) }
            // The lifetime is each upload's own.
            var limits = course.limits
            limits.maxAge = nil
            found = KnownServer(version: version, limits: limits)
            return create(course)
        }

        /// The creation request, once the server is found to speak the draft in ``version`` with `course`'s limits:
        /// unless the form is too large for them, or their appends cannot be kept, or it is small enough to go whole.
        private mutating func create(_ course: Course) -> Action {
            state = .creating(course)
            if let tooLarge = overMaxSize(course.limits) { return fail(tooLarge) }
            if let unkeepable = unkeepableLimits(course.limits) { return fail(unkeepable) }
            if let minSize = course.limits.minSize, let contentLength, contentLength < minSize {
                return finish(.sendWhole(underMinimumSize: minSize))
            }
            return .send(.create)
        }

        /// The creation carrying the whole form, unless it is too large for a server known to speak the draft, or
        /// under its `min-size`, which goes as to a server without the draft.
        private mutating func createComplete(_ course: Course) -> Action {
            if let tooLarge = overMaxSize(course.limits) { return fail(tooLarge) }
            if let minSize = course.limits.minSize, let contentLength, contentLength < minSize {
                return finish(.sendWhole(underMinimumSize: minSize))
            }
            return .send(.createComplete)
        }

        /// The server does not speak this version: `next` is asked, until none is left. Any answer counts as not
        /// speaking it, even a 405: a server that speaks only an older version may leave a newer one's `OPTIONS` to
        /// its application.
        private mutating func ask(in next: InteropVersion?, _ course: Course) -> Action {
            guard let next else { return finish(.sendWhole(underMinimumSize: nil)) }
            var course = course
            course.limits = Limits()
            course.expiry = nil
            version = next
            state = .detecting(course)
            return .send(.detect)
        }

        /// Why limits cannot be kept: an append that does not complete the upload must carry at least
        /// `min-append-size` bytes and at most `max-append-size`; a stream of unknown length is held in memory an
        /// append at a time, at most ``mostBuffered`` bytes.
        private func unkeepableLimits(_ limits: Limits) -> MultipartError? {
            guard let least = limits.minAppendSize else { return nil }
            if let most = limits.maxAppendSize, least > most {
                return MultipartError(.appendLimitsConflict(minAppendSize: least, maxAppendSize: most))
            }
            if contentLength == nil, least > Self.mostBuffered {
                return MultipartError(.appendLimitsConflict(minAppendSize: least, maxAppendSize: Self.mostBuffered))
            }
            return nil
        }

        /// The most bytes one append of a stream of unknown length holds in memory, whatever the policy or the
        /// server asks.
        static let mostBuffered: UInt64 = 1 << 30

        private mutating func created(_ answer: Answer, _ reply: Reply, _ course: Course) -> Action {
            if isTransient(answer) {
                return retry(State.creating, course, because: UnexpectedAnswer(answer, to: .create))
            }
            let accepted =
                (200..<300).contains(answer.statusCode) && answer.location != nil
                && (answer.isComplete != true || contentLength == 0)
            if course.assumed, !accepted {
                // Found to speak the draft by an earlier upload, the server refused it this time: it is asked again,
                // from the newest version, and what it says now decides (a server that no longer speaks the draft
                // gets the whole form).
                var fresh = Course(delay: course.delay)
                fresh.retries = course.retries
                fresh.failingSince = course.failingSince
                version = .newest
                state = .detecting(fresh)
                return .send(.detect)
            }
            guard (200..<300).contains(answer.statusCode) else {
                // A refusal (a 4xx) is the application's answer; a redirect that was not followed is no answer.
                if (300..<400).contains(answer.statusCode) {
                    return fail(MultipartError(.redirectNotFollowed(statusCode: answer.statusCode, location: nil)))
                }
                return finish(.answer(reply))
            }
            // The creation carries none of the form: a server that calls it complete has an empty form.
            guard let location = answer.location, answer.isComplete != true || contentLength == 0 else {
                return fail(MultipartError(.resumptionRefused(statusCode: answer.statusCode)))
            }
            if let refused = refusal(of: location) { return fail(refused) }
            // The upload exists from here: a failure deletes it.
            let resource = Resource(location: location, acknowledged: 0, sent: 0)
            state = .askingOffset(resource, savedOffset: nil, course)
            if let tooLarge = overMaxSize(course.limits) { return fail(tooLarge) }
            if let unkeepable = unkeepableLimits(course.limits) { return fail(unkeepable) }
            return acknowledge(answer.offset ?? 0, answer: answer, resource, course)
        }

        /// The answer to the whole form in one request is the application's: one that says `Upload-Complete: ?1`,
        /// and any answer of a server without the draft, as to a plain upload. But a `400` that names an older version
        /// (as `NIOResumableUpload` names 6) did not take it: it goes again in that version. A success that says where
        /// the upload lives, or that it is incomplete, without `?1`, is the draft's word that the server keeps an
        /// upload resource, not the application's answer: the upload asks it how far it has the form and goes on
        /// from there, and fails where it says neither where nor complete.
        private mutating func createdComplete(_ answer: Answer, _ reply: Reply, handedOut: UInt64, _ course: Course)
            -> Action
        {
            if answer.statusCode == 400, let named = answer.interopVersion.flatMap(InteropVersion.init(rawValue:)),
                named < version
            {
                // The next upload to the server speaks it from the start.
                version = named
                found = KnownServer(version: named, limits: Limits())
                state = .creatingComplete(course)
                return .send(.createComplete)
            }
            // The request followed the redirects it could, as a plain upload's does: a 3xx here is the answer too.
            let keptAsAnUpload =
                answer.isComplete != true && (200..<300).contains(answer.statusCode)
                && (answer.isComplete == false || answer.location != nil || answer.offset != nil)
            guard keptAsAnUpload else { return finish(.answer(reply)) }
            guard let location = answer.location else {
                return fail(MultipartError(.resumptionRefused(statusCode: answer.statusCode)))
            }
            if let refused = refusal(of: location) { return fail(refused) }
            let sent = min(handedOut, contentLength ?? handedOut)
            state = .askingOffset(Resource(location: location, acknowledged: 0, sent: sent), savedOffset: nil, course)
            return .send(.askOffset)
        }

        /// The failure of a form over the server's `max-size`, before or after the upload exists.
        private func overMaxSize(_ limits: Limits) -> MultipartError? {
            guard let maxSize = limits.maxSize, let contentLength, contentLength > maxSize else { return nil }
            return MultipartError(.formOverUploadLimit(maxSize: maxSize, contentLength: contentLength))
        }

        private mutating func appended(
            _ answer: Answer, _ reply: Reply, _ resource: Resource, end: UInt64, _ course: Course
        ) -> Action {
            let step = Step.append(from: resource.acknowledged, upTo: end)
            let unexpected = UnexpectedAnswer(answer, to: step)
            if answer.isComplete == true {
                // The application's answer, whatever its status, for the append that said `?1` and handed out the
                // form's last byte; and from version 10, the application's refusal before it. A server cannot have
                // completed a form the client has not: any other claim is a breach (and `handle` deletes nothing the
                // server calls complete).
                if version.takesEarlyRefusal, !(200..<300).contains(answer.statusCode) { return finish(.answer(reply)) }
                guard let contentLength else {
                    return fail(MultipartError(.completedBeforeEnd(bytesSent: resource.sent)))
                }
                guard handedOutWholeForm(end: end, resource), answer.offset ?? contentLength == contentLength else {
                    return fail(completionClaimedEarly(answer, resource))
                }
                return finish(.answer(reply))
            }
            if let moved = movedUpload(answer, resource, course, step: step) { return moved }
            if answer.isComplete == false {
                // Not complete, whatever the status: a 2xx with an offset is a partial acceptance to go on from.
                guard let offset = answer.offset else { return retry(asking(resource), course, because: unexpected) }
                return resume(at: offset, answer: answer, resource, course, step: step)
            }
            switch answer.statusCode {
            case 404, 410:
                return restart(statusCode: answer.statusCode, course)
            case 413:
                // Too large: never the same size again, and never under `min-append-size`. The size the answer's
                // `Upload-Limit` allows, else half, and ask where the server stands; an append that is as small as
                // it may be and still too large is the server's refusal.
                let size = end.subtractingSaturated(resource.acknowledged)
                let least = max(course.limits.minAppendSize ?? 1, 1)
                // An empty append (the last, `?1`, at the form's end) cannot be made smaller: the 413 is the answer.
                guard size > 0 else { return finish(.answer(reply)) }
                let smaller = max(min(answer.limits?.maxAppendSize ?? size / 2, size - 1), least)
                guard smaller < size else { return finish(.answer(reply)) }
                var course = course
                course.limits.maxAppendSize = smaller
                return retry(asking(resource), course, because: unexpected)
            case 401 where savesState, 407 where savesState:
                // Refused for want of a credential (the server's, or a proxy's), which nothing here can give: not the
                // server's word on the upload, which a run with the credential resumes.
                return stop(because: unexpected, resource, course, at: resource.acknowledged)
            case 409:
                // Conflict: the server says where it stands.
                guard let offset = answer.offset else { return retry(asking(resource), course, because: unexpected) }
                return resume(at: offset, answer: answer, resource, course, step: step)
            case _ where isTransient(answer):
                return retry(asking(resource), course, because: unexpected)
            default:
                if (200..<300).contains(answer.statusCode), version.requiresUploadComplete {
                    // From version 7 on, a success without `Upload-Complete` says neither that the form is complete
                    // nor how far the server has it.
                    return fail(MultipartError(.uploadCompleteMissing(statusCode: answer.statusCode)))
                }
                if (200..<300).contains(answer.statusCode), end >= contentLength ?? .max,
                    !handedOutWholeForm(end: end, resource)
                {
                    // An application answer to the last append before its last byte was handed out.
                    return fail(completionClaimedEarly(answer, resource))
                }
                if end < contentLength ?? .max, (200..<300).contains(answer.statusCode) {
                    // A success for a part that was sent as incomplete: where the server stands says how it went.
                    if let offset = answer.offset {
                        return resume(at: offset, answer: answer, resource, course, step: step)
                    }
                    state = asking(resource)(course)
                    return .send(.askOffset)
                }
                // An application answer from a server that does not echo `Upload-Complete`, or a refusal.
                return finish(.answer(reply))
            }
        }

        /// Whether the append up to `end` said `?1` (it reaches the form's end) and handed out the form's last byte:
        /// the only append whose answer may be the application's.
        private func handedOutWholeForm(end: UInt64, _ resource: Resource) -> Bool {
            guard let contentLength else { return false }
            return end >= contentLength && resource.sent >= contentLength
        }

        /// The breach of an answer that calls the upload complete before ``handedOutWholeForm(end:_:)``.
        private func completionClaimedEarly(_ answer: Answer, _ resource: Resource) -> MultipartError {
            MultipartError(
                .completionClaimedEarly(offset: answer.offset, bytesSent: resource.sent, contentLength: contentLength))
        }

        private mutating func offsetAnswered(
            _ answer: Answer, _ resource: Resource, savedOffset: UInt64?, _ course: Course
        ) -> Action {
            if let savedOffset, let startOver = startOver(answer, resource, savedOffset: savedOffset) {
                return startOver
            }
            if answer.statusCode == 404 || answer.statusCode == 410 {
                return restart(statusCode: answer.statusCode, course)
            }
            if let moved = movedUpload(answer, resource, course, step: .askOffset) { return moved }
            let unexpected = UnexpectedAnswer(answer, to: .askOffset)
            if isTransient(answer) { return retry(asking(resource), course, because: unexpected) }
            guard (200..<300).contains(answer.statusCode), let offset = answer.offset else {
                return giveUp(because: unexpected)
            }
            if let breach = breach(offset: offset, answer: answer, resource) { return fail(breach) }
            if let complete = completed(answer, at: offset, resource, course) { return complete }
            var course = course
            if let settling = course.settling, settling.asks < Settling.most, settling.last.map({ offset > $0 }) ?? true
            {
                course.settling = Settling(last: offset, asks: settling.asks + 1)
                state = .askingOffset(resource, savedOffset: savedOffset, course)
                return .settle(offset: offset, seconds: Settling.wait)
            }
            // Settled, or never asked to: later asks go on at once. Every byte but not complete (`?0`): an empty
            // append with `?1` completes it.
            course.settling = nil
            return acknowledge(offset, answer: answer, resource, course)
        }

        /// What a `HEAD`'s 2xx at `offset` says of completion, `nil` where it says the upload is not complete. `?1` with
        /// every byte (`offset` is the form's length): the application has the form, but its answer went with the
        /// connection, and the upload is never deleted. Every byte and no word either way (a version 6 server may
        /// leave the field out) is completed by an empty append with `?1`, whose answer is the application's, never
        /// assumed. Any other word is a breach that says neither that the form reached the application nor that it
        /// did not: from version 7 on no `Upload-Complete` (or one that is no boolean), or `?1` at an offset short of
        /// the form's length (or of a form whose length the client has not found yet). Nothing is deleted, and a
        /// saved upload is kept, resource and state, for a later run to ask again.
        private mutating func completed(_ answer: Answer, at offset: UInt64, _ resource: Resource, _ course: Course)
            -> Action?
        {
            let breach: MultipartError
            switch answer.isComplete {
            case false?: return nil
            case nil:
                guard version.requiresUploadComplete else { return nil }
                breach = MultipartError(.uploadCompleteMissing(statusCode: answer.statusCode))
            case true?:
                guard let contentLength, offset == contentLength else {
                    breach = MultipartError(.completeAtShortOffset(offset: offset, contentLength: contentLength))
                    break
                }
                return finish(.fail(MultipartError(.answerLost(contentLength: contentLength)), deleting: nil))
            }
            guard savesState else { return finish(.fail(breach, deleting: nil)) }
            return finish(.stop(breach, keeping: keeping(resource, course, at: resource.acknowledged)))
        }

        /// The first answer about a saved upload: start over when the server no longer has it, or has less of it
        /// than it acknowledged before (deleting what is left); `nil` to go on as with any answer.
        private mutating func startOver(_ answer: Answer, _ resource: Resource, savedOffset: UInt64) -> Action? {
            if answer.statusCode == 404 || answer.statusCode == 410 {
                return finish(.startOver(.uploadGone(statusCode: answer.statusCode), deleting: nil))
            }
            guard (200..<300).contains(answer.statusCode), let offset = answer.offset, offset < savedOffset else {
                return nil
            }
            let reason = MultipartResumption.StartOverReason.offsetLost(serverOffset: offset, savedOffset: savedOffset)
            return finish(.startOver(reason, deleting: resource.location))
        }

        // MARK: Offsets

        /// The server has `offset` bytes: send the rest, once the offset is checked.
        private mutating func acknowledge(_ offset: UInt64, answer: Answer, _ resource: Resource, _ course: Course)
            -> Action
        {
            if let breach = breach(offset: offset, answer: answer, resource) { return fail(breach) }
            var (resource, course) = (resource, course)
            if offset > resource.acknowledged {
                // Progress gives the retries back, and ends an outage.
                (course.delay, course.retries, course.failingSince) = (policy.wait(policy.initialDelay), 0, nil)
            }
            resource.acknowledged = offset
            resource.answered = resource.location
            let end = appendEnd(from: offset, course.limits)
            resource.sent = max(resource.sent, end)
            let step = Step.append(from: offset, upTo: end)
            guard savesState else {
                state = .appending(resource, end: end, course)
                return .send(step)
            }
            // The saved state says where the upload stands before any of the append goes out.
            let position = Position(location: resource.location, acknowledged: offset)
            var keeping = Keeping(lifetime: lifetime(course))
            if course.announcesResume, course.saved?.location == resource.location { keeping.resumedAt = offset }
            if course.saved != position { keeping.writing = position }
            (course.saved, course.announcesResume) = (position, false)
            state = .appending(resource, end: end, course)
            return keeping.isEmpty ? .send(step) : .keep(keeping, then: step)
        }

        /// Where an append from `offset` ends: the form's end, or sooner when `max-append-size` says so. While the
        /// form's length is unknown, an append carries ``MultipartResumption/bufferedAppendSize`` bytes, within the
        /// server's limits: what is held in memory until the server acknowledges it.
        private func appendEnd(from offset: UInt64, _ limits: Limits) -> UInt64 {
            guard let contentLength else {
                // Held in memory twice over: bounded, whatever the policy says.
                var size = Swift.min(UInt64(Swift.max(policy.bufferedAppendSize, 1)), Self.mostBuffered)
                if let most = limits.maxAppendSize, most > 0 { size = min(size, most) }
                if let least = limits.minAppendSize { size = min(max(size, least), Self.mostBuffered) }
                return offset.addingSaturated(size)
            }
            guard let most = limits.maxAppendSize, most > 0 else { return contentLength }
            return offset.addingSaturated(min(most, contentLength.subtractingSaturated(offset)))
        }

        /// The stream of unknown length ended, the form being `length` bytes long, found while the append under way
        /// was read into memory before it went out: the append ends there if it reaches it, and says it completes
        /// the upload. Then the form's length is checked as a known one is.
        mutating func lengthFound(_ length: UInt64) -> Action {
            guard contentLength == nil, case .appending(var resource, let appendEnd, let course) = state else {
                // The driver finds a stream's end only while it fills an append of a form of unknown length.
                preconditionFailure("a stream's end while no append of unknown length was under way")
            }
            contentLength = length
            if let tooLarge = overMaxSize(course.limits) { return fail(tooLarge) }
            guard resource.acknowledged <= length else {
                return fail(MultipartError(.offsetOutOfRange(offset: resource.acknowledged, allowed: 0...length)))
            }
            let end = min(appendEnd, length)
            resource.sent = min(resource.sent, length)
            state = .appending(resource, end: end, course)
            return .send(.append(from: resource.acknowledged, upTo: end))
        }

        /// Why `offset` (and the answer's `Upload-Length`) cannot be the server's: an offset never goes down, is
        /// never more than was sent, nor more than the form.
        private func breach(offset: UInt64, answer: Answer, _ resource: Resource) -> MultipartError? {
            if let length = answer.length, let contentLength, length != contentLength {
                return MultipartError(.uploadLengthMismatch(serverLength: length, contentLength: contentLength))
            }
            let allowed = resource.acknowledged...max(resource.acknowledged, min(resource.sent, contentLength ?? .max))
            guard allowed.contains(offset) else {
                return MultipartError(.offsetOutOfRange(offset: offset, allowed: allowed))
            }
            return nil
        }

        /// The server said where it stands (a conflict, or an answer that the form is incomplete): an answer rather
        /// than a drop, so the rest goes at once from there; a retry, unless the offset moved on.
        private mutating func resume(
            at offset: UInt64, answer: Answer, _ resource: Resource, _ course: Course, step: Step
        ) -> Action {
            var course = course
            if offset <= resource.acknowledged {
                guard course.retries < policy.maximumAttempts else {
                    return giveUp(because: UnexpectedAnswer(answer, to: step))
                }
                failed(&course)
            }
            return acknowledge(offset, answer: answer, resource, course)
        }

        // MARK: Where the upload lives

        /// A 307 or 308 from the upload resource moves it (refused as a `Location` would be); any other redirect
        /// that was not followed ends the upload. Never the upload's answer.
        private mutating func movedUpload(_ answer: Answer, _ resource: Resource, _ course: Course, step: Step)
            -> Action?
        {
            guard (300..<400).contains(answer.statusCode) else { return nil }
            guard answer.statusCode == 307 || answer.statusCode == 308, let moved = answer.location else {
                return fail(MultipartError(.redirectNotFollowed(statusCode: answer.statusCode, location: nil)))
            }
            if let refused = refusal(of: moved) { return fail(refused) }
            guard course.retries < policy.maximumAttempts else {
                return giveUp(because: UnexpectedAnswer(answer, to: step))
            }
            var (resource, course) = (resource, course)
            failed(&course)
            resource.location = moved
            state = asking(resource)(course)
            return .send(.askOffset)
        }

        /// Why the upload cannot live at `url`: a URL that cannot be requested, one that asks for TLS where the server
        /// answered plain HTTP, or plain `http:` for an `https:` request.
        private func refusal(of url: URL) -> MultipartError? {
            if let flaw = url.flawAsServerChosen ?? tlsOnAPlainPort(url) {
                return MultipartError(.unusableUploadLocation(String(url.absoluteString.prefix(200)), flaw: flaw))
            }
            let scheme = url.scheme?.lowercased()
            guard scheme == "https" || scheme == "http" && requestURL?.scheme?.lowercased() != "https" else {
                return MultipartError(.insecureUploadLocation(url))
            }
            return nil
        }

        /// Why `url` cannot be what the server speaks: `https:` on the host and port that answered the request in
        /// plain HTTP. One port does not speak both, so every append would hang in the TLS handshake until it
        /// stalled, and every rerun's `HEAD` too: refused at creation, nothing is saved.
        private func tlsOnAPlainPort(_ url: URL) -> String? {
            guard url.scheme?.lowercased() == "https", let requestURL, requestURL.scheme?.lowercased() == "http",
                let host = url.host?.lowercased(), host == requestURL.host?.lowercased(),
                (url.port ?? 443) == (requestURL.port ?? 80)
            else { return nil }
            return "it asks for https on the port that answered plain http"
        }

        /// The upload expired: create it again from byte 0, once.
        private mutating func restart(statusCode: Int, _ course: Course) -> Action {
            guard !course.restarted else { return fail(MultipartError(.uploadExpired(statusCode: statusCode))) }
            var course = course
            course.restarted = true
            state = .creating(course)
            return .send(.create)
        }

        // MARK: Retries and the end

        /// 408, 429, 503 and other 5xx: the server may take the request later.
        private func isTransient(_ answer: Answer) -> Bool {
            FailureMeaning.of(statusCode: answer.statusCode).isTransient
        }

        /// The state that asks where the server has `resource`.
        private func asking(_ resource: Resource) -> (Course) -> State {
            { .askingOffset(resource, savedOffset: nil, $0) }
        }

        /// Counts a failure without progress, the first of an outage noting when it began.
        private func failed(_ course: inout Course) {
            course.retries += 1
            if course.failingSince == nil { course.failingSince = clock() }
        }

        /// Another try, in the state `next` makes, after the backoff (or the server's `Retry-After`): unless the
        /// retries are spent, the outage has lasted the longest the policy waits out, or the wait would end past the
        /// total time the policy allows.
        private mutating func retry(_ next: (Course) -> State, _ course: Course, because failure: any Error)
            -> Action
        {
            let appending = if case .appending = state { true } else { false }
            var course = course
            state = next(course)
            guard course.retries < policy.maximumAttempts else {
                return giveUp(because: failure, askingFirst: appending)
            }
            failed(&course)
            // The server's own wait as it is (bounded); else one drawn from the upper half of the ceiling (never
            // below the initial wait), so that a long outage is probed every `maximumDelay / 2` at the most often.
            let retryAfter = (failure as? UnexpectedAnswer)?.retryAfter
            let least = min(max(policy.wait(policy.initialDelay), course.delay / 2), course.delay)
            var wait = retryAfter.map(policy.wait) ?? jitter(least...course.delay)
            course.delay = policy.wait(course.delay * 2)
            state = next(course)
            let now = clock()
            if let bound = policy.maximumWaitWithoutProgress, let since = course.failingSince {
                let waited = Double(now.subtractingSaturated(since)) / 1e9
                guard waited < bound else {
                    let reason = MultipartError.Reason.outageOutlasted(
                        seconds: waited, bytesAcknowledged: acknowledged, contentLength: contentLength)
                    return outlasted(MultipartError(reason, underlying: failure), askingFirst: appending)
                }
                // The last try starts at the bound, not before it.
                wait = min(wait, bound - waited)
            }
            let elapsed = Double(now.subtractingSaturated(began)) / 1e9
            if let limit = policy.maximumDuration, elapsed + wait > limit {
                let reason = MultipartError.Reason.resumeTimeExceeded(
                    seconds: elapsed, bytesAcknowledged: acknowledged, contentLength: contentLength)
                return outlasted(MultipartError(reason, underlying: failure), askingFirst: appending)
            }
            let step: Step =
                switch state {
                case .detecting: .detect
                case .creating: .create
                case .creatingComplete: .createComplete
                default: .askOffset
                }
            return .wait(seconds: wait, then: step)
        }

        /// Ends an upload that waited as long as the policy allows: a time, not the server's word, so an upload whose
        /// state is saved is kept for the next run (as after spent retries, the server asked first after an append);
        /// one without saved state fails, its upload resource deleted, since nobody can resume it.
        private mutating func outlasted(_ error: MultipartError, askingFirst: Bool) -> Action {
            guard savesState, let resource, let course else { return fail(error) }
            guard askingFirst else { return stop(because: error, resource, course, at: resource.acknowledged) }
            state = .askingFinalOffset(resource, course, failure: error)
            return .send(.askOffset)
        }

        /// Gives up, with where the upload stood and the last failure beneath. An upload whose state is saved is
        /// kept for the next run, which resumes it: none of these failures is the server's word that the upload is
        /// over. After an append (`askingFirst`), the server is asked where it stands first.
        private mutating func giveUp(because failure: any Error, askingFirst: Bool = false) -> Action {
            guard savesState, let resource, let course else {
                let reason = MultipartError.Reason.resumeFailed(
                    retries: retries, bytesAcknowledged: acknowledged, contentLength: contentLength)
                return fail(MultipartError(reason, underlying: failure))
            }
            guard askingFirst else { return stop(because: failure, resource, course, at: resource.acknowledged) }
            state = .askingFinalOffset(resource, course, failure: failure)
            return .send(.askOffset)
        }

        /// The answer to the `HEAD` before giving up: the offset the kept upload resumes at, where the server gives
        /// one; the upload ends only where the server says it is gone or has the form, or breaks the protocol.
        private mutating func finalOffsetAnswered(
            _ answer: Answer, _ resource: Resource, _ course: Course, failure: any Error
        ) -> Action {
            if answer.statusCode == 404 || answer.statusCode == 410 {
                return fail(MultipartError(.uploadExpired(statusCode: answer.statusCode), underlying: failure))
            }
            guard (200..<300).contains(answer.statusCode), let offset = answer.offset else {
                return stop(because: failure, resource, course, at: resource.acknowledged)
            }
            if let breach = breach(offset: offset, answer: answer, resource) { return fail(breach) }
            if let complete = completed(answer, at: offset, resource, course) { return complete }
            return stop(because: failure, resource, course, at: offset)
        }

        /// Gives up this run, keeping the upload at `offset` for the next: its position is written where the saved
        /// state does not hold it yet.
        private mutating func stop(
            because failure: any Error, _ resource: Resource, _ course: Course, at offset: UInt64
        )
            -> Action
        {
            let reason = MultipartError.Reason.resumeSaved(
                retries: course.retries, bytesAcknowledged: offset, contentLength: contentLength ?? offset)
            return finish(
                .stop(MultipartError(reason, underlying: failure), keeping: keeping(resource, course, at: offset)))
        }

        /// What keeping `resource` for the next run at `offset` writes: its position, where the saved state does not
        /// hold it yet. Where the upload last answered: a move nothing has answered at yet is not saved, or every
        /// later run would ask there and find nothing.
        private func keeping(_ resource: Resource, _ course: Course, at offset: UInt64) -> Keeping? {
            let position = Position(location: resource.answered, acknowledged: offset)
            return course.saved == position ? nil : Keeping(writing: position, lifetime: lifetime(course))
        }

        /// Gives up with `error`, deleting the upload resource if there is one.
        private mutating func fail(_ error: any Error) -> Action {
            finish(.fail(error, deleting: location))
        }

        private mutating func finish(_ action: Action) -> Action {
            state = .finished
            return action
        }
    }

    /// An answer of the server that a resumable upload could not go on from: the underlying error of its failure.
    struct UnexpectedAnswer: Error, CustomStringConvertible, LocalizedError {
        let description: String
        /// The answer's status; `nil` where no status is known.
        var statusCode: Int?
        /// The answer's `Retry-After`, in seconds.
        var retryAfter: Double?

        init(_ description: String) {
            self.description = description
        }

        init(_ answer: Answer, to step: Step) {
            statusCode = answer.statusCode
            var text = "\(step.name) answered \(answer.statusCode)"
            if let isComplete = answer.isComplete { text += isComplete ? ", complete" : ", incomplete" }
            if let offset = answer.offset { text += " at \(offset)" }
            description = text
            retryAfter = answer.retryAfter
        }

        var errorDescription: String? { description }
    }
}
