import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The body's headers, as every request of every way to send sets them.
extension URLRequest {
    /// Sets `Content-Length` to `length` for a body that URLSession reads from a stream or a file.
    mutating func setBodyLength(_ length: UInt64) {
        updateValue(String(length), forHTTPHeaderField: "Content-Length")
        #if !canImport(Darwin)
            // libcurl frames a stream of unknown size as chunked unless the request names another Transfer-Encoding.
            // A blank value names one, so chunked framing is off, and libcurl leaves a header whose value is blank
            // out of the request: the body goes out raw behind our Content-Length (swift-corelibs-foundation #4818
            // would otherwise send both headers, which strict servers reject).
            updateValue(" ", forHTTPHeaderField: "Transfer-Encoding")
            // libcurl adds `Expect: 100-continue` and then waits a second for servers that never answer it; a blank
            // value leaves it out (an empty one would send `Expect:`, which Node answers with 417).
            if value(forHTTPHeaderField: "Expect") == nil {
                setValue(" ", forHTTPHeaderField: "Expect")
            }
        #endif
    }

    /// Makes `bytes` the body, with its exact `Content-Length` (not a stale one of the caller's) and no framing.
    mutating func setBody(_ bytes: Data) {
        httpBody = bytes
        updateValue(String(bytes.count), forHTTPHeaderField: "Content-Length")
        updateValue(nil, forHTTPHeaderField: "Transfer-Encoding")
    }

    /// `setValue(_:forHTTPHeaderField:)` unless the header already has that value: on Linux each write copies the
    /// request and normalises its headers, a measurable part of what a small upload costs.
    mutating func updateValue(_ value: String?, forHTTPHeaderField name: String) {
        if self.value(forHTTPHeaderField: name) != value { setValue(value, forHTTPHeaderField: name) }
    }

    /// Removes what described the body, for a redirect that turned the request into a GET without one.
    mutating func removeBodyHeaders() {
        for name in ["Content-Length", "Content-Type", "Transfer-Encoding", "Expect"] {
            setValue(nil, forHTTPHeaderField: name)
        }
    }
}
