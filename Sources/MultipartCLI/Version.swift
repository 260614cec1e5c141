import MultipartStream

/// The command's version, as `--version` prints it and the `User-Agent` carries it.
enum Version {
    /// The package's one version constant: the command is released with the library, never apart from it.
    static let current = MultipartStreamVersion.string

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
