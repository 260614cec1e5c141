/// MIME types by file extension: Linux has no UTType, so the package carries the common ones.
enum MIMEType {
    static let fallback = "application/octet-stream"

    /// The type for `fileName`'s extension (case-insensitive), or `application/octet-stream`.
    static func forFileName(_ fileName: String) -> String {
        guard let dot = fileName.lastIndex(of: "."), dot != fileName.startIndex else { return fallback }
        let pathExtension = fileName[fileName.index(after: dot)...].lowercased()
        return byExtension[pathExtension] ?? fallback
    }

    /// A MIME type goes out as a header value, so it must be non-empty and hold no control characters.
    static func isValid(_ type: String) -> Bool {
        !type.isEmpty && PartHeaders.isValidValue(type)
    }

    private static let byExtension: [String: String] = [
        // Images
        "jpg": "image/jpeg", "jpeg": "image/jpeg", "jpe": "image/jpeg", "png": "image/png", "gif": "image/gif",
        "webp": "image/webp", "heic": "image/heic", "heif": "image/heif", "avif": "image/avif", "bmp": "image/bmp",
        "tif": "image/tiff", "tiff": "image/tiff", "svg": "image/svg+xml", "ico": "image/vnd.microsoft.icon",
        "dng": "image/x-adobe-dng",
        // Video
        "mp4": "video/mp4", "m4v": "video/x-m4v", "mov": "video/quicktime", "webm": "video/webm",
        "mkv": "video/x-matroska", "avi": "video/x-msvideo", "mpeg": "video/mpeg", "mpg": "video/mpeg",
        "3gp": "video/3gpp", "ts": "video/mp2t", "wmv": "video/x-ms-wmv", "flv": "video/x-flv",
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
        "wasm": "application/wasm", "swift": "text/x-swift",
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
        "pem": "application/x-pem-file", "p12": "application/x-pkcs12", "glb": "model/gltf-binary",
        "gltf": "model/gltf+json", "usdz": "model/vnd.usdz+zip",
    ]
}
