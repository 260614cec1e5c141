import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Records, for each call, whether it came on `queue`, the caller's delegate queue.
class QueueRecorder: NSObject, @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Lock()
    private var recorded: [Bool] = []
    private var recordedMetrics: [Bool] = []
    let queue: OperationQueue

    init(queue: OperationQueue) {
        self.queue = queue
    }

    /// Each redirect or challenge call: whether it came on `queue`.
    var calls: [Bool] { lock.withLock { recorded } }
    /// Each metrics call: whether it came on `queue`.
    var metrics: [Bool] { lock.withLock { recordedMetrics } }

    func record() {
        let onQueue = OperationQueue.current === queue
        lock.withLock { recorded.append(onQueue) }
    }

    func recordMetrics() {
        let onQueue = OperationQueue.current === queue
        lock.withLock { recordedMetrics.append(onQueue) }
    }
}

/// A caller's session delegate with the task-level methods: it sets its headers on each redirect's request
/// (`X-Tag: from-delegate` unless told others), answers every challenge with u:p, and records where each call came.
final class RecordingDelegate: QueueRecorder, URLSessionTaskDelegate, @unchecked Sendable {
    private let redirectHeaders: [String: String]

    init(queue: OperationQueue, redirectHeaders: [String: String] = ["X-Tag": "from-delegate"]) {
        self.redirectHeaders = redirectHeaders
        super.init(queue: queue)
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        record()
        var request = request
        for (name, value) in redirectHeaders { request.setValue(value, forHTTPHeaderField: name) }
        completionHandler(request)
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        record()
        completionHandler(.useCredential, URLCredential(user: "u", password: "p", persistence: .none))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        recordMetrics()
    }
}
