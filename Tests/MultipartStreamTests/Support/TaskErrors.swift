import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The error `form` sent with `request` through `multipartUploadTask` ends with, if any.
func multipartTaskError(_ request: URLRequest, form: MultipartFormData) async -> (any Error)? {
    await withCheckedContinuation { continuation in
        URLSession.shared.multipartUploadTask(with: request, form: form) { _, _, error in
            continuation.resume(returning: error)
        }.resume()
    }
}

/// The error `request` (made with the form) ends with through `uploadTask(withStreamedRequest:)`, on a session of its
/// own whose delegate is a ``MultipartStreamedUploadDelegate``, if any.
func streamedDelegateError(_ request: URLRequest) async -> (any Error)? {
    await withCheckedContinuation { continuation in
        let delegate = MultipartStreamedUploadDelegate { _, _, _, error in
            continuation.resume(returning: error)
        }
        let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
        session.uploadTask(withStreamedRequest: request).resume()
        session.finishTasksAndInvalidate()
    }
}
