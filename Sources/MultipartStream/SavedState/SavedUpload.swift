import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a new process needs to resume a resumable upload, as its state file holds it: where the upload lives, how
/// the form's bytes were made, and how far the server had them. Never a header's value, a credential in a URL, nor
/// a field's value (only a digest of the form).
struct SavedUpload: Codable, Equatable, Sendable {
    /// The state file's format; a file of another is ignored.
    static let format = 1
    var format = SavedUpload.format
    /// The request's method and URL, without user and password.
    var method: String
    var requestURL: String
    /// The upload resource, from the creation's `Location`.
    var uploadURL: String
    /// The draft's interop version the upload was made with.
    var interopVersion: Int
    /// The boundary the form's bytes went out with.
    var boundary: String
    var contentLength: UInt64
    /// ``MultipartFormData/savedUploadFingerprint``: the form's parts, and which files at which versions.
    var fingerprint: String
    /// The bytes of the form the server said it has.
    var acknowledged: UInt64
    /// When the upload was created, and when this was last written.
    var created: Date
    var updated: Date

    /// Why this record cannot be the upload's state, or `nil` when it can be: every field is checked, since the
    /// file is read back from disk and trusted no more than a server's answer.
    var flaw: String? {
        guard format == Self.format else { return "it is of format \(format), not \(Self.format)" }
        guard InteropVersion(rawValue: interopVersion) != nil else {
            return "it speaks interop version \(interopVersion), not \(InteropVersion.current.rawValue)"
        }
        guard let upload = URL(string: uploadURL), ["http", "https"].contains(upload.scheme?.lowercased() ?? "") else {
            return "its upload URL is not an http or https URL"
        }
        guard Boundary.isValid(boundary) else { return "its boundary is not a valid one" }
        guard acknowledged <= contentLength else { return "its offset is past the form's length" }
        guard fingerprint.utf8.count == 64, fingerprint.utf8.allSatisfy(\.isHexDigit) else {
            return "its fingerprint is not a digest"
        }
        return nil
    }

    typealias InteropVersion = ResumableUpload.InteropVersion
}

extension URL {
    /// This URL without user and password, as a state file keeps it.
    var withoutUserInfo: String {
        guard var components = URLComponents(url: self, resolvingAgainstBaseURL: true) else { return absoluteString }
        components.user = nil
        components.password = nil
        return components.string ?? absoluteString
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool { (0x30...0x39).contains(self) || (0x61...0x66).contains(self) }
}

extension MultipartFormData {
    /// The name of a saved upload's state: one for each request (method and URL) and form shape (each part's name,
    /// file name and file path), so that the same upload run again finds it, changed contents and all, and other
    /// uploads to the same URL do not. `nil` for a form that cannot be resumed in another process: one with a stream.
    func savedUploadKey(for request: URLRequest) -> String? {
        guard bodyParts.allSatisfy(\.body.isRebuildable) else { return nil }
        var digest = SHA256()
        digest.update(field: "multipart-saved-upload")
        digest.update(field: request.httpMethod ?? "POST")
        digest.update(field: request.url?.withoutUserInfo ?? "")
        digest.update(field: subtype)
        for part in bodyParts {
            digest.update(field: part.name ?? "")
            digest.update(field: part.fileName ?? "")
            if case .file(let url, _) = part.body { digest.update(field: url.standardizedFileURL.path) }
        }
        return digest.hexDigest()
    }

    /// A digest of everything that makes the form's bytes but its boundary: every part's headers and length, the
    /// bytes of a part in memory, and a file's path and identity (device, inode, size, modification time), so that
    /// a changed file or part makes another fingerprint. `nil` for a form with a stream part.
    var savedUploadFingerprint: String? {
        var digest = SHA256()
        digest.update(field: "multipart-form-fingerprint")
        digest.update(field: subtype)
        digest.update(number: UInt64(bodyParts.count))
        for part in bodyParts {
            digest.update(number: UInt64(part.headers.bytes.count))
            digest.update(part.headers.bytes)
            digest.update(number: part.body.length)
            switch part.body {
            case .bytes(let data):
                digest.update(field: "bytes")
                digest.update(data)
            case .file(let url, let identity):
                digest.update(field: "file")
                digest.update(field: url.standardizedFileURL.path)
                for number in [identity.device, identity.inode, identity.length] { digest.update(number: number) }
                digest.update(number: UInt64(bitPattern: Int64(identity.modifiedSeconds)))
                digest.update(number: UInt64(bitPattern: Int64(identity.modifiedNanoseconds)))
            case .stream, .streamFactory:
                return nil
            }
        }
        return digest.hexDigest()
    }
}

extension BodyPart.Body {
    /// Whether another process can make this body again from what a state file holds: bytes and files, not streams.
    fileprivate var isRebuildable: Bool {
        switch self {
        case .bytes, .file: true
        case .stream, .streamFactory: false
        }
    }
}
