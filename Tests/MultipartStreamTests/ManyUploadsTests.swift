import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// Many uploads at once, and storms of cancels at random moments: every body exact or never completed, every
    /// progress handler its own upload's, nothing trapped, hung or left open.
    @Suite(.serialized) struct ManyUploadsTests {
        let directory: TemporaryDirectory

        init() throws {
            directory = try TemporaryDirectory()
        }

        /// What the sink answers: each part's length and SHA-256.
        struct Sunk: Decodable {
            struct Part: Decodable {
                var bytes: Int
                var sha256: String
            }
            var contentLength: String?
            var bytes: Int
            var parts: [Part]
        }

        /// One of many uploads: its form, and the length and SHA-256 of each of its part bodies.
        struct Upload: Sendable {
            var form: MultipartFormData
            var lengths: [Int]
            var digests: [String]
        }

        /// `count` distinct forms of a text field, a file and a stream, and what each part's body hashes to.
        private func forms(_ count: Int, seed: UInt64) throws -> [Upload] {
            var generator = SeededGenerator(seed: seed)
            var bodies: [[URL]] = []
            var forms: [MultipartFormData] = []
            for index in 0..<count {
                let id = directory.path("id-\(index)")
                try Data("upload \(index)".utf8).write(to: id)
                let file = try directory.file(
                    "file-\(index).bin",
                    contents: Data(
                        [UInt8].random(count: Int.random(in: 1...400_000, using: &generator), using: &generator)))
                let streamed = Data(
                    [UInt8].random(count: Int.random(in: 0...150_000, using: &generator), using: &generator))
                let streamedCopy = directory.path("stream-\(index)")
                try streamed.write(to: streamedCopy)
                var form = MultipartFormData()
                form.append("upload \(index)", name: "id")
                try form.append(fileURL: file, name: "file")
                form.append(length: UInt64(streamed.count), name: "stream", fileName: "s.bin") {
                    InputStream(data: streamed)
                }
                forms.append(form)
                bodies.append([id, file, streamedCopy])
            }
            let digests = try sha256sums(bodies.flatMap { $0 })
            return forms.indices.map { index in
                let urls = bodies[index]
                return Upload(
                    form: forms[index],
                    lengths: urls.map {
                        (try? FileManager.default.attributesOfItem(atPath: $0.path)[.size] as? Int) ?? -1
                    },
                    digests: Array(digests[(index * 3)..<(index * 3 + 3)]))
            }
        }

        @Test(arguments: [1, 8])
        func sixtyFourUploadsAtOnceArriveExactEachWithItsOwnProgress(sessions: Int) async throws {
            let saved = PrivateSessions.shared.idleTimeout
            PrivateSessions.shared.idleTimeout = 0.2
            defer { PrivateSessions.shared.idleTimeout = saved }
            let server = try await UploadServer(.sink)
            let url = server.url()
            let uploads = try forms(64, seed: UInt64(sessions))
            let callers = (0..<sessions).map { _ in URLSession(configuration: .ephemeral) }
            let watches = uploads.map { ProgressWatch(total: $0.form.contentLength!) }
            try await withThrowingTaskGroup(of: (Int, Data).self) { group in
                for (index, upload) in uploads.enumerated() {
                    let caller = callers[index % sessions]
                    let watch = watches[index]
                    // Every third from a temporary file, the rest streamed.
                    let strategy: MultipartUploadStrategy = index % 3 == 0 ? .file : .stream
                    group.addTask {
                        let (data, _) = try await caller.upload(
                            upload.form, with: URLRequest(url: url), strategy: strategy, progress: watch.report)
                        watch.returned()
                        return (index, data)
                    }
                }
                for try await (index, data) in group {
                    let sunk = try JSONDecoder().decode(Sunk.self, from: data)
                    let upload = uploads[index]
                    #expect(UInt64(sunk.bytes) == upload.form.contentLength!, "upload \(index)")
                    #expect(sunk.contentLength == String(upload.form.contentLength!), "upload \(index)")
                    #expect(sunk.parts.map(\.bytes) == upload.lengths, "upload \(index)")
                    #expect(sunk.parts.map(\.sha256) == upload.digests, "upload \(index): another upload's bytes?")
                }
            }
            for (index, watch) in watches.enumerated() {
                let (values, late) = watch.state
                #expect(!values.isEmpty, "upload \(index)")
                #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 }, "upload \(index): only rising")
                #expect(values.last == uploads[index].form.contentLength, "upload \(index): its own total")
                #expect(values.filter { $0 == uploads[index].form.contentLength }.count == 1, "100% once")
                #expect(late == 0, "upload \(index): \(late) reports after it returned")
            }
            for caller in callers { caller.finishTasksAndInvalidate() }
        }

        // MARK: Cancel storms

        /// When an upload of the storm is cancelled.
        enum Moment: CaseIterable {
            case beforeResume
            case duringTheBody
            case waitingForTheAnswer
        }

        /// Each ends within 1 s of its cancel where the test runs alone (`measuredAlone`), 5 s beside other suites
        /// (``CancelBound``).
        @Test(.tags(.measuredAlone)) func twoHundredUploadsCancelledAtRandomMoments() async throws {
            let saved = PrivateSessions.shared.idleTimeout
            PrivateSessions.shared.idleTimeout = 0.2
            defer { PrivateSessions.shared.idleTimeout = saved }
            let server = try await UploadServer()
            var big = MultipartFormData()
            try big.append(fileURL: directory.file("big.bin", contents: Data(count: 4 << 20)), name: "big")
            big.append(length: 100_000, name: "stream") { InputStream(data: Data(count: 100_000)) }
            let bodiesBefore = try TemporaryBodies.names()
            var generator = SeededGenerator(seed: 200)
            let plans = (0..<200).map { index in
                (
                    index: index, moment: Moment.allCases.randomElement(using: &generator)!,
                    delay: UInt64.random(in: 0...60_000_000, using: &generator),
                    file: Bool.random(using: &generator),
                    task: Bool.random(using: &generator)
                )
            }
            let slowest = SlowestCancel()
            let session = URLSession(configuration: .ephemeral)
            // Eight at a time, so that every moment comes while others are under way.
            for batch in stride(from: 0, to: plans.count, by: 8) {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for plan in plans[batch..<min(batch + 8, plans.count)] {
                        let path = plan.moment == .waitingForTheAnswer ? "/silent" : "/slow"
                        let request = URLRequest(url: server.url("\(path)?i=\(plan.index)"))
                        group.addTask { [big] in
                            let cancel = CancelPoint()
                            let ended = Reported()
                            let progress: @Sendable (MultipartUploadProgress) -> Void = {
                                if plan.moment == .waitingForTheAnswer, $0.fractionCompleted == 1 { cancel.reach() }
                            }
                            let cancelTask: @Sendable () -> Void
                            if plan.task {
                                let task = session.multipartUploadTask(
                                    with: request, form: big, strategy: plan.file ? .file : .stream, progress: progress
                                ) { _, _, error in ended.set(error) }
                                cancelTask = { task.cancel() }
                                if plan.moment != .beforeResume { task.resume() }
                            } else {
                                let upload = Task {
                                    do {
                                        _ = try await session.upload(
                                            big, with: request, strategy: plan.file ? .file : .stream,
                                            progress: progress)
                                        ended.set(nil)
                                    } catch {
                                        ended.set(error)
                                    }
                                }
                                cancelTask = { upload.cancel() }
                            }
                            switch plan.moment {
                            case .beforeResume: break
                            case .duringTheBody: try await Task.sleep(nanoseconds: plan.delay)
                            case .waitingForTheAnswer: try await cancel.wait(atMost: 30)
                            }
                            slowest.sawConnections(try server.openConnections())
                            let stopwatch = Stopwatch()
                            cancelTask()
                            try await expectEndsCancelled(ended, "upload \(plan.index) (\(plan.moment))")
                            slowest.record(stopwatch.seconds, plan.index)
                        }
                    }
                    try await group.waitForAll()
                }
            }
            let (seconds, index) = slowest.value
            #expect(
                seconds < CancelBound.seconds(promised: 1), "upload \(index) took \(seconds) s to end after its cancel")
            // The server never completed a body that was cancelled before its end.
            let log = try await server.log()
            let contentLength = Int(big.contentLength!)
            for entry in log where entry.path == "/slow" {
                #expect(entry.bytes < contentLength, "the cancelled upload \(entry.query) arrived whole")
            }
            try await Stopwatch.wait(atMost: 10, polling: 0.02) { OpenDescriptors.count(under: directory.url) > 0 }
            #expect(OpenDescriptors.count(under: directory.url) == 0, "a cancelled upload left its file open")
            #expect(
                try await TemporaryBodies.noneLeft(since: bodiesBefore), "a cancelled upload left its temporary file")
            #expect(TemporaryBodies.openCount(ofAtLeast: 4 << 20) == 0)
            session.finishTasksAndInvalidate()
            // Once the private session has closed (0.2 s after its last upload here), so have its connections.
            #expect(slowest.connections > 0, "the count saw the uploads' connections")
            try await Stopwatch.wait(atMost: 10, polling: 0.05) { try server.openConnections() > 0 }
            #expect(try server.openConnections() == 0, "connections left open to the server")
        }

        /// Cancels around a redirect's answer: the caller's delegate answers each redirect after a random pause on
        /// a thread of its own, and the upload is cancelled after another, so that the cancel comes before, with or
        /// after the answer (the redirect leads to a server that never answers). Linux URLSession traps when an
        /// answer reaches a task a cancel stopped, and when a cancel comes as a refused redirect ends its task (a 307,
        /// which the upload sends again on a task of its own). Every upload ends cancelled, the process lives, and
        /// the session uploads after.
        @Test func cancelsAroundARedirectsAnswer() async throws {
            let server = try await UploadServer()
            let form = {
                var form = MultipartFormData()
                form.append(Data(count: 20_000), name: "photo", fileName: "photo.jpg", mimeType: "image/jpeg")
                return form
            }()
            var generator = SeededGenerator(seed: 307)
            let plans = (0..<120).map { index in
                (
                    index: index, code: [302, 307][index % 2],
                    answerAfter: UInt64.random(in: 0...2_000_000, using: &generator),
                    cancelAfter: UInt64.random(in: 0...2_000_000, using: &generator)
                )
            }
            let delegate = RandomlyLateRedirects(
                pauses: Dictionary(uniqueKeysWithValues: plans.map { ("\($0.index)", $0.answerAfter) }))
            let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
            defer { session.finishTasksAndInvalidate() }
            for batch in stride(from: 0, to: plans.count, by: 8) {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for plan in plans[batch..<min(batch + 8, plans.count)] {
                        group.addTask { [form] in
                            let request = URLRequest(
                                url: server.url("/redirect/\(plan.code)?to=/silent&i=\(plan.index)"))
                            let ended = Reported()
                            let upload = Task {
                                do {
                                    _ = try await session.upload(form, with: request)
                                    ended.set(nil)
                                } catch {
                                    ended.set(error)
                                }
                            }
                            try await within(seconds: 30, "the redirect of upload \(plan.index)") {
                                await delegate.waitUntilAsked("\(plan.index)")
                            }
                            try await Task.sleep(nanoseconds: plan.cancelAfter)
                            upload.cancel()
                            try await expectEndsCancelled(ended, "upload \(plan.index)")
                        }
                    }
                    try await group.waitForAll()
                }
            }
            let (data, _) = try await session.upload(
                form, with: URLRequest(url: server.url("/redirect/307?to=/headers")))
            #expect(try server.seen(in: data).bytes == Int(form.contentLength!))
        }
    }
}

/// An upload's progress as its handler saw it, and how many reports came after the upload returned.
private final class ProgressWatch: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Lock()
    private var values: [UInt64] = []
    private var hasReturned = false
    private var late = 0
    let total: UInt64

    init(total: UInt64) {
        self.total = total
    }

    @Sendable func report(_ progress: MultipartUploadProgress) {
        lock.withLock {
            if hasReturned { late += 1 }
            values.append(progress.totalBytes == total ? progress.bytesSent : .max)
        }
    }

    func returned() {
        lock.withLock { hasReturned = true }
    }

    var state: ([UInt64], Int) { lock.withLock { (values, late) } }
}

/// A moment one upload waits for, reached from URLSession's thread.
private final class CancelPoint: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Lock()
    private var reached = false

    func reach() {
        lock.withLock { reached = true }
    }

    func wait(atMost seconds: Double) async throws {
        try await Stopwatch.wait(atMost: seconds, polling: 0.002) { !lock.withLock { reached } }
    }
}

/// The longest time from a cancel to the end of its upload, and the most connections seen before a cancel.
private final class SlowestCancel: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Lock()
    private var slowest: (Double, Int) = (0, -1)
    private var mostConnections = 0

    func sawConnections(_ count: Int) {
        lock.withLock { mostConnections = max(mostConnections, count) }
    }

    var connections: Int { lock.withLock { mostConnections } }

    func record(_ seconds: Double, _ index: Int) {
        lock.withLock { if seconds > slowest.0 { slowest = (seconds, index) } }
    }

    var value: (Double, Int) { lock.withLock { slowest } }
}

/// Waits up to 10 s for a cancelled upload to end, and expects it to have ended cancelled.
private func expectEndsCancelled(
    _ ended: Reported, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
) async throws {
    try await Stopwatch.wait(atMost: 10, polling: 0.002) { !ended.isSet }
    #expect(ended.isSet, "\(what) never ended after its cancel", sourceLocation: sourceLocation)
    let error = ended.value
    #expect(
        error is CancellationError || (error as? URLError)?.code == .cancelled, "\(what): \(String(describing: error))",
        sourceLocation: sourceLocation)
}

/// A caller's delegate that answers each redirect after the pause set for its upload (by the `i` of its URL), on a
/// thread of its own, and says when it was asked.
private final class RandomlyLateRedirects: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    // @unchecked: `asked` is guarded by `lock`; `pauses` is constant.
    private let pauses: [String: UInt64]
    private let lock = Lock()
    private var asked: Set<String> = []

    init(pauses: [String: UInt64]) {
        self.pauses = pauses
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        let index =
            URLComponents(url: response.url!, resolvingAgainstBaseURL: false)?.queryItems?
            .first { $0.name == "i" }?.value ?? ""
        lock.withLock { _ = asked.insert(index) }
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(pauses[index] ?? 0))) {
            completionHandler(request)
        }
    }

    /// Returns once the redirect of upload `index` was asked about; bounded by the caller's `within`.
    func waitUntilAsked(_ index: String) async {
        while !lock.withLock({ asked.contains(index) }), !Task.isCancelled {
            try? await Task.sleep(nanoseconds: 500_000)
        }
    }
}
