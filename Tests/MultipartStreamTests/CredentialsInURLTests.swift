import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// A user and password written in the URL (`http://ada:pw@host/`) are the first origin's, as an `Authorization`
    /// header is: a redirect to another origin, however its `Location` is written, carries none of them, and one to the
    /// same origin keeps them, as curl 7.88 does. swift-corelibs-foundation resolves a scheme-relative `Location` by
    /// changing only the host and port of the URL it answers, user and password kept, and libcurl sends those as
    /// `Authorization: Basic`.
    ///
    /// Among ``URLSessionSuites``: its uploads' sockets, beside them, were counted by a cancel storm's check that
    /// it leaves none open.
    @Suite struct CredentialsInURLTests {
        static let basic = RedirectCases.basic
        static let codes = RedirectCases.codes

        private func form() -> MultipartFormData {
            var form = MultipartFormData()
            form.append("value", name: "field")
            return form
        }

        @Test(arguments: codes)
        func theUploadAPI(code: Int) async throws {
            let (first, other) = (try await UploadServer(), try await UploadServer())
            for (location, leaves) in RedirectCases.locations(first: first, other: other) {
                let before = try await (first.log().count, other.log().count)
                let url = RedirectCases.withCredentials(first, RedirectCases.redirectPath(code, to: location))
                let (_, response) = try await URLSession.shared.upload(form(), with: URLRequest(url: url))
                #expect(response.url?.path.hasSuffix("landed") == true, "\(code) \(location)")
                let reached = leaves ? other : first
                let request = try #require(try await reached.log().dropFirst(leaves ? before.1 : before.0).last)
                #expect(request.path.hasSuffix("landed"), "\(code) \(location): \(request)")
                #expect(
                    request.authorization == (leaves ? nil : Self.basic), "\(code) \(location): \(request)")
            }
        }

        /// `multipartUploadTask` follows what URLSession resends without a body (301 to 303 turn the POST into a GET);
        /// the streamed request's delegate likewise.
        @Test(arguments: [301, 302, 303])
        func theTaskAndStreamedRequestAPIs(code: Int) async throws {
            let (first, other) = (try await UploadServer(), try await UploadServer())
            let form = form()
            for (location, leaves) in RedirectCases.locations(first: first, other: other) {
                let url = RedirectCases.withCredentials(first, RedirectCases.redirectPath(code, to: location))
                let session = URLSession(configuration: .ephemeral)
                defer { session.finishTasksAndInvalidate() }
                let taskDone: Void = try await withCheckedThrowingContinuation { continuation in
                    session.multipartUploadTask(with: URLRequest(url: url), form: form) { _, _, error in
                        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
                    }.resume()
                }
                _ = taskDone
                let streamedDone: Void = await withCheckedContinuation { continuation in
                    let delegate = MultipartStreamedUploadDelegate { _, _, _, _ in continuation.resume() }
                    let streamed = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
                    streamed.uploadTask(withStreamedRequest: URLRequest(url: url, multipartFormData: form)).resume()
                    streamed.finishTasksAndInvalidate()
                }
                _ = streamedDone
                let reached = try await (leaves ? other : first).log().filter { $0.path.hasSuffix("landed") }.suffix(2)
                #expect(reached.count == 2, "\(code) \(location)")
                #expect(
                    reached.allSatisfy { $0.authorization == (leaves ? nil : Self.basic) },
                    "\(code) \(location): \(reached)")
            }
        }
    }
}
