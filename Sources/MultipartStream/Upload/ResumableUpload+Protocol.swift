import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The wire format of draft-ietf-httpbis-resumable-upload as this client speaks it, in one place: its header names,
/// the interop version, the request of each step, and an answer's fields parsed as the draft's structured fields
/// (RFC 9651).
extension ResumableUpload {
    /// The draft's interop versions this client speaks.
    enum InteropVersion: Int, Sendable {
        /// Version 6, which Apple's URLSession and SwiftNIO's `NIOResumableUpload` speak.
        case v6 = 6

        static let current = InteropVersion.v6
    }

    /// The draft's header names.
    enum Header {
        static let interopVersion = "Upload-Draft-Interop-Version"
        static let complete = "Upload-Complete"
        static let offset = "Upload-Offset"
        static let length = "Upload-Length"
        static let limit = "Upload-Limit"
        static let location = "Location"
    }

    /// The `Content-Type` of an append's body: a part of an upload, not a form.
    static let partialUploadType = "application/partial-upload"

    /// A request of the protocol.
    enum Step: Equatable, Sendable {
        /// `OPTIONS` the upload URL: does the server speak the draft?
        case detect
        /// `POST` (the form's method) with no body and `Upload-Complete: ?0`: where will the upload live?
        case create
        /// `PATCH` the upload with the form from this byte on, and `Upload-Complete: ?1`.
        case append(from: UInt64)
        /// `HEAD` the upload: how much of the form does the server have?
        case askOffset

        /// The request of this step, from the caller's `request` (its URL, headers and method where they apply):
        /// no body of its own, and the draft's headers. An append's body and length are the upload's to add.
        func request(
            from request: URLRequest,
            location: URL?,
            contentLength: UInt64,
            contentType: String
        ) -> URLRequest {
            var request = request
            request.httpBody = nil
            request.httpBodyStream = nil
            request.removeBodyHeaders()
            request.setValue(String(InteropVersion.current.rawValue), forHTTPHeaderField: Header.interopVersion)
            switch self {
            case .detect:
                request.httpMethod = "OPTIONS"
            case .create:
                // The form's request, announcing its length and sending none of it yet.
                if request.httpMethod == nil || request.httpMethod == "GET" { request.httpMethod = "POST" }
                request.setValue(StructuredField.boolean(false), forHTTPHeaderField: Header.complete)
                request.setValue(String(contentLength), forHTTPHeaderField: Header.length)
                request.setValue(contentType, forHTTPHeaderField: "Content-Type")
                request.httpBody = Data()
            case .append(let offset):
                request.url = location
                request.httpMethod = "PATCH"
                request.setValue(String(offset), forHTTPHeaderField: Header.offset)
                request.setValue(StructuredField.boolean(true), forHTTPHeaderField: Header.complete)
            case .askOffset:
                request.url = location
                request.httpMethod = "HEAD"
            }
            return request
        }
    }

    /// The draft's fields of an answer.
    struct Answer: Equatable, Sendable {
        var statusCode: Int
        /// `Upload-Limit` was present (an `OPTIONS` answer from a server that speaks the draft).
        var hasUploadLimit = false
        /// `Location`, resolved against the request's URL.
        var location: URL?
        /// `Upload-Offset`, a non-negative structured-field integer.
        var offset: UInt64?
        /// `Upload-Complete`, a structured-field boolean.
        var isComplete: Bool?

        /// The fields of `response`; a field that does not parse counts as absent.
        init(_ response: URLResponse) {
            guard let response = response as? HTTPURLResponse else {
                self.init(statusCode: 0)
                return
            }
            func field(_ name: String) -> String? { response.value(forHTTPHeaderField: name) }
            self.init(
                statusCode: response.statusCode,
                hasUploadLimit: field(Header.limit) != nil,
                location: field(Header.location).flatMap {
                    URL(string: $0.trimmingCharacters(in: .whitespaces), relativeTo: response.url)?.absoluteURL
                },
                offset: field(Header.offset).flatMap(StructuredField.integer).flatMap { UInt64(exactly: $0) },
                isComplete: field(Header.complete).flatMap(StructuredField.boolean))
        }

        init(
            statusCode: Int,
            hasUploadLimit: Bool = false,
            location: URL? = nil,
            offset: UInt64? = nil,
            isComplete: Bool? = nil
        ) {
            self.statusCode = statusCode
            self.hasUploadLimit = hasUploadLimit
            self.location = location
            self.offset = offset
            self.isComplete = isComplete
        }
    }
}

/// The structured-field items (RFC 9651) the draft's headers carry: booleans and integers, with parameters
/// ignored, as the RFC lets a recipient that does not know them.
enum StructuredField {
    /// `?1` or `?0`.
    static func boolean(_ value: Bool) -> String {
        value ? "?1" : "?0"
    }

    /// The boolean of a field's value, or `nil` if it is not one.
    static func boolean(_ field: String) -> Bool? {
        switch bareItem(of: field) {
        case "?1": true
        case "?0": false
        default: nil
        }
    }

    /// The integer of a field's value (an optional `-` and 1 to 15 digits), or `nil` if it is not one.
    static func integer(_ field: String) -> Int64? {
        guard let item = bareItem(of: field) else { return nil }
        let digits = item.hasPrefix("-") ? item.dropFirst() : Substring(item)
        guard (1...15).contains(digits.count), digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            return nil
        }
        return Int64(item)
    }

    /// The item of a field's value without surrounding spaces or parameters; `nil` for an empty value or a list.
    private static func bareItem(of field: String) -> String? {
        let trimmed = field.trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
        let item = trimmed.prefix { $0 != ";" }
        guard !item.isEmpty, !item.contains(","), !item.contains(" ") else { return nil }
        return String(item)
    }
}
