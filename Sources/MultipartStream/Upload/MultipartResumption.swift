import Foundation

/// How a `.resumable` upload retries.
public struct MultipartResumption: Sendable, Equatable {
    /// Requests after a failure (a dropped connection, a timeout, a conflict, a 5xx) before the upload gives up.
    public var maximumAttempts: Int
    /// The wait in seconds before the first retry; it doubles with each retry that makes no progress, up to
    /// ``maximumDelay``. Any value is taken: one that is negative or NaN waits nothing, and none waits over an hour.
    public var initialDelay: Double
    /// The longest wait in seconds between two retries, also for a server's `Retry-After`; bounded as
    /// ``initialDelay`` is.
    public var maximumDelay: Double
    /// Whether requests to an upload resource that the server put on another origin (its `Location`) carry the
    /// request's `Authorization`, `Cookie` and `Proxy-Authorization`, as `curl --location-trusted` lets them follow
    /// redirects; off by default, since the server chose that URL.
    public var credentialsToOtherOrigins: Bool

    /// Creates a policy; the defaults retry 5 times, waiting 0.25 s and doubling up to 30 s.
    public init(
        maximumAttempts: Int = 5,
        initialDelay: Double = 0.25,
        maximumDelay: Double = 30,
        credentialsToOtherOrigins: Bool = false
    ) {
        self.maximumAttempts = max(0, maximumAttempts)
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.credentialsToOtherOrigins = credentialsToOtherOrigins
    }

    /// The longest any wait lasts, whatever the policy says.
    static let longestWait: Double = 3_600

    /// `seconds` as a wait: finite, from 0 to ``longestWait``, and at most ``maximumDelay`` (bounded the same way).
    func wait(_ seconds: Double) -> Double {
        min(Self.bounded(seconds), max(Self.bounded(maximumDelay), Self.bounded(initialDelay)))
    }

    private static func bounded(_ seconds: Double) -> Double {
        seconds.isNaN ? 0 : min(max(seconds, 0), longestWait)
    }
}
