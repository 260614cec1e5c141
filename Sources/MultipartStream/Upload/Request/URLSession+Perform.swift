import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSession {
    /// Runs `upload`, whose completion resolves `result`, and returns its answer. Cancelling the surrounding task
    /// cancels it at once and throws `CancellationError`.
    func perform(
        _ request: URLRequest,
        _ upload: UploadRequest,
        answeredTo result: PendingResponse
    ) async throws -> (Data, URLResponse) {
        do {
            return try await withTaskCancellationHandler {
                // Answered before it was sent (a cancel first): no task will be made, and the upload ends now.
                try await result.value(otherwise: upload.taskNotMade) {
                    // Made and resumed on a dispatch thread: making a task waits for URLSession's queue, which a
                    // caller stream blocked in another upload's `read` may hold, and the concurrency pool's few
                    // threads must not wait with it. In one hop, not a hop there and one back: a small upload's
                    // time is mostly such hops. A cancel before the task exists is kept by the upload, which
                    // cancels the task as it is made.
                    DispatchQueue.global().async {
                        // No task only when the caller's session is gone, which this suspended call keeps alive.
                        guard let task = upload.makeTask(for: request) else { return upload.taskNotMade() }
                        task.resume()
                    }
                }
            } onCancel: {
                upload.cancel()
                // Answered now, not when the task ends: the task closes everything on its own.
                result.resolve(UploadRequest.StateMachine.answerToACancel)
            }
        } catch let error as URLError where error.code == .cancelled && Task.isCancelled {
            throw CancellationError()
        }
    }
}
