import Foundation
import MultipartStream

// What the README's and the DocC articles' code blocks leave to the reader, for Benchmarks/doc-snippets.py: the
// blocks are compiled, never run.

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
