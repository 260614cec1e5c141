import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSession {
    /// Cancels `task`, an upload task this session handed you, without ever trapping the process: call it in place
    /// of the task's own `cancel()`, which on Linux traps when it comes in the moment the task ends by itself (see
    /// <doc:LinuxNotes>).
    ///
    /// `task` is one from ``multipartUploadTask(with:form:strategy:credentialsToOtherOrigins:progress:completionHandler:)``,
    /// or, when this session's delegate is a ``MultipartStreamedUploadDelegate``, one from
    /// `uploadTask(withStreamedRequest:)`. It stops as that task's `cancel()` stops it: at once, its file closed, its
    /// completion given `URLError(.cancelled)`, or, when it had already ended, what it ended with. Any other task is
    /// given its own `cancel()`.
    ///
    /// ```swift
    /// let task = session.multipartUploadTask(with: request, form: form) { data, response, error in /* … */ }
    /// task.resume()
    /// // A Cancel button:
    /// session.cancelMultipartUpload(task)
    /// ```
    public func cancelMultipartUpload(_ task: URLSessionTask) {
        if PrivateSessions.shared.cancel(handedOut: task, of: self) { return }
        if let delegate = delegate as? MultipartStreamedUploadDelegate { return delegate.cancel(task) }
        task.cancel()
    }
}
