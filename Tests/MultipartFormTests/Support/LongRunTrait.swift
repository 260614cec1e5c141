import MultipartStreamTestSupport
import Testing

extension Trait where Self == ConditionTrait {
    /// Marks a test that takes real time (``LongRuns``): left out of `swift test`, run by `Tests/long-runs.py`.
    static var longRun: Self { .enabled(if: LongRuns.enabled, Comment(rawValue: LongRuns.reason)) }
}

extension Tag {
    /// A test with a bound on wall time or on the whole process that `swift test`, where other suites load the
    /// machine and share the process, checks loosely: `Tests/long-runs.py` runs it again in a process of its own, with
    /// nothing beside it, where the bound is the promise itself (``LongRuns/alone``).
    @Tag static var measuredAlone: Self
}
