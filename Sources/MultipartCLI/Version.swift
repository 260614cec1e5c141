/// The command's version, as `--version` prints it and the `User-Agent` carries it.
enum Version {
    /// No release is tagged yet: the version the first one will have.
    static let current = "0.1.0"

    /// `multipart --version`: the version, what it runs on, and what it speaks.
    static var description: String {
        #if canImport(Darwin)
            let client = "Apple URLSession"
        #else
            let client = "swift-corelibs-foundation URLSession (libcurl)"
        #endif
        return """
            multipart \(current) (MultipartStream \(current); \(client))
            Protocols: http https
            Features: multipart/form-data streaming, resumable uploads (draft-ietf-httpbis-resumable-upload, interop \
            versions 6 to 10)
            """
    }
}
