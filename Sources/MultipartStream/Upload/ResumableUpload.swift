import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A `.resumable` upload: carries out the actions ``Resumption`` decides, each request one ``MultipartUpload`` on
/// the caller session's private session, so that redirects, challenges, the caller's delegate, exact lengths and
/// cancellation behave as in every other upload. Progress is one count over all requests: it goes on from the
/// offset a request resumes at, and never counts a byte twice.
struct ResumableUpload {
    /// The draft's interop version that Apple's URLSession and SwiftNIO's `NIOResumableUpload` speak.
    static let interopVersion = "6"
    /// The `Content-Type` of an append's body: a part of an upload, not a form.
    static let partialUploadType = "application/partial-upload"

    let form: MultipartFormData
    let request: URLRequest
    let session: URLSession
    let policy: MultipartResumption
    let progress: ProgressCoalescer?

    func run() async throws -> (Data, URLResponse) {
        // Ended before returning or throwing: no progress comes after the upload returns.
        defer { progress?.finish() }
        var resumption = Resumption(contentLength: form.contentLength, policy: policy)
        var action = resumption.start()
        var last: (Data, URLResponse)?
        while true {
            switch action {
            case .send(let step):
                do {
                    let answer = try await send(step, to: resumption.location)
                    last = answer
                    action = resumption.handle(.answered(Self.fields(of: answer.1)))
                } catch let error where Self.isConnectionFailure(error, during: step) {
                    action = resumption.handle(.connectionFailed(description: "\(error.localizedDescription)"))
                }
            case .wait(let seconds, let step):
                try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
                action = .send(step)
            case .sendWhole:
                return try await session.perform(request) { completion in
                    MultipartUpload(
                        form: form, role: .wholeForm(.stream(startingAt: 0)), callerSession: session,
                        origin: request.url, progress: progress, completion: completion)
                }
            case .answer:
                // Every action before `.answer` sent a request that answered.
                return last!
            case .fail(let reason):
                throw MultipartError(reason)
            }
        }
    }

    /// Sends one request of the protocol, with the caller's URL, headers and method where they apply.
    private func send(_ step: Resumption.Step, to location: URL?) async throws -> (Data, URLResponse) {
        var request = request
        request.httpBody = nil
        request.httpBodyStream = nil
        request.removeBodyHeaders()
        request.setValue(Self.interopVersion, forHTTPHeaderField: "Upload-Draft-Interop-Version")
        var role = MultipartUpload.Role.protocolRequest
        switch step {
        case .detect:
            request.httpMethod = "OPTIONS"
        case .create:
            // The form's request, announcing its length and sending none of it yet.
            if request.httpMethod == nil || request.httpMethod == "GET" { request.httpMethod = "POST" }
            request.setValue("?0", forHTTPHeaderField: "Upload-Complete")
            request.setValue(String(form.contentLength), forHTTPHeaderField: "Upload-Length")
            request.setValue(form.contentType, forHTTPHeaderField: "Content-Type")
            request.httpBody = Data()
        case .append(let offset):
            request.url = location
            request.httpMethod = "PATCH"
            request.setValue(String(offset), forHTTPHeaderField: "Upload-Offset")
            request.setValue("?1", forHTTPHeaderField: "Upload-Complete")
            role = .append(from: offset)
        case .askOffset:
            request.url = location
            request.httpMethod = "HEAD"
        }
        return try await session.perform(request) { completion in
            MultipartUpload(
                form: form, role: role, callerSession: session, origin: self.request.url, progress: progress,
                completion: completion)
        }
    }

    /// The draft's fields of an answer.
    private static func fields(of response: URLResponse) -> Resumption.Answer {
        guard let response = response as? HTTPURLResponse else { return Resumption.Answer(statusCode: 0) }
        func field(_ name: String) -> String? {
            response.value(forHTTPHeaderField: name)?.trimmingCharacters(in: .whitespaces)
        }
        return Resumption.Answer(
            statusCode: response.statusCode,
            hasUploadLimit: field("Upload-Limit") != nil,
            location: field("Location").flatMap { URL(string: $0, relativeTo: response.url)?.absoluteURL },
            offset: field("Upload-Offset").flatMap { UInt64($0) },
            isComplete: field("Upload-Complete").flatMap { $0 == "?1" ? true : $0 == "?0" ? false : nil })
    }

    /// Whether `error` is the connection's, which another request may not meet: dropped, reset, timed out, refused;
    /// or, while appending, URLSession's own resend of the part on a new connection, which the upload refused.
    static func isConnectionFailure(_ error: any Error, during step: Resumption.Step) -> Bool {
        if case .append = step, let error = error as? MultipartError, case .notReplayable = error.reason { return true }
        guard let error = error as? URLError else { return false }
        let codes: Set<URLError.Code> = [
            .networkConnectionLost, .timedOut, .cannotConnectToHost, .notConnectedToInternet, .cannotFindHost,
            .dnsLookupFailed, .badServerResponse, .unknown,
        ]
        return codes.contains(error.code)
    }
}
