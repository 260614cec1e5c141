import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartQueue
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// Cancels at random moments around each upload's natural end, on every way the library stops a task. Linux
    /// URLSession traps when its own `cancel()` meets that end (``CancelGate``): such a storm met it within the first
    /// hundred cancels, through every way, before the gate. Now every upload ends cancelled, or whole where its end
    /// came first (what the server parsed checked), within 0.5 s of its cancel (``CancelBound``: the long storm
    /// measures it alone; `swift test`'s storm, beside other suites, within 5 s); the process lives; and nothing is
    /// left open once the uploads are idle.
    @Suite(.serialized) struct CancelStormTests {
        /// A way the library stops an upload.
        enum Way: String, CaseIterable, Sendable, CustomStringConvertible {
            /// The task awaiting `upload(_:with:)` is cancelled.
            case task
            /// The `Progress` given to `upload(_:with:progress:)` is cancelled, as a Cancel button does.
            case progress
            /// `cancelMultipartUpload(_:)` of a task from `multipartUploadTask`.
            case handedOutTask
            /// `cancelMultipartUpload(_:)` of a task from `uploadTask(withStreamedRequest:)` on a session whose
            /// delegate is a ``MultipartStreamedUploadDelegate``: the caller's session, with its `URLCache`.
            case streamedDelegate
            /// The task awaiting a resumable upload to a draft server is cancelled, among its several requests.
            case resumable

            var description: String { rawValue }
        }

        /// The forms' file sizes: small, 64 KiB and 1 MiB.
        static let sizes = [200, 64 << 10, 1 << 20]

        /// What a storm saw.
        struct Figures: CustomStringConvertible {
            var cancels = 0
            /// Uploads that ended cancelled.
            var cancelled = 0
            /// Uploads whose end came before their cancel, the server's answer checked.
            var whole = 0
            /// The longest time from a cancel to the end of its upload.
            var slowest = 0.0
            /// The longest a cancel's call took to return, of the time above: the rest is the way back to the caller.
            var slowestCall = 0.0
            /// How late, at most, a task of Swift's concurrency pool woke meanwhile: a slow cancel beside a late pool
            /// is the machine's load, one beside a pool on time is the library's.
            var poolLate = 0.0

            mutating func add(_ other: Figures) {
                cancels += other.cancels
                cancelled += other.cancelled
                whole += other.whole
                slowest = max(slowest, other.slowest)
                slowestCall = max(slowestCall, other.slowestCall)
                poolLate = max(poolLate, other.poolLate)
            }

            var description: String {
                "\(cancels) cancels, \(cancelled) cancelled, \(whole) whole, slowest \(Int(slowest * 1000)) ms "
                    + "(its call \(Int(slowestCall * 1000)) ms; the pool late \(Int(poolLate * 1000)) ms at most)"
            }
        }

        /// The in-suite storm: 200, 30 and 15 cancels for the three sizes, on each way.
        @Test(arguments: Way.allCases)
        func cancelsAroundTheNaturalEndNeverTrapAndLeaveNothingOpen(way: Way) async throws {
            let figures = try await Self.storms(way, counts: [200, 30, 15], seed: 69)
            print("cancel storm, \(way): \(figures)")
        }

        /// The long storm: thousands of cancels on each way, in a process of its own (`measuredAlone`), where each
        /// must end within the promise's 0.5 s.
        @Test(.longRun, .tags(.measuredAlone), arguments: Way.allCases)
        func thousandsOfCancelsAroundTheNaturalEndNeverTrap(way: Way) async throws {
            let figures = try await Self.storms(way, counts: [1000, 200, 50], seed: 6969)
            print("long cancel storm, \(way): \(figures)")
        }

        #if compiler(>=6.2)  // exit tests are Swift 6.2's; the manifest's 6.1 builds the rest
            /// The reference: URLSession's own `cancel()`, in the same storm of small uploads on a session of its own
            /// with a delegate, traps the process (in a child process here). If it did not, the storm would not reach
            /// the moment the library's ways are tested in.
            @Test(.longRun) func urlSessionsOwnCancelTrapsInTheSameStorm() async {
                await #expect(processExitsWith: .failure) {
                    let server = try await UploadServer()
                    let delegate = Ends()
                    let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
                    var form = MultipartFormData()
                    form.append("storm", name: "id")
                    form.append(Data(count: 200), name: "file", fileName: "f.bin")
                    var generator = SeededGenerator(seed: 1)
                    for index in 0..<20_000 {
                        let ended = Reported()
                        let task = session.dataTask(
                            with: URLRequest(url: server.url("/?i=\(index)"), multipartFormData: form))
                        delegate.expect(task, ended)
                        task.resume()
                        try await Task.sleep(nanoseconds: UInt64.random(in: 0...1_500_000, using: &generator))
                        task.cancel()
                        try await Stopwatch.wait(atMost: 10, polling: 0.0005) { !ended.isSet }
                    }
                }
            }
        #endif

        /// A queue's pause and remove, each at a random moment of a run of small uploads to a draft server (so among
        /// the requests of each resumable upload, around each one's end): the process lives, a paused upload is paused
        /// (or completed, where it ended first), a removed one is gone, and the run returns.
        @Test func aQueuesPausesAndRemovesAtRandomMomentsNeverTrap() async throws {
            let server = try await DraftServer()
            let directory = try TemporaryDirectory()
            let queue = try MultipartUploadQueue(directory: directory.path("queue"))
            var form = MultipartFormData()
            form.append("storm", name: "id")
            form.append(Data(count: 200), name: "file", fileName: "f.bin")
            var ids: [MultipartUploadQueue.ID] = []
            for _ in 0..<60 { ids.append(try await queue.add(form, with: URLRequest(url: server.url()))) }
            let session = URLSession(configuration: .ephemeral)
            defer { session.finishTasksAndInvalidate() }
            let run = Task { try await queue.run(on: session) }
            var generator = SeededGenerator(seed: 70)
            var removed: [MultipartUploadQueue.ID] = []
            var paused: [MultipartUploadQueue.ID] = []
            for id in ids {
                try await Task.sleep(nanoseconds: UInt64.random(in: 0...3_000_000, using: &generator))
                if Bool.random(using: &generator) {
                    await queue.remove(id, on: session)
                    removed.append(id)
                } else {
                    try await queue.pause(id)
                    paused.append(id)
                }
            }
            try await within(seconds: 60, "the queue's run") { try await run.value }
            for id in removed { #expect(await queue.upload(id) == nil, "removed \(id)") }
            for id in paused {
                let state = await queue.upload(id)?.state
                switch state {
                case .paused, .completed: break
                default: Issue.record("paused \(id): \(String(describing: state))")
                }
            }
        }

        /// The longest a cancel may take to return: the promise's 0.5 s where the storm runs alone, 5 s beside other
        /// suites (``CancelBound`` says why).
        static let longestCancel = CancelBound.seconds()

        /// Storms of each size on `way`, `counts[i]` cancels for `sizes[i]`, then what is left once idle.
        static func storms(_ way: Way, counts: [Int], seed: UInt64) async throws -> Figures {
            let saved = PrivateSessions.shared.idleTimeout
            PrivateSessions.shared.idleTimeout = 0.2
            defer { PrivateSessions.shared.idleTimeout = saved }
            let directory = try TemporaryDirectory()
            let bodies = try TemporaryBodies.names()
            var total = Figures()
            // The storms' own caller sessions: the private sessions of other suites' uploads, which run beside this
            // one, are theirs to close.
            var callers: [URLSession] = []
            for (size, count) in zip(sizes, counts) {
                let figures = try await storm(
                    way, size: size, count: count, seed: seed, in: directory, callers: &callers)
                #expect(figures.slowest < Self.longestCancel, "\(way), \(size) bytes: \(figures)")
                total.add(figures)
            }
            // Around the end: some cancels came before it and some after.
            #expect(total.cancelled > 0 && total.whole > 0, "\(way): \(total)")
            let open = { callers.filter { PrivateSessions.shared.isOpen(for: $0) }.count }
            try await Stopwatch.wait(atMost: 10, polling: 0.02) { open() > 0 }
            #expect(open() == 0, "\(way): a private session outlived its idle timeout")
            #expect(OpenDescriptors.count(under: directory.url) == 0, "\(way): a file was left open")
            #expect(try await TemporaryBodies.noneLeft(since: bodies), "\(way): a temporary body was left")
            return total
        }

        /// `count` uploads of a form with a file of `size` bytes, each cancelled at a random moment: half within
        /// 1.5 ms of its start (where Linux URLSession, waiting for its cache, starts the task before its cancel takes
        /// effect), half up to twice its natural length.
        static func storm(
            _ way: Way, size: Int, count: Int, seed: UInt64, in directory: TemporaryDirectory,
            callers: inout [URLSession]
        ) async throws -> Figures {
            let sender = try await Sender(way, size: size, in: directory)
            callers.append(sender.session)
            let pool = PoolLateness()
            defer { pool.stop() }
            // How long an upload takes when it is not cancelled: the median of five.
            var lengths: [Double] = []
            for _ in 0..<5 {
                let stopwatch = Stopwatch()
                let upload = try sender.start()
                try await upload.waitForEnd()
                lengths.append(stopwatch.seconds)
                #expect(try sender.isWhole(upload), "\(way), \(size) bytes: an upload not cancelled")
            }
            let natural = lengths.sorted()[2]
            var generator = SeededGenerator(seed: seed &+ UInt64(size))
            var figures = Figures()
            for index in 0..<count {
                let latest = Bool.random(using: &generator) ? 0.0015 : 2 * natural
                let delay = UInt64(Double.random(in: 0...latest, using: &generator) * 1e9)
                let upload = try sender.start()
                try await Task.sleep(nanoseconds: delay)
                let cancelled = DispatchTime.now().uptimeNanoseconds
                upload.cancel()
                let returned = DispatchTime.now().uptimeNanoseconds
                try await upload.waitForEnd()
                // From the cancel to the end the caller was given, as the end was given, not as this loop saw it.
                let ended = upload.ended.time ?? cancelled
                figures.slowest = max(figures.slowest, Double(ended &- min(ended, cancelled)) / 1e9)
                figures.slowestCall = max(figures.slowestCall, Double(returned &- cancelled) / 1e9)
                figures.cancels += 1
                if upload.wasCancelled {
                    figures.cancelled += 1
                    sender.expectCancelled(upload)
                } else {
                    #expect(try sender.isWhole(upload), "\(way), \(size) bytes, upload \(index): \(upload.outcome)")
                    figures.whole += 1
                }
            }
            try await sender.close()
            figures.poolLate = pool.stop()
            return figures
        }
    }
}

/// Starts the uploads of one storm on one way, and says what each ended with.
private final class Sender: Sendable {
    typealias Way = URLSessionSuites.CancelStormTests.Way

    let way: Way
    let form: MultipartFormData
    let contents: Data
    /// The SHA-256 of the form's whole body, which the draft server answers.
    let formSHA256: String
    let server: UploadServer?
    let draft: DraftServer?
    let session: URLSession
    let ends = Ends()

    init(_ way: Way, size: Int, in directory: TemporaryDirectory) async throws {
        self.way = way
        let contents = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        self.contents = contents
        let file = try directory.file("storm-\(size).bin", contents: contents)
        var form = MultipartFormData()
        form.append("storm", name: "id")
        // A small form in memory, which `.automatic` sends as bytes; the others stream a file.
        if size < 1024 {
            form.append(contents, name: "file", fileName: "storm.bin")
        } else {
            try form.append(fileURL: file, name: "file")
        }
        self.form = form
        formSHA256 = try sha256sums([directory.file("storm-\(size).form", contents: form.encode())])[0]
        if way == .resumable {
            draft = try await DraftServer()
            server = nil
        } else {
            server = try await UploadServer()
            draft = nil
        }
        session =
            way == .streamedDelegate
            ? URLSession(
                configuration: .ephemeral,
                delegate: MultipartStreamedUploadDelegate { [ends] task, data, _, error in
                    ends.end(task, data: data, error: error)
                }, delegateQueue: nil)
            : URLSession(configuration: .ephemeral)
    }

    /// One upload under way, and how to stop it.
    final class Upload: Sendable {
        let ended: Ended
        let stop: @Sendable () -> Void
        let progress: Progress?

        init(_ ended: Ended, progress: Progress? = nil, stop: @escaping @Sendable () -> Void) {
            self.ended = ended
            self.progress = progress
            self.stop = stop
        }

        func cancel() { stop() }

        /// Waits up to 10 s for the upload to end.
        func waitForEnd() async throws {
            try await Stopwatch.wait(atMost: 10, polling: 0.0005) { !ended.isSet }
            #expect(ended.isSet, "an upload never ended")
        }

        var outcome: Result<Data, any Error>? { ended.value }

        var wasCancelled: Bool {
            guard case .failure(let error) = outcome else { return false }
            return error is CancellationError || (error as? URLError)?.code == .cancelled
        }
    }

    func start() throws -> Upload {
        let form = form
        let session = session
        switch way {
        case .task, .resumable:
            let request = URLRequest(url: server?.url("/") ?? draft!.url())
            let strategy: MultipartUploadStrategy = way == .resumable ? .resumable(MultipartResumption()) : .automatic
            let ended = Ended()
            let work = Task {
                do {
                    ended.set(.success(try await session.upload(form, with: request, strategy: strategy).0))
                } catch {
                    ended.set(.failure(error))
                }
            }
            return Upload(ended, stop: { work.cancel() })
        case .progress:
            let request = URLRequest(url: server!.url("/"))
            let progress = Progress(totalUnitCount: 0)
            let ended = Ended()
            Task {
                do {
                    ended.set(.success(try await session.upload(form, with: request, progress: progress).0))
                } catch {
                    ended.set(.failure(error))
                }
            }
            return Upload(ended, progress: progress, stop: { progress.cancel() })
        case .handedOutTask:
            let ended = Ended()
            let task = session.multipartUploadTask(with: URLRequest(url: server!.url("/")), form: form) {
                data, _, error in
                ended.set(error.map { .failure($0) } ?? .success(data ?? Data()))
            }
            task.resume()
            return Upload(ended, stop: { session.cancelMultipartUpload(task) })
        case .streamedDelegate:
            let ended = Ended()
            let task = session.uploadTask(
                withStreamedRequest: URLRequest(url: server!.url("/"), multipartFormData: form))
            ends.expect(task, ended)
            task.resume()
            return Upload(ended, stop: { session.cancelMultipartUpload(task) })
        }
    }

    /// Whether the upload succeeded with the whole form: what the server parsed, or for a resumable upload the
    /// application's answer, says every part's bytes.
    func isWhole(_ upload: Upload) throws -> Bool {
        guard case .success(let data) = upload.outcome else { return false }
        if let server {
            let seen = try server.seen(in: data)
            let file = seen.parts?.first { $0.name == "file" }
            return seen.bytes == Int(form.contentLength!) && seen.parts?.count == 2 && file?.body == contents
        }
        let answer = try JSONDecoder().decode(DraftServer.Form.self, from: data)
        return answer == DraftServer.Form(bytes: Int(form.contentLength!), sha256: formSHA256)
    }

    /// A cancelled upload ended as its way documents: `CancellationError` for the async calls, with its `Progress`
    /// cancelled and not finished; `URLError(.cancelled)` for a task.
    func expectCancelled(_ upload: Upload) {
        guard case .failure(let error) = upload.outcome else { return }
        switch way {
        case .task, .resumable: #expect(error is CancellationError, "\(error)")
        case .progress:
            #expect(error is CancellationError, "\(error)")
            #expect(upload.progress?.isCancelled == true && upload.progress?.isFinished == false)
        case .handedOutTask, .streamedDelegate: #expect((error as? URLError)?.code == .cancelled, "\(error)")
        }
    }

    /// Ends the storm: the caller's session closes, and then its connections.
    func close() async throws {
        session.finishTasksAndInvalidate()
        guard let server else { return }
        let port = server.url().port!
        // A session of the caller's own (the streamed delegate's) may keep one idle connection in its pool, as
        // URLSession does: every cancelled task's is closed.
        let kept = way == .streamedDelegate ? 1 : 0
        // Under a sanitizer every step runs many times slower: a ThreadSanitizer pass in CI (stop 73) found the task
        // way's last connection still open 10 s after the storm, which the plain and AddressSanitizer passes close
        // within the 10 s. A connection left open for good fails either way.
        let atMost: Double = ProcessInfo.processInfo.environment["MULTIPART_SANITIZER"] == nil ? 10 : 40
        let waited = Stopwatch()
        try await Stopwatch.wait(atMost: atMost, polling: 0.02) {
            ProcessDescriptors.connections(toPort: port) > kept
        }
        #expect(
            ProcessDescriptors.connections(toPort: port) <= kept,
            "\(way): connections left open after \(waited.seconds) s")
    }
}

/// How late a task of Swift's concurrency pool wakes from 5 ms sleeps, at most, until stopped.
private final class PoolLateness: Sendable {
    private let worst = LockedValue((late: 0.0, stopped: false))

    init() {
        Task.detached { [worst] in
            while !worst.withLock({ $0.stopped }) {
                let start = DispatchTime.now().uptimeNanoseconds
                try? await Task.sleep(nanoseconds: 5_000_000)
                let late = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 - 0.005
                worst.withLock { $0.late = max($0.late, late) }
            }
        }
    }

    /// Stops the watch, and says the most it saw.
    @discardableResult func stop() -> Double {
        worst.withLock {
            $0.stopped = true
            return $0.late
        }
    }
}

/// An upload's end, set once.
private final class Ended: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Lock()
    private var result: Result<Data, any Error>?
    private var at: UInt64?

    func set(_ result: Result<Data, any Error>) {
        lock.withLock {
            guard self.result == nil else { return }
            self.result = result
            at = DispatchTime.now().uptimeNanoseconds
        }
    }

    /// When it was set, in uptime nanoseconds.
    var time: UInt64? { lock.withLock { at } }

    var isSet: Bool { lock.withLock { result != nil } }
    var value: Result<Data, any Error>? { lock.withLock { result } }
}

/// A session delegate's ends, by task: the streamed delegate's completion, and the reference's plain delegate.
private final class Ends: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Lock()
    private var waiting: [Int: Ended] = [:]
    private var bodies: [Int: Data] = [:]
    private var reported: [Int: Reported] = [:]

    func expect(_ task: URLSessionTask, _ ended: Ended) {
        lock.withLock { waiting[task.taskIdentifier] = ended }
    }

    func expect(_ task: URLSessionTask, _ ended: Reported) {
        lock.withLock { reported[task.taskIdentifier] = ended }
    }

    func end(_ task: URLSessionTask, data: Data?, error: (any Error)?) {
        let ended = lock.withLock { waiting.removeValue(forKey: task.taskIdentifier) }
        ended?.set(error.map { .failure($0) } ?? .success(data ?? Data()))
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.withLock { bodies[dataTask.taskIdentifier, default: Data()].append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let ended = lock.withLock { () -> Reported? in
            bodies[task.taskIdentifier] = nil
            return reported.removeValue(forKey: task.taskIdentifier)
        }
        ended?.set(error)
    }
}
