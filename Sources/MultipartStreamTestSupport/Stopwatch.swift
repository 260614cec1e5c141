import Foundation

/// Monotonic elapsed time for tests, which build down to macOS 10.15 and iOS 13, where `ContinuousClock` (and
/// Swift Testing's refusal of `@available` on tests) rule the clock types out.
public struct Stopwatch {
    private let start = DispatchTime.now().uptimeNanoseconds

    /// A stopwatch started now.
    public init() {}

    /// Seconds since the stopwatch was made.
    public var seconds: Double { Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }

    /// Waits, polling every `interval` seconds, until `condition` is false or `timeout` seconds have passed.
    public static func wait(
        atMost timeout: Double, polling interval: Double = 0.01, while condition: () throws -> Bool
    ) async throws {
        let stopwatch = Stopwatch()
        while try condition(), stopwatch.seconds < timeout {
            try await Task.sleep(nanoseconds: UInt64(interval * 1e9))
        }
    }
}
