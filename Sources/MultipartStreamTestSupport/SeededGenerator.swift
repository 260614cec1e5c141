import Foundation

/// SplitMix64: a small, fast generator whose sequence is fixed by its seed, so a failing random test can be rerun.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose sequence is fixed by `seed`.
    public init(seed: UInt64) {
        state = seed
    }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension Array where Element == UInt8 {
    /// `count` random bytes from `generator`.
    public static func random(count: Int, using generator: inout SeededGenerator) -> [UInt8] {
        generator.bytes(count)
    }
}

extension SeededGenerator {
    /// `count` bytes, each the low byte of one draw, as `UInt8.random(in:using:)` takes it: the same bytes, in a
    /// plain loop, where a `map` of `random(in:)` built unoptimized (as tests are) took 2.4 s for 12 MB, not 0.1 s.
    mutating func bytes(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            for index in 0..<count { buffer[index] = UInt8(truncatingIfNeeded: next()) }
            initialized = count
        }
    }
}

extension SeededGenerator {
    /// Writes `size` bytes of this generator's output to a new file at `url`, 1 MiB at a time: incompressible
    /// content that no file system can shortcut.
    public mutating func writeFile(at url: URL, size: UInt64) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path])
        }
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        var words = [UInt64](repeating: 0, count: 1 << 17)
        var remaining = size
        while remaining > 0 {
            for index in words.indices { words[index] = next() }
            let count = Int(min(remaining, UInt64(words.count * 8)))
            // write(_:), not write(contentsOf:), which needs macOS 10.15.4: the package's floor is 10.15.
            words.withUnsafeBytes { handle.write(Data($0[..<count])) }
            remaining -= UInt64(count)
        }
    }
}
