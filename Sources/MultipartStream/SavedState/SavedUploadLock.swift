/// A held lock of a saved upload; ``release()`` ends it, as the process's end does.
package final class SavedUploadLock: Sendable {
    private let descriptor: Int32
    private let path: String

    /// Made by ``SavedUploadDirectory/lock(_:)``, which holds the lock on `descriptor`.
    init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    /// Removes the lock file, then lets go of it: a process that opened it before sees it gone and opens anew.
    package func release() {
        try? POSIX.unlink(path)
        POSIX.close(descriptor)
    }
}
