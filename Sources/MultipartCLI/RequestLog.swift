import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What `-v` shows of a request: its request line and every header as it goes out, as far as URLSession lets the
/// command know them.
enum RequestLog {
    /// The value that leaves a header out of the request. On Linux libcurl sends no header whose value is blank,
    /// and adds none of its own of that name (`Accept`, `Accept-Encoding`, `Expect`); Apple's URLSession has no such
    /// value, and there a header is only not set.
    #if canImport(Darwin)
        static let omitted: String? = nil
    #else
        static let omitted: String? = " "
    #endif

    /// Headers URLSession adds that curl does not send: URLSession's `Accept-Language`, libcurl's
    /// `Accept-Encoding`, which asks for compressed answers, and the `Connection: keep-alive` it adds, which
    /// HTTP/1.1 means anyway.
    static let leftOut = ["Accept-Language", "Accept-Encoding", "Connection"]

    /// Prints `request` with `form`'s body headers, as curl's `-v` does: `> ` lines, `*` for what cannot be known.
    /// Under `-C -` (`resumable`) only the headers every request of the protocol carries: the requests themselves
    /// are said as they go.
    static func print(_ request: URLRequest, form: MultipartFormData, resumable: Bool = false) {
        for line in lines(request, form: form, resumable: resumable) { Command.printError(line) }
    }

    /// The lines of ``print(_:form:resumable:)``.
    static func lines(_ request: URLRequest, form: MultipartFormData, resumable: Bool = false) -> [String] {
        guard let url = request.url else { return [] }
        var path = url.path.isEmpty ? "/" : url.path
        if let query = url.query { path += "?" + query }
        let secure = url.scheme?.lowercased() == "https"
        var lines =
            resumable
            ? ["* -C -: each request of the protocol, below, carries these headers"]
            : ["> \(request.httpMethod ?? "POST") \(path) HTTP/1.1"]
        if let host = url.host {
            lines.append("> Host: \(host)\(url.port.map { ":\($0)" } ?? "")")
        }
        let sent = (request.allHTTPHeaderFields ?? [:]).filter { $0.value != omitted }
        // curl's order: its own headers first, then the caller's, then the body's.
        let first = ["Authorization", "User-Agent", "Accept"]
        for name in first {
            if let value = sent[name] { lines.append("> \(name): \(Redaction.header(name, value: value))") }
        }
        for (name, value) in sent.sorted(by: { $0.key < $1.key }) where !first.contains(name) {
            lines.append("> \(name):\(value.isEmpty ? "" : " " + Redaction.header(name, value: value))")
        }
        guard !resumable else {
            lines.append(
                "* the form: \(form.contentType), "
                    + (form.contentLength.map { "\($0) bytes" } ?? "its length unknown until standard input ends"))
            return lines
        }
        if let length = form.contentLength {
            lines.append("> Content-Length: \(length)")
        } else {
            lines.append("* the body's length is unknown until standard input ends")
        }
        lines.append("> Content-Type: \(form.contentType)")
        if secure {
            lines.append("* over https, URLSession does not say whether HTTP/1.1 or HTTP/2 went out")
        }
        return lines
    }
}
