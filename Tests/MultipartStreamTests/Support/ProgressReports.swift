import Foundation
import MultipartStream

/// Progress reports, collected from URLSession's threads.
final class ProgressReports: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Lock()
    private var collected: [MultipartUploadProgress] = []

    @Sendable func append(_ progress: MultipartUploadProgress) {
        lock.withLock { collected.append(progress) }
    }

    var values: [MultipartUploadProgress] {
        lock.withLock { collected }
    }
}
