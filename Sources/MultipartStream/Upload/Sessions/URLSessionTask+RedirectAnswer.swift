import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionTask {
    /// `answer`, a redirect's completion handler, given only while the task runs. Linux URLSession traps ("Received
    /// callback for HTTP redirection, but we're not waiting for it") when the answer reaches a task a cancel has
    /// stopped, and a cancel the caller gives its own task (one handed out, or the streamed delegate's) tells no
    /// upload: the task ends by that cancel, and needs no answer. What is left is the moment between this look and
    /// the answer reaching URLSession's queue, where a cancel given in it still comes after the answer.
    func redirectAnswer(
        _ answer: @escaping @Sendable (URLRequest?) -> Void
    ) -> @Sendable (URLRequest?) -> Void {
        { [self] request in
            let state = state
            guard state == .running || state == .suspended else { return }
            answer(request)
        }
    }
}
