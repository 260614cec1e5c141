#if canImport(UniformTypeIdentifiers)
    import UniformTypeIdentifiers
#endif

/// MIME types by file extension: the system's UTType where there is one, else the package's table of common types
/// (Linux has no UTType).
enum MIMEType {
    static let fallback = "application/octet-stream"

    /// The type for `fileName`'s extension (case-insensitive), or `application/octet-stream`.
    static func forFileName(_ fileName: String) -> String {
        guard let dot = fileName.lastIndex(of: "."), dot != fileName.startIndex else { return fallback }
        let pathExtension = fileName[fileName.index(after: dot)...].lowercased()
        #if canImport(UniformTypeIdentifiers)
            // Apple platforms only, from iOS 14 and macOS 11; the table below stands in on older ones.
            if #available(macOS 11, iOS 14, tvOS 14, watchOS 7, *),
                let type = UTType(filenameExtension: pathExtension)?.preferredMIMEType
            {
                return type
            }
        #endif
        return byExtension[pathExtension] ?? fallback
    }

    /// A MIME type goes out as a header value, so it must be non-empty and hold no control characters.
    package static func isValid(_ type: String) -> Bool {
        !type.isEmpty && PartHeaders.isValidValue(type)
    }

    /// The package's table: the type of each extension it knows.
    static let byExtension: [String: String] = [
        // Images
        "jpg": "image/jpeg", "jpeg": "image/jpeg", "jpe": "image/jpeg", "png": "image/png", "gif": "image/gif",
        "webp": "image/webp", "heic": "image/heic", "heif": "image/heif", "avif": "image/avif", "bmp": "image/bmp",
        "tif": "image/tiff", "tiff": "image/tiff", "svg": "image/svg+xml", "ico": "image/vnd.microsoft.icon",
        "dng": "image/x-adobe-dng", "heics": "image/heic-sequence", "jxl": "image/jxl", "apng": "image/apng",
        "psd": "image/vnd.adobe.photoshop", "cr2": "image/x-canon-cr2", "nef": "image/x-nikon-nef",
        // Video
        "mp4": "video/mp4", "m4v": "video/x-m4v", "mov": "video/quicktime", "webm": "video/webm",
        "mkv": "video/x-matroska", "avi": "video/x-msvideo", "mpeg": "video/mpeg", "mpg": "video/mpeg",
        "3gp": "video/3gpp", "m3u8": "application/vnd.apple.mpegurl", "ts": "video/mp2t", "wmv": "video/x-ms-wmv",
        "flv": "video/x-flv",
        // Audio
        "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "wav": "audio/wav", "flac": "audio/flac",
        "ogg": "audio/ogg", "oga": "audio/ogg", "opus": "audio/opus", "weba": "audio/webm", "aif": "audio/aiff",
        "aiff": "audio/aiff", "mid": "audio/midi", "midi": "audio/midi", "caf": "audio/x-caf",
        // Documents
        "pdf": "application/pdf", "doc": "application/msword",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls": "application/vnd.ms-excel",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "ppt": "application/vnd.ms-powerpoint",
        "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "odt": "application/vnd.oasis.opendocument.text", "ods": "application/vnd.oasis.opendocument.spreadsheet",
        "odp": "application/vnd.oasis.opendocument.presentation", "rtf": "application/rtf",
        "epub": "application/epub+zip", "pages": "application/vnd.apple.pages",
        "key": "application/vnd.apple.keynote", "numbers": "application/vnd.apple.numbers",
        // Text and data
        "txt": "text/plain", "text": "text/plain", "log": "text/plain", "md": "text/markdown",
        "markdown": "text/markdown", "csv": "text/csv", "tsv": "text/tab-separated-values", "html": "text/html",
        "htm": "text/html", "css": "text/css", "js": "text/javascript", "mjs": "text/javascript",
        "xml": "application/xml", "json": "application/json", "jsonl": "application/jsonl",
        "ndjson": "application/x-ndjson", "yaml": "application/yaml", "yml": "application/yaml",
        "toml": "application/toml", "ics": "text/calendar", "vcf": "text/vcard", "sql": "application/sql",
        "wasm": "application/wasm", "swift": "text/x-swift", "vtt": "text/vtt", "srt": "application/x-subrip",
        "eml": "message/rfc822", "ps": "application/postscript", "eps": "application/postscript",
        // Archives and packages
        "zip": "application/zip", "gz": "application/gzip", "tgz": "application/gzip", "bz2": "application/x-bzip2",
        "xz": "application/x-xz", "zst": "application/zstd", "tar": "application/x-tar",
        "7z": "application/x-7z-compressed", "rar": "application/vnd.rar", "dmg": "application/x-apple-diskimage",
        "ipa": "application/octet-stream", "apk": "application/vnd.android.package-archive",
        "jar": "application/java-archive", "deb": "application/vnd.debian.binary-package",
        // Fonts
        "ttf": "font/ttf", "otf": "font/otf", "woff": "font/woff", "woff2": "font/woff2",
        // Other binary
        "bin": "application/octet-stream", "sqlite": "application/vnd.sqlite3", "db": "application/octet-stream",
        "plist": "application/x-plist", "mobileconfig": "application/x-apple-aspen-config",
        // Certificates and keys, as AFNetworking sent them
        "cer": "application/x-x509-ca-cert", "crt": "application/x-x509-ca-cert", "der": "application/x-x509-ca-cert",
        "pem": "application/x-pem-file", "p12": "application/x-pkcs12", "pfx": "application/x-pkcs12",
        "p7b": "application/x-pkcs7-certificates", "p7c": "application/pkcs7-mime", "crl": "application/pkix-crl",
        "glb": "model/gltf-binary",
        "gltf": "model/gltf+json", "usdz": "model/vnd.usdz+zip",
    ]
}
