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
    /// What URLSession promises a caller about its own tasks, kept for uploads: the caller's delegate is asked on its
    /// queue, the request it returns is the one sent, credentials stay with their origin, and a failure keeps its
    /// reason. Against the Node server on 127.0.0.1.
    @Suite(.serialized) struct DelegateContractTests {
        let directory: TemporaryDirectory
        let form: MultipartFormData
        let queue: OperationQueue = {
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            return queue
        }()

        init() throws {
            directory = try TemporaryDirectory()
            var form = MultipartFormData()
            form.append("Ada", name: "author")
            try form.append(fileURL: directory.file("clip.bin", contents: Data(count: 300_000)), name: "clip")
            self.form = form
        }

        private func session(_ delegate: URLSessionDelegate? = nil) -> URLSession {
            URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: queue)
        }

        // MARK: The caller's queue, and the request the delegate returns

        @Test(arguments: [303, 307])
        func aRedirectIsDecidedOnTheCallersQueueAndItsRequestIsSent(code: Int) async throws {
            let server = try await UploadServer()
            let delegate = RecordingDelegate(queue: queue)
            let (data, _) = try await session(delegate).upload(
                form, with: URLRequest(url: server.url("/redirect/\(code)")))
            #expect(delegate.calls == [true], "asked once, on the caller's delegate queue")
            let seen = try server.seen(in: data)
            #expect(seen.tag == "from-delegate", "the request the delegate returned is the one sent")
            if code == 307 {
                #expect(seen.method == "POST")
                #expect(seen.parts?.count == 2 && UInt64(seen.bytes) == form.contentLength!)
            }
        }

        /// The caller cancels its own task while its delegate decides a redirect: the task ends cancelled, and the
        /// delegate's answer, which comes after the end, goes nowhere. Linux URLSession traps when an answer reaches a task
        /// a cancel stopped ("Received callback for HTTP redirection, but we're not waiting for it"), and nothing
        /// tells the upload of a cancel the caller gives the task itself: this ended the process.
        @Test(arguments: [302, 307])
        func aTaskCancelledWhileItsDelegateDecidesARedirectEndsCancelled(code: Int) async throws {
            let server = try await UploadServer()
            let delegate = LateRedirectDelegate(queue: queue)
            let (ended, end) = AsyncStream.makeStream(of: String.self)
            let callerSession = session(delegate)
            defer { callerSession.finishTasksAndInvalidate() }
            let task = callerSession.multipartUploadTask(
                with: URLRequest(url: server.url("/redirect/\(code)")), form: form
            ) { _, _, error in end.yield(String(describing: error)) }
            task.resume()
            try await within(seconds: 30, "the delegate asked") { await delegate.waitUntilAsked() }
            task.cancel()
            let error = try await within(seconds: 30, "the task's end") {
                var iterator = ended.makeAsyncIterator()
                return await iterator.next()
            }
            #expect(error?.contains("\(URLError.cancelled.rawValue)") == true, "\(String(describing: error))")
            // The delegate answers now, after the task ended: the process is alive, and the session uploads.
            delegate.answer()
            try await within(seconds: 30, "the delegate answered") { await delegate.waitUntilAnswered() }
            let (data, _) = try await callerSession.upload(form, with: URLRequest(url: server.url()))
            #expect(try server.seen(in: data).bytes == Int(form.contentLength!))
        }

        @Test func aChallengeIsAnsweredOnTheCallersQueue() async throws {
            let server = try await UploadServer()
            let delegate = RecordingDelegate(queue: queue)
            let (data, response) = try await session(delegate).upload(form, with: URLRequest(url: server.url("/auth")))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try server.seen(in: data).authorization == "Basic dTpw")
            #expect(delegate.calls == [true])
        }

        // Linux URLSession collects no metrics (CallerDelegateTests hands them to the forwarding directly).
        @Test(.enabled(if: !isLinux)) func metricsReachTheCallersDelegateOnItsQueue() async throws {
            let server = try await UploadServer()
            let delegate = RecordingDelegate(queue: queue)
            _ = try await session(delegate).upload(form, with: URLRequest(url: server.url()))
            try await Stopwatch.wait(atMost: 5) { delegate.metrics.isEmpty }
            #expect(delegate.metrics == [true])
        }

        // MARK: Credentials and origins

        @Test(arguments: [302, 303, 307, 308])
        func credentialsStayWithTheirOrigin(code: Int) async throws {
            let server = try await UploadServer()
            var request = URLRequest(url: server.url("/elsewhere/\(code)"))
            request.setValue("Bearer secret", forHTTPHeaderField: "Authorization")
            request.setValue("session=1", forHTTPHeaderField: "Cookie")
            request.setValue("Basic cHJveHk6cA==", forHTTPHeaderField: "Proxy-Authorization")
            let (data, response) = try await session().upload(form, with: request)
            #expect(response.url?.host == "localhost", "the redirect to another origin was followed")
            let seen = try server.seen(in: data)
            #expect(seen.authorization == nil && seen.cookie == nil && seen.proxyAuthorization == nil)
            if code >= 307 { #expect(UInt64(seen.bytes) == form.contentLength!, "the whole form, again") }

            // The same origin keeps them.
            request.url = server.url("/redirect/\(code)")
            let (same, _) = try await session().upload(form, with: request)
            let kept = try server.seen(in: same)
            #expect(kept.authorization == "Bearer secret" && kept.cookie == "session=1")
            #expect(kept.proxyAuthorization == "Basic cHJveHk6cA==")

            // A delegate may put them back on purpose.
            request.url = server.url("/elsewhere/\(code)")
            let trusting = RecordingDelegate(queue: queue, redirectHeaders: ["Authorization": "Bearer secret"])
            let (trusted, _) = try await session(trusting).upload(form, with: request)
            #expect(try server.seen(in: trusted).authorization == "Bearer secret")
        }

        // MARK: Failures keep their reason

        @Test func aFileTaskWhoseBodyCannotBeWrittenFailsWithTheReason() async throws {
            let server = try await UploadServer()
            let file = try directory.file("changing.bin", contents: Data(count: 1_000))
            var form = MultipartFormData()
            try form.append(fileURL: file, name: "doc")
            let before = try TemporaryBodies.names()
            let task = session().multipartUploadTask(
                with: URLRequest(url: server.url()), form: form, strategy: .file
            ) { _, _, error in
                Self.reported.set(error)
            }
            try Data(count: 10).write(to: file)
            task.resume()
            try await Stopwatch.wait(atMost: 10) { !Self.reported.isSet }
            let error = try #require(
                Self.reported.value as? MultipartError, "\(String(describing: Self.reported.value))")
            guard case .fileSizeChanged(_, expected: 1_000, actual: 10) = error.reason else {
                Issue.record("\(error)")
                return
            }
            #expect(error.part?.name == "doc")
            #expect(try await TemporaryBodies.noneLeft(since: before), "no partial body file left")
            #expect(try await server.log().isEmpty, "nothing was sent")
        }

        private static let reported = Reported()

        @Test func aResetAfterA401sHeadersIsAFailure() async throws {
            let server = try await UploadServer()
            await #expect(throws: (any Error).self) {
                _ = try await session().upload(form, with: URLRequest(url: server.url("/cut/401")))
            }
            // A 401 that arrives whole, which no one can answer, is still the answer.
            let (_, response) = try await session().upload(form, with: URLRequest(url: server.url("/auth")))
            #expect((response as? HTTPURLResponse)?.statusCode == 401)
        }

        // MARK: What a task never resumed keeps

        @Test func aTaskNeverResumedKeepsNeitherSessionOpen() async throws {
            let saved = PrivateSessions.shared.idleTimeout
            PrivateSessions.shared.idleTimeout = 0.2
            defer { PrivateSessions.shared.idleTimeout = saved }
            let server = try await UploadServer()
            let caller = session()
            let form = form
            let task = caller.multipartUploadTask(with: URLRequest(url: server.url()), form: form) { _, _, error in
                Self.resumedLate.set(error)
            }
            #expect(PrivateSessions.shared.isOpen(for: caller))
            try await Stopwatch.wait(atMost: 10, polling: 0.02) { PrivateSessions.shared.isOpen(for: caller) }
            #expect(!PrivateSessions.shared.isOpen(for: caller), "a suspended task kept the private session open")

            // Resumed later, it still runs, whole.
            task.resume()
            try await Stopwatch.wait(atMost: 10) { !Self.resumedLate.isSet }
            #expect(Self.resumedLate.isSet && Self.resumedLate.value == nil)
            let log = try await server.log()
            #expect(log.map(\.bytes) == [Int(form.contentLength!)])

            weak var released: URLSession?
            var untouched: URLSessionUploadTask?
            do {
                let dropped = URLSession(
                    configuration: .ephemeral, delegate: RecordingDelegate(queue: queue), delegateQueue: nil)
                released = dropped
                untouched = dropped.multipartUploadTask(with: URLRequest(url: server.url()), form: form) { _, _, _ in }
                dropped.finishTasksAndInvalidate()
            }
            try await Stopwatch.wait(atMost: 10, polling: 0.02) { released != nil }
            #expect(released == nil, "the upload kept its caller's session alive")
            #expect(untouched?.state == .suspended)
        }

        private static let resumedLate = Reported()

        @Test func cancellingAFileTaskClosesItsBodyFile() async throws {
            let server = try await UploadServer()
            var big = MultipartFormData()
            try big.append(fileURL: directory.file("big.bin", contents: Data(count: 32 << 20)), name: "big")
            let reports = ProgressReports()
            let task = session().multipartUploadTask(
                with: URLRequest(url: server.url("/slow")), form: big, strategy: .file, progress: reports.append
            ) { _, _, error in
                Self.cancelled.set(error)
            }
            task.resume()
            try await Stopwatch.wait(atMost: 30, polling: 0.005) { reports.values.isEmpty }
            // This upload's body is the one of 32 MiB: uploads of other suites run beside it.
            #expect(TemporaryBodies.openCount(ofAtLeast: 32 << 20) == 1, "the body file is open while it is sent")
            task.cancel()
            try await Stopwatch.wait(atMost: 5, polling: 0.005) { TemporaryBodies.openCount(ofAtLeast: 32 << 20) > 0 }
            #expect(TemporaryBodies.openCount(ofAtLeast: 32 << 20) == 0, "cancelling closed the body file")
            try await Stopwatch.wait(atMost: 5) { !Self.cancelled.isSet }
            #expect((Self.cancelled.value as? URLError)?.code == .cancelled)
        }

        private static let cancelled = Reported()
    }
}

/// One completion's error, handed from URLSession's thread to the test.
final class Reported: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Lock()
    private var error: (any Error)?
    private var set = false

    func set(_ error: (any Error)?) {
        lock.withLock {
            self.error = error
            set = true
        }
    }

    var isSet: Bool { lock.withLock { set } }
    var value: (any Error)? { lock.withLock { error } }
}

/// A caller's delegate that answers a redirect only when told to (by ``answer()``), on a thread of its own, saying when
/// it was asked and when it answered: after the test cancelled the task and saw it end, however long that took.
private final class LateRedirectDelegate: QueueRecorder, URLSessionTaskDelegate, @unchecked Sendable {
    private let (asked, ask) = AsyncStream.makeStream(of: Void.self)
    private let (answered, answers) = AsyncStream.makeStream(of: Void.self)
    private let release = DispatchSemaphore(value: 0)

    /// Lets the waiting answer go.
    func answer() {
        release.signal()
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        ask.yield()
        DispatchQueue.global().async { [release, answers] in
            // Bounded, so that a test that failed before telling it still lets the task go.
            _ = release.wait(timeout: .now() + 30)
            completionHandler(request)
            answers.yield()
        }
    }

    func waitUntilAsked() async {
        for await _ in asked { return }
    }

    func waitUntilAnswered() async {
        for await _ in answered { return }
    }
}
