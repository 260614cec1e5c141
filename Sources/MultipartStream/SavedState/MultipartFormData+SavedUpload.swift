import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension MultipartFormData {
    /// The name of a saved upload's state: one for each request as it is sent (the method URLSession sends, the URL
    /// without user and password) and form shape (each part's name, file name and file path), so that the same
    /// upload run again finds it, changed contents and all, and other uploads to the same URL do not. `nil` for a
    /// form that cannot be resumed in another process: one with a stream.
    func savedUploadKey(for request: URLRequest) -> String? {
        guard bodyParts.allSatisfy(\.body.isRebuildable) else { return nil }
        var digest = SHA256()
        digest.update(field: "multipart-saved-upload")
        digest.update(field: request.formMethod)
        digest.update(field: request.url?.withoutUserInfo ?? "")
        digest.update(field: subtype)
        for part in bodyParts {
            digest.update(field: part.name ?? "")
            digest.update(field: part.fileName ?? "")
            if case .file(let url, let identity) = part.body { digest.update(file: url, identity) }
        }
        return digest.hexDigest()
    }

    /// A digest of everything that makes the form's bytes: its boundary and length, and its shape
    /// (``savedUploadShape``), so that a changed file or part, or a boundary swapped in the record, makes another
    /// fingerprint. `nil` for a form with a stream part.
    var savedUploadFingerprint: String? {
        guard let shape = savedUploadShape, let contentLength else { return nil }
        return Self.savedUploadFingerprint(shape: shape, boundary: boundary, contentLength: contentLength)
    }

    /// The fingerprint of a form of `shape` with `boundary` and `contentLength`: cheap, where the shape reads every
    /// part in memory, so that a saved upload digests its form's parts once, whatever its boundary.
    static func savedUploadFingerprint(shape: String, boundary: String, contentLength: UInt64) -> String {
        var digest = SHA256()
        digest.update(field: "multipart-form-fingerprint-2")
        digest.update(field: shape)
        digest.update(field: boundary)
        digest.update(number: contentLength)
        return digest.hexDigest()
    }

    /// A digest of everything that makes the form's bytes but its boundary: every part's headers and length, the
    /// bytes of a part in memory, and a file's path and identity (device, inode, size, modification time). `nil` for
    /// a form with a stream part.
    var savedUploadShape: String? {
        var digest = SHA256()
        digest.update(field: "multipart-form-shape")
        digest.update(field: subtype)
        digest.update(number: UInt64(bodyParts.count))
        for part in bodyParts {
            digest.update(number: UInt64(part.headers.bytes.count))
            digest.update(part.headers.bytes)
            switch part.body {
            case .bytes(let data):
                digest.update(number: UInt64(data.count))
                digest.update(field: "bytes")
                digest.update(data)
            case .file(let url, let identity):
                digest.update(number: identity.length)
                digest.update(field: "file")
                digest.update(file: url, identity)
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

extension SHA256 {
    /// Adds which file `url` is: its path, or for a path through an open descriptor (`/dev/fd/N`,
    /// `/proc/self/fd/N`, as the command reaches a path that is not UTF-8), the file's device and inode, since N
    /// comes out differently from run to run.
    fileprivate mutating func update(file url: URL, _ identity: FileIdentity) {
        let path = url.standardizedFileURL.path
        guard path.hasPrefix("/dev/fd/") || path.hasPrefix("/proc/self/fd/") else { return update(field: path) }
        update(field: "descriptor")
        update(number: identity.device)
        update(number: identity.inode)
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
