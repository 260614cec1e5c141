import Foundation
import MultipartStream

/// One part of a form: what was sent, or what a parser saw.
struct FormPart: Codable, Equatable, CustomStringConvertible {
    var name: String
    var fileName: String? = nil
    var contentType: String? = nil
    var body: Data

    var description: String {
        "\(name.debugDescription) file=\(fileName?.debugDescription ?? "nil") type=\(contentType ?? "nil") "
            + "\(body.count) bytes"
    }
}

/// Multipart parsers of other projects, run as subprocesses on bodies written to files. A missing peer fails the
/// test that needs it: the interop checks must never pass by being skipped.
enum Peer: String, CaseIterable, CustomStringConvertible {
    /// Node's built-in `Response.formData()`, undici's parser, as a browser-compatible server would parse.
    case node
    /// Werkzeug's multipart decoder, the parser behind Flask.
    case werkzeug

    var description: String { rawValue }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private struct Result: Decodable {
        var parts: [FormPart]?
        var error: String?
    }

    /// Parses each `(body, contentType)` and returns, in order, the parts or the parser's error message.
    func parse(_ bodies: [(body: Data, contentType: String)]) throws -> [Swift.Result<[FormPart], Failure>] {
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
    func parse(_ body: Data, contentType: String) throws -> [FormPart] {
        try parse([(body, contentType)])[0].get()
    }

    private var script: URL {
        let peers = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Peers")
        switch self {
        case .node: return peers.appendingPathComponent("parse-formdata.mjs")
        case .werkzeug: return peers.appendingPathComponent("parse_werkzeug.py")
        }
    }

    private func run(arguments: [String], in directory: TemporaryDirectory) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [self == .node ? "node" : "python3"] + arguments
        let stdout = Pipe()
        let stderrURL = directory.path("stderr")
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        let stderr = try FileHandle(forWritingTo: stderrURL)
        defer { try? stderr.close() }
        process.standardOutput = stdout
        process.standardError = stderr
        do {
            try process.run()
        } catch {
            throw Failure(description: "cannot start \(self): \(error)")
        }
        // Read all of stdout before waiting, so a large output cannot block the child.
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let errorText = (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? ""
            throw Failure(description: "\(self) exited \(process.terminationStatus): \(errorText)")
        }
        return output
    }
}

extension FormPart {
    /// The part as `peer` reports it, when `self` is what was sent. Node follows browsers exactly: it reads a field
    /// (no filename) as text and keeps only a file's `Content-Type`. Werkzeug decodes `%22` but leaves `%0D` and
    /// `%0A` as they are.
    func seen(by peer: Peer) -> FormPart {
        switch peer {
        case .node:
            // A part without a filename is a field, whose value the Fetch standard decodes as UTF-8.
            guard let fileName else {
                return FormPart(name: name, body: Data(String(decoding: body, as: UTF8.self).utf8))
            }
            return FormPart(name: name, fileName: fileName, contentType: contentType ?? "", body: body)
        case .werkzeug:
            func werkzeug(_ text: String) -> String {
                text.replacingOccurrences(of: "\r", with: "%0D").replacingOccurrences(of: "\n", with: "%0A")
            }
            return FormPart(
                name: werkzeug(name), fileName: fileName.map(werkzeug), contentType: contentType, body: body)
        }
    }
}
