import Foundation
import MultipartStreamTestSupport
import Testing

/// `--max-time` at random moments around a small upload's end: the command stops its upload with the same cancel as
/// the library's (Linux URLSession traps when its own `cancel()` meets the task's end), and must end as documented,
/// 0 with the answer or 4 for the time out, never by a trap.
extension CommandLineTests {
    @Test func maxTimeAroundTheUploadsEndNeverTraps() async throws {
        try await maxTimeStorm(runs: 12, seed: 28, straddles: false)
    }

    @Test(.longRun) func maxTimeAroundTheUploadsEndNeverTrapsInHundredsOfRuns() async throws {
        try await maxTimeStorm(runs: 150, seed: 2828, straddles: true)
    }

    /// `runs` runs with limits spread from 0.1 ms to past the whole run; with `straddles`, some ended whole and some
    /// timed out (a dozen runs may all fall on one side).
    private func maxTimeStorm(runs: Int, seed: UInt64, straddles: Bool) async throws {
        let server = try await UploadServer()
        _ = try directory.file("f.bin", contents: Data(count: 200))
        // How long a run takes, by the command's own count: the longest of three, so that the limits reach past the
        // upload's end.
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
            // Spread evenly over the orders of magnitude from 0.1 ms to the whole run: the part of the run the limit
            // counts (from the upload's start) is not known from outside.
            let exponent = Double.random(in: log10(0.0001)...log10(max(3 * natural, 0.001)), using: &generator)
            let limit = String(format: "%.5f", pow(10, exponent))
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
        if straddles { #expect(whole > 0 && timedOut > 0, "the limits straddle the upload's end") }
    }
}
