import Foundation
import MultipartStreamTestSupport
import Testing

/// `--max-time` at random moments around a small upload's end: the command stops its upload with the same cancel as
/// the library's (Linux URLSession traps when its own `cancel()` meets the task's end), and must end as documented,
/// 0 with the answer or 4 for the time out, never by a trap.
extension CommandLineTests {
    @Test func maxTimeAroundTheUploadsEndNeverTraps() async throws {
        try await maxTimeStorm(runs: 30, seed: 28)
    }

    @Test(.longRun) func maxTimeAroundTheUploadsEndNeverTrapsInHundredsOfRuns() async throws {
        try await maxTimeStorm(runs: 300, seed: 2828)
    }

    private func maxTimeStorm(runs: Int, seed: UInt64) async throws {
        let server = try await UploadServer()
        _ = try directory.file("f.bin", contents: Data(count: 200))
        // How long the upload takes, by the command's own count: the longest of three, so that the limits reach
        // past its end.
        var natural = 0.0
        for _ in 0..<3 {
            let result = try await run([
                "-sS", "-F", "file=@f.bin", "-o", "/dev/null", "-w", "%{time_total}", server.url("/").absoluteString,
            ])
            natural = max(natural, Double(String(decoding: result.stdout, as: UTF8.self)) ?? 0)
        }
        var generator = SeededGenerator(seed: seed)
        var (whole, timedOut) = (0, 0)
        for index in 0..<runs {
            let limit = String(format: "%.4f", Double.random(in: 0.0002...(natural + 0.0002), using: &generator))
            let result = try await run([
                "-sS", "-F", "id=\(index)", "-F", "file=@f.bin", "--max-time", limit, server.url("/").absoluteString,
            ])
            #expect(!result.stderr.contains("Fatal error"), "run \(index), --max-time \(limit): \(result.stderr)")
            switch result.status {
            case 0:
                let seen = try server.seen(in: result.stdout)
                #expect(seen.parts?.count == 2 && seen.parts?.last?.body == Data(count: 200), "run \(index)")
                whole += 1
            case 4:
                #expect(result.stderr.contains("--max-time"), "run \(index): \(result.stderr)")
                timedOut += 1
            default:
                Issue.record("run \(index), --max-time \(limit): exit \(result.status), \(result.stderr)")
            }
        }
        print("--max-time storm: \(runs) runs, \(whole) whole, \(timedOut) timed out")
        #expect(whole > 0 && timedOut > 0, "the limits straddle the upload's end")
    }
}
