import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// What the README's and the DocC articles' code blocks leave to the reader, for Benchmarks/doc-snippets.py: the
// blocks are compiled, never run.

/// The names every block is given, made here, where their modules are imported: a block that shows its own imports
/// is compiled with exactly those, and reads these through local copies that name no type.
enum DocContext {
    static var form: MultipartFormData { MultipartFormData() }
    static var uploadURL: URL { URL(string: "https://example.com/upload")! }
    static var request: URLRequest { URLRequest(url: uploadURL) }
    static var session: URLSession { .shared }
    /// `.background(withIdentifier:)` on Apple platforms.
    static var backgroundSession: URLSession { URLSession(configuration: .default) }
    static var scanURL: URL { URL(fileURLWithPath: "scan.pdf") }
    static var photoURL: URL { URL(fileURLWithPath: "photo.jpg") }
    static var videoURL: URL { URL(fileURLWithPath: "beach.mov") }
    static var logURL: URL { URL(fileURLWithPath: "app.log") }
    static var bodyURL: URL { URL(fileURLWithPath: "body.multipart") }
    static var downloadURL: URL { URL(fileURLWithPath: "answer.bin") }
    static var handle: FileHandle { .nullDevice }
    static var logLength: UInt64 { 0 }
    static var jsonData: Data { Data("{}".utf8) }
    static var sha: String { "0123abcd" }
    static var metadata: Metadata { Metadata() }
    static var tokens: Tokens { Tokens() }
    static var progressView: ProgressView { ProgressView() }
    static var error: MultipartError { someError() }
}

/// Any `Encodable` value, as `append(json:name:)` takes.
struct Metadata: Encodable {
    var title = "Summer 2026"
}

/// Where fresh credentials come from.
struct Tokens: Sendable {
    func current() async throws -> String { "token" }
    func refresh() async throws {}
}

/// A view on the main actor, as an app's progress bar is.
@MainActor final class ProgressView {
    var progress = 0.0

    nonisolated init() {}
}

/// An error a block branches on.
func someError() -> MultipartError {
    fatalError("the blocks are compiled, never run")
}
