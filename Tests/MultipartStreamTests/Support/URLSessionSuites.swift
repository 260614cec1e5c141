import Testing

/// Every suite that uses URLSession in this process, run one test at a time. Linux URLSession reads every body on
/// one queue for the whole process, and making a task waits for that queue: a test whose caller stream blocks there
/// on purpose would otherwise hold up other suites' tasks on the concurrency pool's few threads, and with them its
/// own release.
@Suite(.serialized) enum URLSessionSuites {}
