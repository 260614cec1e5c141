import Foundation

/// The body of a `.file` upload or task, the form written whole to a file of the temporary directory first: one
/// writer, for the upload's own (written before its request is made) and a task's handed to the caller (written when
/// the task asks for its body). The request that sends it removes it when it ends, however it ends.
enum TemporaryBody {
    /// A new name in the temporary directory, with the process's identifier: whose a file left there is shows.
    static func url() -> URL {
        let name = "MultipartStream-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString).multipart"
        return FileManager.default.temporaryDirectory.appendingPathComponent(name)
    }

    /// Writes the body on a dispatch queue: a long blocking write must not hold a thread of the cooperative pool.
    /// A cancel answers at once; the write stops at its next chunk and removes what it wrote.
    static func write(_ form: MultipartFormData) async throws -> URL {
        let url = url()
        let writing = TemporaryBodyWrite()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard writing.begin(continuation) else { return }
                DispatchQueue.global(qos: .utility).async {
                    let result: Result<URL, any Error>
                    do throws(MultipartError) {
                        let whole = try write(form, to: url, until: writing.isCancelled)
                        result = whole ? .success(url) : .failure(CancellationError())
                    } catch {
                        result = .failure(error)
                    }
                    writing.end(result)
                }
            }
        } onCancel: {
            writing.cancel()
        }
    }

    /// Writes `form` to `url` on the calling thread, stopping at its next chunk once `cancelled` says so (and
    /// removing what it wrote): whether it wrote the whole form.
    static func write(
        _ form: MultipartFormData, to url: URL, until cancelled: @Sendable () -> Bool
    ) throws(MultipartError) -> Bool {
        try form.writeEncodedData(to: url, until: cancelled)
    }
}

/// A temporary body being written, which its upload's cancel answers before the write has stopped.
private final class TemporaryBodyWrite: @unchecked Sendable {
    // @unchecked: both are guarded by `lock`.
    private let lock = Lock()
    private var continuation: CheckedContinuation<URL, any Error>?
    private var cancelled = false

    /// Keeps `continuation` for the write's end; `false`, having answered it, when the upload was cancelled first.
    func begin(_ continuation: CheckedContinuation<URL, any Error>) -> Bool {
        let cancelled = lock.withLock {
            if !self.cancelled { self.continuation = continuation }
            return self.cancelled
        }
        if cancelled { continuation.resume(throwing: CancellationError()) }
        return !cancelled
    }

    @Sendable func isCancelled() -> Bool {
        lock.withLock { cancelled }
    }

    func cancel() {
        let waiting = lock.withLock {
            cancelled = true
            defer { continuation = nil }
            return continuation
        }
        waiting?.resume(throwing: CancellationError())
    }

    /// The write ended: hands its result over, or removes the file nobody waits for any more.
    func end(_ result: Result<URL, any Error>) {
        let waiting = lock.withLock {
            defer { continuation = nil }
            return continuation
        }
        if let waiting { return waiting.resume(with: result) }
        if case .success(let url) = result { try? FileManager.default.removeItem(at: url) }
    }
}
