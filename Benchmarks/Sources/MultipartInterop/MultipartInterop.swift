import Foundation
import MultipartStream
import MultipartStreamTestSupport

// Randomised round trips: forms with hostile names and near-delimiter bodies, streamed through
// MultipartBodyStream with random read sizes, then parsed by Node (undici), Werkzeug and vapor/multipart-kit.
// Every parser must see exactly what was sent. Usage: multipart-interop [--forms N] [--seed S]
@main
struct MultipartInterop {
    static func main() async throws {

        var formCount = 1_000
        var seed = UInt64.random(in: .min ... .max)
        var arguments = CommandLine.arguments.dropFirst()
        while let option = arguments.popFirst() {
            switch (option, arguments.popFirst().flatMap { UInt64($0) }) {
            case ("--forms", let value?): formCount = Int(value)
            case ("--seed", let value?): seed = value
            default:
                FileHandle.standardError.write(Data("usage: multipart-interop [--forms N] [--seed S]\n".utf8))
                exit(2)
            }
        }
        print("multipart-interop: \(formCount) forms, seed \(seed) (rerun with --seed \(seed))")

        var generator = SeededGenerator(seed: seed)
        let directory = try TemporaryDirectory()
        var forms: [RandomForm] = []
        var bodies: [(body: Data, contentType: String)] = []
        for index in 0..<formCount {
            // Werkzeug reads a backslash in a quoted name as an escape, unlike browsers: it gets the forms without one.
            let random = try RandomForm(
                using: &generator, in: directory, maxParts: 50, maxBodyLength: 1_000, backslashes: index % 2 == 1)
            let readSize = Int.random(in: 1...70_000, using: &generator)
            bodies.append((try random.form.streamedBody(readSize: readSize), random.form.contentType))
            forms.append(random)
        }

        var tally = Tally()

        for peer in Peer.allCases {
            let indices = forms.indices.filter { peer != .werkzeug || $0 % 2 == 0 }
            let results = try peer.parse(indices.map { bodies[$0] })
            for (index, result) in zip(indices, results) {
                switch result {
                case .success(let parts):
                    tally.record(
                        "\(peer)", form: index, Tally.compare(parts, forms[index].expected.map { $0.seen(by: peer) }))
                case .failure(let failure): tally.record("\(peer)", form: index, "\(failure)")
                }
            }
        }
        for (index, form) in forms.enumerated() {
            do {
                let parts = try MultipartKitParser.parse(bodies[index].body, boundary: form.form.boundary)
                tally.record(
                    "multipart-kit", form: index, Tally.compare(parts, form.expected.map(MultipartKitParser.seen)))
            } catch  where form.expected.isEmpty {
                // RFC 2046 asks for at least one part; multipart-kit holds to it and rejects the empty form that
                // browsers send (the close delimiter alone), which Node and Werkzeug read as no fields.
                tally.record("multipart-kit", form: index, nil)
            } catch {
                tally.record("multipart-kit", form: index, "\(error)")
            }
        }

        tally.report()
        // `exit` runs no deinit.
        directory.remove()
        exit(tally.failures.isEmpty ? 0 : 1)
    }
}

/// Passes and failures per peer.
struct Tally {
    var failures: [String] = []
    var totals: [String: (passed: Int, failed: Int)] = [:]

    mutating func record(_ peer: String, form index: Int, _ problem: String?) {
        var total = totals[peer, default: (0, 0)]
        if let problem {
            total.failed += 1
            failures.append("\(peer), form \(index): \(problem)")
        } else {
            total.passed += 1
        }
        totals[peer] = total
    }

    static func compare(_ parsed: [FormPart], _ expected: [FormPart]) -> String? {
        guard parsed != expected else { return nil }
        guard parsed.count == expected.count else { return "\(parsed.count) parts, sent \(expected.count)" }
        let (got, sent) = zip(parsed, expected).first { $0 != $1 }!
        return "parsed \(got), sent \(sent)"
    }

    func report() {
        for failure in failures.prefix(20) { print("FAIL \(failure)") }
        for (peer, total) in totals.sorted(by: { $0.key < $1.key }) {
            print("\(peer): \(total.passed) passed, \(total.failed) failed")
        }
        let passed = totals.values.reduce(0) { $0 + $1.passed }
        print("\(passed) passed, \(failures.count) failed")
    }
}
