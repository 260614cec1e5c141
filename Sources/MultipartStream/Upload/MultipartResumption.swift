import Foundation

/// How a `.resumable` upload retries.
public struct MultipartResumption: Sendable, Equatable {
    /// Requests after a failure (a dropped connection, a timeout, a conflict) before the upload gives up.
    public var maximumAttempts: Int
    /// The wait before the first retry; it doubles with each retry that makes no progress, up to ``maximumDelay``.
    public var initialDelay: Double
    /// The longest wait between two retries.
    public var maximumDelay: Double

    /// Creates a policy; the defaults retry 5 times, waiting 0.25 s and doubling up to 30 s.
    public init(maximumAttempts: Int = 5, initialDelay: Double = 0.25, maximumDelay: Double = 30) {
        self.maximumAttempts = max(0, maximumAttempts)
        self.initialDelay = max(0, initialDelay)
        self.maximumDelay = max(self.initialDelay, maximumDelay)
    }
}
