import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a new process needs to resume a resumable upload, as its state file holds it: where the upload lives, how
/// the form's bytes were made, and how far the server had them. Never a header's value, a credential in a URL, nor
/// a field's value (only a digest of the form).
struct SavedUpload: Codable, Equatable, Sendable {
    /// The state file's format; a file of another is ignored.
    static let format = 2
    var format = SavedUpload.format
    /// The request's method and URL, without user and password.
    var method: String
    var requestURL: String
    /// The upload resource, from the creation's `Location`.
    var uploadURL: String
    /// Whether the server put the upload resource on another origin than the request's: an upload URL on another
    /// origin is used only where the record says so.
    var uploadOnOtherOrigin: Bool
    /// The draft's interop version the upload was made with.
    var interopVersion: Int
    /// The boundary the form's bytes went out with.
    var boundary: String
    var contentLength: UInt64
    /// ``MultipartFormData/savedUploadFingerprint``: the form's boundary, length and parts, and which files at
    /// which versions.
    var fingerprint: String
    /// The bytes of the form the server said it has.
    var acknowledged: UInt64
    /// When the upload was created, and when this was last written.
    var created: Date
    var updated: Date
    /// When the server's `max-age` ends the upload resource's lifetime, where it gave one: past it, the upload is
    /// started over without a request to the resource.
    var expires: Date?
    /// When the run that wrote this was interrupted (Ctrl-C, a cancel): a run soon after asks the server until its
    /// offset stops growing, since it may still be taking what was in flight.
    var interrupted: Date?
    /// A SHA-256 digest of every other field, as ``sealed()`` writes it: a record changed anywhere (by a disk, or
    /// by hand) is ignored rather than half-trusted.
    var checksum = ""

    /// This record with its checksum.
    func sealed() -> SavedUpload {
        var sealed = self
        sealed.checksum = computedChecksum
        return sealed
    }

    /// The digest of the record's fields but the checksum, in the form the state file holds them.
    private var computedChecksum: String {
        var unsealed = self
        unsealed.checksum = ""
        var digest = SHA256()
        digest.update((try? Self.encoder.encode(unsealed)) ?? Data())
        return digest.hexDigest()
    }

    /// How a record is written: keys sorted, so that its bytes are a function of its fields.
    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return encoder
    }

    /// How a record is read: dates as ``encoder`` writes them.
    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }

    /// Why this record cannot be the upload's state, or `nil` when it can be: every field is checked, since the
    /// file is read back from disk and trusted no more than a server's answer. `interopVersions` are the ones the
    /// client speaks.
    func flaw(interopVersions: Set<Int>) -> String? {
        guard format == Self.format else { return "it is of format \(format), not \(Self.format)" }
        guard interopVersions.contains(interopVersion) else {
            let spoken = interopVersions.sorted().map(String.init).joined(separator: " or ")
            return "it speaks interop version \(interopVersion), not \(spoken)"
        }
        guard checksum == computedChecksum else { return "its checksum does not match what it holds" }
        guard let upload = URL(string: uploadURL) else { return "its upload URL is not a URL" }
        if let flaw = upload.flawAsServerChosen { return "its upload URL cannot be requested: \(flaw)" }
        guard uploadOnOtherOrigin || Origin(upload) == Origin(URL(string: requestURL)) else {
            return "its upload URL is on another origin than the request's, which the server did not choose"
        }
        guard Boundary.isValid(boundary) else { return "its boundary is not a valid one" }
        guard acknowledged <= contentLength else { return "its offset is past the form's length" }
        guard fingerprint.utf8.count == 64, fingerprint.utf8.allSatisfy(\.isHexDigit) else {
            return "its fingerprint is not a digest"
        }
        return nil
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool { (0x30...0x39).contains(self) || (0x61...0x66).contains(self) }
}
