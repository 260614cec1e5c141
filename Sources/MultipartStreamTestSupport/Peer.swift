import Foundation
import MultipartStream

/// Multipart parsers of other projects, run as subprocesses on bodies written to files. A missing peer fails the
/// test that needs it: the interop checks must never pass by being skipped.
public enum Peer: String, CaseIterable, Sendable, CustomStringConvertible {
    /// Node's built-in `Response.formData()`, undici's parser, as a browser-compatible server would parse.
    case node
    /// Werkzeug's multipart decoder, the parser behind Flask.
    case werkzeug

    /// The peer's name.
    public var description: String { rawValue }

    /// A peer that could not run, or rejected a body.
    public struct Failure: Error, CustomStringConvertible {
        /// What went wrong, in the peer's words where it gave any.
        public var description: String

        /// Creates a failure.
        public init(description: String) {
            self.description = description
        }
    }

    private struct Result: Decodable {
        var parts: [FormPart]?
        var error: String?
    }

    /// Parses each `(body, contentType)` and returns, in order, the parts or the parser's error message.
    public func parse(_ bodies: [(body: Data, contentType: String)]) throws -> [Swift.Result<[FormPart], Failure>] {
        let directory = try TemporaryDirectory()
        var manifest: [[String: String]] = []
        for (index, entry) in bodies.enumerated() {
            let file = try directory.file("body-\(index)", contents: entry.body)
            manifest.append(["path": file.path, "contentType": entry.contentType])
        }
        let manifestURL = try directory.file("manifest.json", contents: JSONEncoder().encode(manifest))
        let output = try run(arguments: [script.path, manifestURL.path], in: directory)
        let results = try JSONDecoder().decode([Result].self, from: output)
        guard results.count == bodies.count else {
            throw Failure(description: "\(self) returned \(results.count) results for \(bodies.count) bodies")
        }
        return results.map { result in
            if let parts = result.parts { return .success(parts) }
            return .failure(Failure(description: "\(self): \(result.error ?? "no parts and no error")"))
        }
    }

    /// Parses one body; throws if the parser rejects it.
    public func parse(_ body: Data, contentType: String) throws -> [FormPart] {
        try parse([(body, contentType)])[0].get()
    }

    private var script: URL {
        switch self {
        case .node: return peerScript("parse-formdata.mjs")
        case .werkzeug: return peerScript("parse_werkzeug.py")
        }
    }

    private func run(arguments: [String], in directory: TemporaryDirectory) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [self == .node ? "node" : PythonInterpreter.path] + arguments
        let stderrURL = directory.path("stderr")
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        let stderr = try FileHandle(forWritingTo: stderrURL)
        defer { try? stderr.close() }
        process.standardError = stderr
        let output: Data
        do {
            output = try process.outputAlone()
        } catch {
            throw Failure(description: "cannot start \(self): \(error)")
        }
        guard process.terminationStatus == 0 else {
            let errorText = (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? ""
            throw Failure(description: "\(self) exited \(process.terminationStatus): \(errorText)")
        }
        return output
    }
}

/// A script in the repository's `Peers/` folder, found from this source file: the support library runs from a
/// checkout (tests, benchmarks), never from an installed copy. The nearest folder above it that has `Peers/`: the
/// Benchmarks package builds these sources through a link one level deeper.
public func peerScript(_ name: String) -> URL {
    var folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    while folder.path != "/",
        !FileManager.default.fileExists(atPath: folder.appendingPathComponent("Peers").path)
    {
        folder.deleteLastPathComponent()
    }
    return folder.appendingPathComponent("Peers").appendingPathComponent(name)
}
