import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The wire format of draft-ietf-httpbis-resumable-upload as this client speaks it, in one place: its header names,
/// the interop version, the request of each step, and an answer's fields parsed as the draft's structured fields
/// (RFC 9651).
extension ResumableUpload {
    /// The draft's interop versions this client speaks; a server is asked for the newest first.
    enum InteropVersion: Int, Sendable, CaseIterable, Comparable, Codable {
        /// Drafts -04 and -05, which SwiftNIO's `NIOResumableUpload` and tusd speak: the lifetime is `expires`, and
        /// an append's 2xx without `Upload-Complete` is the application's answer.
        case v6 = 6
        /// Drafts -06 to -08: `max-age`, and `Upload-Complete` on every answer to an append.
        case v7 = 7
        /// Drafts -09 to -11, which Apple's URLSession sends: limits announced (also on `OPTIONS`, with
        /// `Accept-Patch`) and kept by the client, and `104 (Upload Resumption Supported)` described.
        case v8 = 8
        /// Drafts -12 to -15.
        case v9 = 9
        /// The editor's draft of 2026, as the draft's Apple editor's example server middleware speaks it (beside 6):
        /// `Upload-Complete: ?1` on an answer says it is the application's (the target resource's), even one that
        /// came before the whole upload, as an application that refuses the form early answers; the offset is asked
        /// with `HEAD` or `GET`, whose answer carries `Upload-Length` and `Upload-Limit`; a request in a version the
        /// server does not speak is answered 400 without `Upload-Draft-Interop-Version`.
        case v10 = 10

        static let newest = InteropVersion.v10

        /// Every version spoken, as a saved upload's record names them.
        static let spoken = Set(allCases.map(\.rawValue))

        /// The version a server that does not speak this one is asked for next.
        var older: InteropVersion? { InteropVersion(rawValue: rawValue - 1) }

        /// Whether every answer to an append must say `Upload-Complete`: from version 7 on, a 2xx without it is a
        /// breach, not the application's answer.
        var requiresUploadComplete: Bool { self >= .v7 }

        /// Whether `Upload-Complete: ?1` on an answer that came before the append's last byte was handed out is the
        /// application's refusal of the form (a 400 or 413 after its first part, a 401), to be returned as it is: from
        /// version 10 on. Before it, `?1` says the whole upload was received, which the client had not sent: a breach.
        /// A success before the last byte is a breach in every version: the application cannot have the form.
        var takesEarlyRefusal: Bool { self >= .v10 }

        static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// The draft's header names.
    package enum Header {
        static let interopVersion = "Upload-Draft-Interop-Version"
        package static let complete = "Upload-Complete"
        /// The field of interop versions before 5, meaning the opposite; `NIOResumableUpload` 1.35.2 still puts
        /// `Upload-Incomplete: ?0` on the application's answer to a version 6 append.
        static let incomplete = "Upload-Incomplete"
        package static let offset = "Upload-Offset"
        static let length = "Upload-Length"
        static let limit = "Upload-Limit"
        static let location = "Location"
        static let retryAfter = "Retry-After"
        /// On an `OPTIONS` answer from version 8 on, naming `application/partial-upload`: the server speaks the draft.
        static let acceptPatch = "Accept-Patch"
        /// draft-ietf-httpapi-idempotency-key-header's field, which a caller (an upload queue) puts on its request so
        /// that a server that honours it takes the same creation, or the same whole form, once however often it is
        /// sent. It names that one request: the other steps go without it, or such a server would take an append, an
        /// offset asked or a `DELETE` for the creation again.
        package static let idempotencyKey = "Idempotency-Key"
    }

    /// `Upload-Limit`: what the server takes, a structured-field dictionary (`max-size=1000, max-age=3600`); keys
    /// that are unknown, or whose value is not a non-negative integer, are left out.
    struct Limits: Equatable, Sendable, Codable {
        /// The largest form the server takes.
        var maxSize: UInt64?
        /// The smallest form worth a resumable upload: a smaller one goes whole, as a plain request.
        var minSize: UInt64?
        /// The most bytes one append may carry.
        var maxAppendSize: UInt64?
        /// The fewest bytes an append that does not complete the upload may carry.
        var minAppendSize: UInt64?
        /// Seconds the upload resource lives after the answer that says so (version 6 calls it `expires`).
        var maxAge: UInt64?

        init(
            maxSize: UInt64? = nil, minSize: UInt64? = nil, maxAppendSize: UInt64? = nil,
            minAppendSize: UInt64? = nil, maxAge: UInt64? = nil
        ) {
            self.maxSize = maxSize
            self.minSize = minSize
            self.maxAppendSize = maxAppendSize
            self.minAppendSize = minAppendSize
            self.maxAge = maxAge
        }

        /// The limits of a field's value; `nil` when it is not a dictionary at all.
        init?(field: String) {
            var limits = Limits()
            for member in field.split(separator: ",", omittingEmptySubsequences: false) {
                let pair = member.split(separator: "=", maxSplits: 1)
                let key = pair.first.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " \t")) } ?? ""
                guard Self.isKey(key) else { return nil }
                let value = pair.count == 2 ? StructuredField.integer(String(pair[1])).flatMap(UInt64.init) : nil
                switch key {
                case "max-size": limits.maxSize = value
                case "min-size": limits.minSize = value
                case "max-append-size": limits.maxAppendSize = value
                case "min-append-size": limits.minAppendSize = value
                case "max-age", "expires": limits.maxAge = value
                default: break
                }
            }
            self = limits
        }

        /// RFC 9651's `key`: a lowercase letter or `*`, then lowercase letters, digits, `_`, `-`, `.` and `*`; keys
        /// this client does not know are taken and left out.
        private static func isKey(_ key: String) -> Bool {
            func isLower(_ byte: UInt8) -> Bool { (0x61...0x7A).contains(byte) }
            guard let first = key.utf8.first, isLower(first) || first == UInt8(ascii: "*") else { return false }
            return key.utf8.allSatisfy { byte in
                isLower(byte) || (0x30...0x39).contains(byte) || "_-.*".utf8.contains(byte)
            }
        }

        /// These limits, with `other`'s where it names one: a later answer refines an earlier one.
        func merging(_ other: Limits?) -> Limits {
            guard let other else { return self }
            return Limits(
                maxSize: other.maxSize ?? maxSize, minSize: other.minSize ?? minSize,
                maxAppendSize: other.maxAppendSize ?? maxAppendSize,
                minAppendSize: other.minAppendSize ?? minAppendSize, maxAge: other.maxAge ?? maxAge)
        }
    }

    /// The `Content-Type` of an append's body: a part of an upload, not a form.
    static let partialUploadType = "application/partial-upload"

    /// How the request layer frames an append: its type, and a success that came before its last byte, which is
    /// an answer for the machine to judge where `Upload-Complete` says how the server stands: `?0`, it kept part of it
    /// (the upload goes on from its offset, bounded by what was handed out); `?1`, it claims a form it cannot have,
    /// the breach the machine fails it with, deleting nothing the server calls complete.
    static let appendFraming = UploadRequest.PartFraming(
        contentType: partialUploadType,
        takesEarlySuccess: { response in
            let answer = Answer(response)
            return answer.isComplete != nil || answer.incomplete != nil
        })

    /// A request of the protocol.
    enum Step: Equatable, Sendable {
        /// `OPTIONS` the upload URL: does the server speak the draft?
        case detect
        /// `POST` (the form's method) with no body and `Upload-Complete: ?0`, with `Upload-Length` where the form's
        /// length is known: where will the upload live?
        case create
        /// `POST` (the form's method) with the whole form and `Upload-Complete: ?1`: a form small enough to send again
        /// whole (``MultipartResumption/singleRequestLimit``) goes in one request, as Apple's URLSession sends every
        /// upload, and a server without the draft takes it as a plain upload.
        case createComplete
        /// `PATCH` the upload with the form's bytes from `from` up to `upTo`, and `Upload-Complete: ?1` when that is
        /// the form's end (`?0` for an append that `Upload-Limit`'s `max-append-size` keeps shorter).
        case append(from: UInt64, upTo: UInt64)
        /// `HEAD` the upload: how much of the form does the server have?
        case askOffset
        /// `DELETE` the upload: it failed, and the server should not keep what it has.
        case delete

        /// How the step's request is named in errors.
        var name: String {
            switch self {
            case .detect: "OPTIONS"
            case .create, .createComplete: "the creation request"
            case .append: "PATCH"
            case .askOffset: "HEAD"
            case .delete: "DELETE"
            }
        }

        /// What the hook is told this step's request is.
        var reason: MultipartHeaders.ResumableStep {
            switch self {
            case .detect: .discovery
            case .create, .createComplete: .creation
            case .append(let offset, _): .append(offset: offset)
            case .askOffset: .offset
            case .delete: .cleanUp
            }
        }

        /// Where this step's request goes and what the draft has it carry, as ``RequestMaker`` makes it from the
        /// caller's request (its URL, headers and method where they apply): no body of the caller's, the step's URL
        /// and method, then the draft's fields in `version` after the hook's and the origin rule, so that nothing
        /// else changes them. An append's body and length are the upload's to add. `key` is the upload's own
        /// `Idempotency-Key`, where the caller's request has none.
        func aim(
            location: URL?, version: InteropVersion, contentLength: UInt64?, contentType: String,
            timeout: TimeInterval? = nil, key: String? = nil
        ) -> RequestMaker.Aim {
            var aim = RequestMaker.Aim(timeout: timeout, withoutBody: self != .createComplete)
            aim.fields = [(Header.interopVersion, String(version.rawValue))]
            // Only the request that creates the upload carries a key: the caller's, or else the upload's own.
            if self != .create, self != .createComplete {
                aim.removing = [Header.idempotencyKey]
            } else if let key {
                aim.fields.append((Header.idempotencyKey, StructuredField.string(key)))
            }
            switch self {
            case .detect:
                aim.method = .named("OPTIONS")
            case .create:
                // The form's request, announcing its length and sending none of it yet. A form of unknown length
                // says its length with the append that completes it.
                aim.method = .form
                aim.fields.append((Header.complete, StructuredField.boolean(false)))
                aim.fields.append((Header.length, contentLength.map(String.init)))
                aim.emptyBody = contentType
            case .createComplete:
                // The form's own request, its body the form, said to be the whole upload.
                aim.method = .form
                aim.fields.append((Header.complete, StructuredField.boolean(true)))
                aim.fields.append((Header.length, contentLength.map(String.init)))
            case .append(let offset, _):
                (aim.url, aim.method) = (location, .named("PATCH"))
                aim.fields.append((Header.offset, String(offset)))
                aim.fields.append((Header.complete, StructuredField.boolean(completes(contentLength))))
            case .askOffset:
                (aim.url, aim.method) = (location, .named("HEAD"))
            case .delete:
                (aim.url, aim.method) = (location, .named("DELETE"))
            }
            return aim
        }

        /// Whether this is the append that completes a form of `contentLength` (`nil`, unknown yet: none does): the
        /// one it says `Upload-Complete: ?1` on, and whose answer is the application's.
        func completes(_ contentLength: UInt64?) -> Bool {
            guard case .append(_, let end) = self, let contentLength else { return false }
            return end >= contentLength
        }

        /// The draft's fields `request` (this step's) carries, by name, with the `Content-Length` of an append or of
        /// the whole form: what `-v` shows of it.
        func fields(of request: URLRequest) -> [String: String] {
            var fields: [String: String] = [:]
            for name in [Header.interopVersion, Header.complete, Header.offset, Header.length] {
                fields[name] = request.value(forHTTPHeaderField: name)
            }
            switch self {
            case .append(let offset, let end): fields["Content-Length"] = String(end.subtractingSaturated(offset))
            case .createComplete: fields["Content-Length"] = fields[Header.length]
            default: break
            }
            return fields
        }
    }

    /// The draft's fields of an answer.
    struct Answer: Equatable, Sendable {
        var statusCode: Int
        /// `Upload-Limit`, when present and a dictionary (an `OPTIONS` answer from a server that speaks the draft).
        var limits: Limits?
        /// `Location`, resolved against the request's URL without its user and password: those are the caller's,
        /// and ride to the upload only under the origin rule, never inside the server's URL.
        var location: URL?
        /// `Upload-Offset`, a non-negative structured-field integer.
        var offset: UInt64?
        /// `Upload-Complete`, a structured-field boolean: the only field that says an upload is complete from version
        /// 7 on (``read(in:)`` takes `Upload-Incomplete`'s word for it in version 6).
        var isComplete: Bool?
        /// `Upload-Incomplete`, the field of interop versions before 5, meaning the opposite: `NIOResumableUpload`
        /// still puts it on its version 6 answers; in a later version it says nothing.
        var incomplete: Bool?
        /// `Upload-Length`, the form's length as the server knows it.
        var length: UInt64?
        /// `Retry-After` in seconds (its HTTP-date form is not read).
        var retryAfter: Double?
        /// `Upload-Draft-Interop-Version`: the version the server says it answered in, where it says one.
        var interopVersion: Int?
        /// Whether `Accept-Patch` names `application/partial-upload`.
        var acceptsPartialUpload = false

        /// Whether `Upload-Limit` was present.
        var hasUploadLimit: Bool { limits != nil }

        /// This answer as `version` reads it: in version 6, `Upload-Incomplete` answers for a missing
        /// `Upload-Complete`, as `NIOResumableUpload` writes it; from version 7 on only `Upload-Complete` says whether
        /// an upload is complete, so a server of those versions that says `Upload-Incomplete: ?0` has said nothing.
        func read(in version: InteropVersion) -> Answer {
            guard isComplete == nil, version < .v7, let incomplete else { return self }
            var answer = self
            answer.isComplete = !incomplete
            return answer
        }

        /// The draft's fields of `response`, with `Location` and `Retry-After`, by name: what `-v` shows of it.
        static func fields(of response: HTTPURLResponse) -> [String: String] {
            var fields: [String: String] = [:]
            for name in [
                Header.interopVersion, Header.complete, Header.offset, Header.length, Header.limit, Header.location,
                Header.retryAfter,
            ] {
                fields[name] = response.value(forHTTPHeaderField: name)
            }
            return fields
        }

        /// The fields of `response`; a field that does not parse counts as absent.
        init(_ response: URLResponse) {
            guard let response = response as? HTTPURLResponse else {
                self.init(statusCode: 0)
                return
            }
            func field(_ name: String) -> String? { response.value(forHTTPHeaderField: name) }
            self.init(
                statusCode: response.statusCode,
                limits: field(Header.limit).flatMap(Limits.init(field:)),
                location: field(Header.location).flatMap {
                    URL(string: $0.trimmingCharacters(in: .whitespaces), relativeTo: response.url?.removingUserInfo)?
                        .absoluteURL
                },
                offset: field(Header.offset).flatMap(StructuredField.integer).flatMap { UInt64(exactly: $0) },
                isComplete: field(Header.complete).flatMap(StructuredField.boolean),
                incomplete: field(Header.incomplete).flatMap(StructuredField.boolean),
                length: field(Header.length).flatMap(StructuredField.integer).flatMap { UInt64(exactly: $0) },
                retryAfter: field(Header.retryAfter).flatMap {
                    UInt32($0.trimmingCharacters(in: .whitespaces)).map(Double.init)
                },
                interopVersion: field(Header.interopVersion).flatMap(StructuredField.integer).flatMap {
                    Int(exactly: $0)
                },
                acceptsPartialUpload: field(Header.acceptPatch).map { value in
                    value.split(separator: ",").contains {
                        $0.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
                            == partialUploadType
                    }
                } ?? false)
        }

        init(
            statusCode: Int,
            limits: Limits? = nil,
            location: URL? = nil,
            offset: UInt64? = nil,
            isComplete: Bool? = nil,
            incomplete: Bool? = nil,
            length: UInt64? = nil,
            retryAfter: Double? = nil,
            interopVersion: Int? = nil,
            acceptsPartialUpload: Bool = false
        ) {
            self.statusCode = statusCode
            self.limits = limits
            self.location = location
            self.offset = offset
            self.isComplete = isComplete
            self.incomplete = incomplete
            self.length = length
            self.retryAfter = retryAfter
            self.interopVersion = interopVersion
            self.acceptsPartialUpload = acceptsPartialUpload
        }
    }
}
