import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The result of an upload, handed from URLSession's delegate queue to the awaiting task.
final class PendingResponse: @unchecked Sendable {
    // @unchecked: `state` is guarded by `lock`.
    private enum State {
        case waiting
        case awaiting(CheckedContinuation<(Data, URLResponse), any Error>)
        case resolved(Result<(Data, URLResponse), any Error>)
    }

    private let lock = Lock()
    private var state = State.waiting

    /// Suspends until the result arrives; `start` runs once the continuation is in place, or `otherwise` where the
    /// result came first.
    func value(otherwise: () -> Void = {}, start: () -> Void) async throws -> (Data, URLResponse) {
        try await withCheckedThrowingContinuation { continuation in
            let early: Result<(Data, URLResponse), any Error>? = lock.withLock {
                if case .resolved(let result) = state { return result }
                state = .awaiting(continuation)
                return nil
            }
            if let early {
                otherwise()
                return continuation.resume(with: early)
            }
            start()
        }
    }

    @Sendable func resolve(_ result: Result<(Data, URLResponse), any Error>) {
        let continuation: CheckedContinuation<(Data, URLResponse), any Error>? = lock.withLock {
            defer { state = .resolved(result) }
            if case .awaiting(let continuation) = state { return continuation }
            return nil
        }
        continuation?.resume(with: result)
    }
}
