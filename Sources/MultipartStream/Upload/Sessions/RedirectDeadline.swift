import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How long a redirect may wait for its answer. Linux URLSession keeps the request's timeout running while a redirect
/// waits for its delegate, counted from the last byte of the 3xx; when it fires there, the task neither ends nor takes
/// a later answer: that answer traps the process ("Received callback for HTTP redirection, but we're not waiting for
/// it"). A headers hook or a caller's delegate slower than that (a token refreshed over the network, or tasks waiting
/// for a thread) must not end the process, so the upload answers by half the timeout, the other half for the time the
/// callback took to reach it.
enum RedirectDeadline {
    /// Half the timeout URLSession applies to `task`: the request's own, or its session's where that is shorter
    /// (URLSession takes the request's only where it was set, which a request does not say), in whole seconds as
    /// libcurl's timer counts it.
    static func seconds(for task: URLSessionTask, in configuration: URLSessionConfiguration) -> TimeInterval {
        let request = task.currentRequest?.timeoutInterval ?? configuration.timeoutIntervalForRequest
        let timeout = min(request, configuration.timeoutIntervalForRequest)
        guard timeout.isFinite, timeout > 0 else { return 0 }
        return timeout.rounded(.down) / 2
    }

    /// The error an upload ends with when its redirect was not answered in time.
    static func timedOut(after seconds: TimeInterval, url: URL?) -> URLError {
        var info: [String: Any] = [
            NSLocalizedDescriptionKey:
                "The redirect's request was not ready within \(seconds) s, half the request's timeout: the headers hook "
                + "or the session's delegate took longer"
        ]
        if let url { info[NSURLErrorFailingURLErrorKey] = url }
        return URLError(.timedOut, userInfo: info)
    }
}
