/// The `Content-Type` curl 7.88 gives a file part that names none (its `lib/mime.c`): the type of one of ten
/// extensions, matched at the end of the file name whatever its case; else `application/octet-stream` for a file, and
/// no `Content-Type` at all for standard input. The command types parts as curl does, so that it sends the bytes
/// `curl -F` sends; the library's own table, richer, is for its API.
enum CurlContentType {
    private static let byEnding: [(ending: String, type: String)] = [
        (".gif", "image/gif"), (".jpg", "image/jpeg"), (".jpeg", "image/jpeg"), (".png", "image/png"),
        (".svg", "image/svg+xml"), (".txt", "text/plain"), (".htm", "text/html"), (".html", "text/html"),
        (".pdf", "application/pdf"), (".xml", "application/xml"),
    ]

    /// The type curl gives a part named `fileName`, read from a file or from standard input.
    static func forFile(named fileName: String, fromStandardInput: Bool) -> String? {
        let name = fileName.lowercased()
        if let match = byEnding.first(where: { name.hasSuffix($0.ending) }) { return match.type }
        return fromStandardInput ? nil : "application/octet-stream"
    }
}
