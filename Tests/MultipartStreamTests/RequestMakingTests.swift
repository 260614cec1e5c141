import Foundation
import Testing

/// Every request the library sends is made in one place, ``RequestMaker``: a request built or changed anywhere else in
/// the module's sources, or the queue's (MultipartQueue), fails here, so that a rule (the origin rule, the draft's fields after the hook's, the form's
/// framing) cannot be skipped by a new path. The drivers and policies hand it values instead.
@Suite struct RequestMakingTests {
    /// Where a request may be built or changed outside ``RequestMaker``, and why: the caller's own request, before
    /// any upload makes one from it, and the helpers that frame a body, which the maker and the public API call.
    static let allowed: [String: String] = [
        "Upload/Request/RequestMaker.swift": "the one place",
        "URLRequest+Body.swift": "the body's header helpers the maker and the public request builder call",
        "Upload/API/URLRequest+Multipart.swift": "the public API that builds the caller's own request",
        "MultipartQueue/QueueRecord.swift":
            "a queued upload's request as the caller gave it, read back from its record",
        "MultipartQueue/MultipartUploadQueue+Job.swift":
            "the queue as the caller: its Idempotency-Key on its own request",
    ]

    /// The lines of `code` that build or change a `URLRequest`: a property of one assigned (with a receiver, or bare
    /// in an extension), a header set, added or removed, a body framed, or a request made from a URL.
    static func changes(in code: String) -> [String] {
        let property = "(httpMethod|httpBody|httpBodyStream|timeoutInterval|allHTTPHeaderFields|url|mainDocumentURL)"
        let patterns = [
            #"(\w+)\.\#(property)\s*=(?!=)"#, #"^\s*\#(property)\s*=(?!=)"#, #"\b(setValue|addValue|updateValue)\("#,
            #"\b(removeBodyHeaders|setBody|setBodyLength)\("#, #"URLRequest\(url"#,
        ].map { try! NSRegularExpression(pattern: $0, options: [.anchorsMatchLines]) }
        return code.split(separator: "\n").map(String.init).filter { line in
            let range = NSRange(line.startIndex..., in: line)
            return patterns.contains { pattern in
                pattern.matches(in: line, range: range).contains { match in
                    // A type's own stored property set in its initializer is not a request's.
                    match.numberOfRanges < 2 || match.range(at: 1).location == NSNotFound
                        || (line as NSString).substring(with: match.range(at: 1)) != "self"
                }
            }
        }
    }

    @Test func theCheckFindsEachWayToChangeARequest() {
        let code = """
            request.httpMethod = "PATCH"
            target.url = location
            httpBodyStream = stream
            request.setValue("1", forHTTPHeaderField: "Upload-Offset")
            request.removeBodyHeaders()
            var made = URLRequest(url: url)
            self.url = url
            if request.httpMethod == "GET" { }
            let method = request.httpMethod
            """
        #expect(
            Self.changes(in: code) == [
                #"request.httpMethod = "PATCH""#, "target.url = location", "httpBodyStream = stream",
                #"request.setValue("1", forHTTPHeaderField: "Upload-Offset")"#, "request.removeBodyHeaders()",
                "var made = URLRequest(url: url)",
            ])
    }

    @Test func noRequestIsMadeOutsideTheRequestMaker() throws {
        var outside: [String] = []
        var seenAllowed: Set<String> = []
        let queue = LayeringTests.sources.deletingLastPathComponent().appendingPathComponent("MultipartQueue")
        let queueFiles = try FileManager.default.contentsOfDirectory(at: queue, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "swift" }
        #expect(queueFiles.count > 5, "the queue's sources were not found at \(queue.path)")
        for (folder, url) in try LayeringTests.files() + queueFiles.map({ ("MultipartQueue", $0) }) {
            let file = folder == "." ? url.lastPathComponent : "\(folder)/\(url.lastPathComponent)"
            let changes = Self.changes(in: try LayeringTests.code(of: url))
            if Self.allowed[file] != nil {
                if !changes.isEmpty { seenAllowed.insert(file) }
                continue
            }
            outside += changes.map { "\(file): \($0.trimmingCharacters(in: .whitespaces))" }
        }
        #expect(outside.isEmpty, "made outside RequestMaker: \(outside)")
        // Each exception still changes a request: one that no longer does leaves the list.
        #expect(seenAllowed == Set(Self.allowed.keys), "\(Set(Self.allowed.keys).subtracting(seenAllowed))")
    }
}
