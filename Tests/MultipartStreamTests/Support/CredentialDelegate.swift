import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A caller's session delegate that answers Basic challenges with u:p.
final class CredentialDelegate: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Lock()
    private var count = 0

    var challenges: Int { lock.withLock { count } }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        lock.withLock { count += 1 }
        completionHandler(.useCredential, URLCredential(user: "u", password: "p", persistence: .none))
    }
}
