import Foundation
import Testing

/// The library's folders are layers, and code only reaches down: the public vocabulary (strategies, policies, what
/// an upload is told) depends on nothing of the machinery, and the machinery on nothing of the entry points (the
/// queue, above them all, is the module MultipartQueue). The compiler does not keep this inside one module (SwiftNIO keeps it with modules), so this
/// test reads the sources: a type, or a method of an extension of a Foundation type, used in a folder below the one
/// that declares it fails here, and so does a folder that is in no layer.
@Suite struct LayeringTests {
    /// Bottom to top: each folder may use what the folders before it declare.
    static let layers = [
        ".",  // the module's basics: exports, locks, the origin rule, the body's headers
        "Upload/Vocabulary",  // the public types a caller configures an upload with
        "Upload/Policies",  // redirects, challenges, what a failure means for a retry
        "SavedState",
        "Upload/Sessions",  // the private URLSessions and their delegate
        "Upload/Request",  // one request: its machine, its body, its outcome
        "Upload/Resumable",  // the draft's protocol, over requests
        "Upload/API",  // the entry points: URLSession's and URLRequest's methods, the streamed delegate
    ]

    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Sources/MultipartStream").standardizedFileURL

    /// Each Swift file of the module, by its folder relative to the module's.
    static func files() throws -> [(folder: String, url: URL)] {
        let enumerator = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        var files: [(String, URL)] = []
        for case let url as URL in enumerator where url.pathExtension == "swift" {
            let relative = url.deletingLastPathComponent().standardizedFileURL.path
                .dropFirst(sources.path.count).drop { $0 == "/" }
            files.append((relative.isEmpty ? "." : String(relative), url))
        }
        return files
    }

    /// The source without comments and string literals, which may name anything.
    static func code(of url: URL) throws -> String {
        let lines = try String(contentsOf: url, encoding: .utf8).split(
            separator: "\n", omittingEmptySubsequences: false)
        let code = lines.map { line -> Substring in
            line.firstRange(of: "//").map { line[..<$0.lowerBound] } ?? line
        }.joined(separator: "\n")
        return code.replacing(#/"(?:[^"\\\n]|\\.)*"/#, with: "\"\"")
    }

    /// What `files` (a folder, a file name, its code) do that breaks the layers: a folder in no layer, or a use of
    /// what a higher layer declares (its top-level types, and the methods it adds to Foundation's types).
    static func breaches(in files: [(folder: String, file: String, code: String)]) throws -> [String] {
        let rank = Dictionary(uniqueKeysWithValues: layers.enumerated().map { ($1, $0) })
        var breaches = Set(files.map(\.folder)).filter { rank[$0] == nil }.sorted()
            .map { "\($0) is in no layer: place it in LayeringTests.layers" }
        var declared: [(name: String, folder: String, isMethod: Bool)] = []
        let type =
            #/^(?:(?:public|internal|package|final)\s+)*(?:struct|enum|class|actor|protocol|typealias)\s+([A-Z]\w*)/#
        let method = #/^    (?:public |static |mutating )*func (\w+)/#
        for (folder, _, code) in files {
            var inFoundationExtension = false
            for line in code.split(separator: "\n") {
                if let match = line.firstMatch(of: type) { declared.append((String(match.1), folder, false)) }
                if line.hasPrefix("extension ") {
                    inFoundationExtension = ["URLSession", "URLRequest", "URLSessionTask", "Data", "URL"]
                        .contains(String(line.dropFirst("extension ".count).prefix { $0.isLetter }))
                } else if line.hasPrefix("}") {
                    inFoundationExtension = false
                } else if inFoundationExtension, let match = line.firstMatch(of: method) {
                    declared.append((String(match.1), folder, true))
                }
            }
        }
        for (folder, file, code) in files {
            guard let own = rank[folder] else { continue }
            for (name, owner, isMethod) in declared where (rank[owner] ?? 0) > own {
                if code.contains(try Regex(isMethod ? "\\.\(name)\\(" : "\\b\(name)\\b")) {
                    breaches.append("\(folder)/\(file) uses \(name), which \(owner) declares: a layer above it")
                }
            }
        }
        return breaches
    }

    @Test func everyFolderIsALayerAndReachesOnlyDown() throws {
        let files = try Self.files().map { ($0.folder, $0.url.lastPathComponent, try Self.code(of: $0.url)) }
        #expect(files.count > 50, "the sources were not found at \(Self.sources.path)")
        #expect(try Self.breaches(in: files) == [])
    }

    /// The check finds what it is for: a type of a higher layer, a method a higher layer adds to URLSession, a
    /// folder in no layer; and not a use downward, nor a name inside another.
    @Test func aReachUpIsFound() throws {
        let files = [
            ("Upload/Resumable", "ResumableUpload.swift", "struct ResumableUpload {\n    func run() {}\n}"),
            ("Upload/API", "URLSession+Upload.swift", "extension URLSession {\n    public func upload(_ x: Int) {}\n}"),
            ("Upload/Vocabulary", "Strategy.swift", "enum Strategy { case resumable(ResumableUpload) }"),
            ("Upload/Request", "WholeForm.swift", "struct WholeForm { func run() { session.upload(1) } }"),
            ("Upload/Request", "Other.swift", "struct Other { let u: ResumableUploads; func f() { upload(1) } }"),
            ("Upload/API", "Entry.swift", "struct Entry { let r: ResumableUpload; func f() { session.upload(1) } }"),
            ("Elsewhere", "Stray.swift", "struct Stray {}"),
        ]
        #expect(
            try Self.breaches(in: files) == [
                "Elsewhere is in no layer: place it in LayeringTests.layers",
                "Upload/Vocabulary/Strategy.swift uses ResumableUpload, which Upload/Resumable declares: a layer above it",
                "Upload/Request/WholeForm.swift uses upload, which Upload/API declares: a layer above it",
            ])
    }
}
