import MultipartStreamTestSupport
import Testing

extension Trait where Self == ConditionTrait {
    /// Marks a test that takes real time (``LongRuns``): left out of `swift test`, run by `Tests/long-runs.py`.
    static var longRun: Self { .enabled(if: LongRuns.enabled, Comment(rawValue: LongRuns.reason)) }
}
