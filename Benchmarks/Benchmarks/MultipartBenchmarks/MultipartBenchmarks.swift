import Benchmark
import Foundation
import MultipartKit
import MultipartStream
import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

// Each library benchmark stands beside a baseline measured in the same run (`run.sh` prints the ratios): the
// physical limit (read(2), cp) or the peer (multipart-kit).

let readSize = 64 << 10
let timeAndMemory: [BenchmarkMetric] = [.wallClock, .throughput, .peakMemoryResident, .mallocCountTotal]
let bytesPerSecond = BenchmarkMetric.custom("MBps", polarity: .prefersLarger, useScalingFactor: false)
/// The drain's speed as a percentage of read(2)'s, both timed in the same iteration so that a slow moment of the
/// machine slows both: steadier than two separate benchmarks' percentiles.
let percentOfRawRead = BenchmarkMetric.custom("percentOfRawRead", polarity: .prefersLarger, useScalingFactor: false)

/// The small-field drain's speed as a percentage of copying the same segments with no reader, in the same iteration.
let percentOfSegmentCopy = BenchmarkMetric.custom(
    "percentOfSegmentCopy", polarity: .prefersLarger, useScalingFactor: false)

/// CI's smoke pass (`run.sh --smoke`) runs `smoke` iterations of each (three unless a gate needs more).
let isSmokeRun = ProcessInfo.processInfo.environment["MULTIPART_BENCHMARK_SMOKE"] != nil

/// Short runs: every iteration moves hundreds of megabytes.
func heavy(
    _ metrics: [BenchmarkMetric] = timeAndMemory,
    iterations: Int = 20,
    smoke: Int = 3
) -> Benchmark.Configuration {
    // Nanoseconds everywhere, so that ratios of exported samples never mix units.
    .init(
        metrics: metrics, timeUnits: .nanoseconds, warmupIterations: 1, maxDuration: .seconds(10),
        maxIterations: isSmokeRun ? min(iterations, smoke) : iterations)
}

/// Reads `stream` to its end with `readSize` reads into `buffer`; returns the bytes read.
@inline(never)
func drain(_ stream: MultipartBodyStream, into buffer: UnsafeMutablePointer<UInt8>) -> Int {
    stream.open()
    var total = 0
    while true {
        let count = stream.read(buffer, maxLength: readSize)
        precondition(count >= 0, "the stream failed: \(String(describing: stream.streamError))")
        if count == 0 { return total }
        total += count
    }
}

/// Reads the file with read(2) into the same buffer: what the disk and page cache allow.
@inline(never)
func rawRead(_ url: URL, into buffer: UnsafeMutablePointer<UInt8>) -> Int {
    let descriptor = open(url.path, O_RDONLY)
    precondition(descriptor >= 0)
    defer { close(descriptor) }
    var total = 0
    while true {
        let count = read(descriptor, buffer, readSize)
        precondition(count >= 0)
        if count == 0 { return total }
        total += count
    }
}

/// Copies `segments` one after another into `buffer`, starting over each time it fills, as a reader's caller would
/// see them; returns the bytes copied.
@inline(never)
func copySegments(_ segments: [[UInt8]], into buffer: UnsafeMutablePointer<UInt8>) -> Int {
    var filled = 0
    var total = 0
    for segment in segments {
        segment.withUnsafeBufferPointer { bytes in
            var offset = 0
            while offset < bytes.count {
                let count = min(bytes.count - offset, readSize - filled)
                (buffer + filled).update(from: bytes.baseAddress! + offset, count: count)
                filled += count
                offset += count
                if filled == readSize {
                    total += filled
                    filled = 0
                }
            }
        }
    }
    return total + filled
}

func megabytesPerSecond(_ bytes: Int, since start: ContinuousClock.Instant) -> Int {
    let elapsed = ContinuousClock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return Int(Double(bytes) / seconds / 1e6)
}

let benchmarks: @Sendable () -> Void = {
    let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: readSize)

    // 1. A 1 GiB file part against read(2) of the same file.
    Benchmark("drainFilePart1GiB", configuration: heavy(timeAndMemory + [bytesPerSecond, percentOfRawRead])) {
        benchmark in
        // read(2) before and after the drain, so that neither goes first on a warmer cache.
        func timedRawRead() -> Duration {
            let start = ContinuousClock.now
            blackHole(rawRead(Fixtures.file1GiB, into: buffer))
            return ContinuousClock.now - start
        }
        let rawBefore = timedRawRead()
        let stream = Fixtures.fileForm1GiB.makeBodyStream()
        benchmark.startMeasurement()
        let start = ContinuousClock.now
        blackHole(drain(stream, into: buffer))
        let drainTime = ContinuousClock.now - start
        benchmark.stopMeasurement()
        let rawTime = (rawBefore + timedRawRead()) / 2
        benchmark.measurement(bytesPerSecond, megabytesPerSecond(Int(stream.contentLength!), since: start))
        benchmark.measurement(percentOfRawRead, Int((rawTime / drainTime) * 100))
    }
    Benchmark("rawRead1GiB", configuration: heavy(timeAndMemory + [bytesPerSecond])) { benchmark in
        let url = Fixtures.file1GiB
        benchmark.startMeasurement()
        let start = ContinuousClock.now
        blackHole(rawRead(url, into: buffer))
        benchmark.measurement(bytesPerSecond, megabytesPerSecond(1 << 30, since: start))
    }

    // 2. 100,000 small text fields, against copying the same 300,001 segments into the same buffer with no reader:
    //    the ratio is the reader's per-part cost, whatever the machine's speed.
    Benchmark(
        "drainManySmallFields",
        configuration: heavy(timeAndMemory + [bytesPerSecond, percentOfSegmentCopy], iterations: 50, smoke: 15)
    ) { benchmark in
        func timedSegmentCopy() -> Duration {
            let start = ContinuousClock.now
            blackHole(copySegments(Fixtures.manySmallFieldSegments, into: buffer))
            return ContinuousClock.now - start
        }
        let copyBefore = timedSegmentCopy()
        let stream = Fixtures.manySmallFields.makeBodyStream()
        benchmark.startMeasurement()
        let start = ContinuousClock.now
        blackHole(drain(stream, into: buffer))
        let drainTime = ContinuousClock.now - start
        benchmark.stopMeasurement()
        let copyTime = (copyBefore + timedSegmentCopy()) / 2
        benchmark.measurement(bytesPerSecond, megabytesPerSecond(Int(stream.contentLength!), since: start))
        benchmark.measurement(percentOfSegmentCopy, Int((copyTime / drainTime) * 100))
    }

    // 3. 1,000 parts from memory, files and streams.
    Benchmark("drainMixed", configuration: heavy(timeAndMemory + [bytesPerSecond])) { benchmark in
        let stream = Fixtures.mixed.makeBodyStream()
        benchmark.startMeasurement()
        let start = ContinuousClock.now
        blackHole(drain(stream, into: buffer))
        benchmark.measurement(bytesPerSecond, megabytesPerSecond(Int(stream.contentLength!), since: start))
    }

    // 4. The same 100 MiB of parts encoded in memory, by encode() and by multipart-kit's serializer.
    Benchmark("encodeInMemory100MiB", configuration: heavy(iterations: 50)) { benchmark in
        let form = Fixtures.inMemoryForm
        benchmark.startMeasurement()
        blackHole(try! form.encode())
    }
    Benchmark("multipartKitSerialize100MiB", configuration: heavy(iterations: 50)) { benchmark in
        let parts = Fixtures.multipartKitParts
        let boundary = Fixtures.inMemoryForm.boundary
        benchmark.startMeasurement()
        var output = ByteBuffer()
        try! MultipartSerializer().serialize(parts: parts, boundary: boundary, into: &output)
        blackHole(output)
    }

    // 5. The 1 GiB form written to a file, against cp of the file (copy_file_range).
    let output = Fixtures.directory.appendingPathComponent("written.multipart")
    Benchmark("writeEncodedData1GiB", configuration: heavy()) { benchmark in
        let form = Fixtures.fileForm1GiB
        try? FileManager.default.removeItem(at: output)
        benchmark.startMeasurement()
        try! form.writeEncodedData(to: output)
        benchmark.stopMeasurement()
        try? FileManager.default.removeItem(at: output)
    }
    Benchmark("cp1GiB", configuration: heavy()) { benchmark in
        let source = Fixtures.file1GiB
        try? FileManager.default.removeItem(at: output)
        benchmark.startMeasurement()
        let cp = try! Process.run(URL(fileURLWithPath: "/bin/cp"), arguments: [source.path, output.path])
        cp.waitUntilExit()
        benchmark.stopMeasurement()
        precondition(cp.terminationStatus == 0)
        try? FileManager.default.removeItem(at: output)
    }

    // 6. Resident memory does not grow with the file: 4 GiB against 64 MiB, both sparse.
    for (name, size) in [("streamFlatMemory4GiB", 4 << 30), ("streamFlatMemory64MiB", 64 << 20)] {
        Benchmark(
            name, configuration: heavy([.wallClock, .peakMemoryResident, .peakMemoryResidentDelta], iterations: 3)
        ) {
            benchmark in
            var form = MultipartFormData()
            try! form.append(fileURL: Fixtures.sparseFile("sparse-\(size).bin", size: size), name: "file")
            let stream = form.makeBodyStream()
            benchmark.startMeasurement()
            blackHole(drain(stream, into: buffer))
        }
    }

    // 7. Starting at the last byte of a 4 GiB file part costs what starting at byte 0 does: the file is opened at
    // the offset, none of the bytes before it is read. Sparse, so that making it costs nothing.
    for (name, fromEnd) in [("firstReadAt0Of4GiB", false), ("firstReadAtLastByteOf4GiB", true)] {
        Benchmark(name, configuration: heavy([.wallClock], iterations: 200, smoke: 50)) { benchmark in
            var form = MultipartFormData()
            try! form.append(fileURL: Fixtures.sparseFile("sparse-\(4 << 30).bin", size: 4 << 30), name: "file")
            let closeDelimiter = UInt64("\r\n--\(form.boundary)--\r\n".utf8.count)
            let offset = fromEnd ? form.contentLength! - closeDelimiter - 1 : 0
            benchmark.startMeasurement()
            let stream = form.makeBodyStream(startingAt: offset)
            stream.open()
            blackHole(stream.read(buffer, maxLength: readSize))
            benchmark.stopMeasurement()
            stream.close()
        }
    }

    // 8. Allocations per 64 KiB read once the stream is going (target: none).
    Benchmark(
        "mallocsPerRead",
        configuration: .init(
            metrics: [.mallocCountTotal, .wallClock], timeUnits: .nanoseconds, warmupIterations: 1,
            scalingFactor: .kilo,
            maxDuration: .seconds(10), maxIterations: isSmokeRun ? 3 : 10)
    ) { benchmark in
        let stream = Fixtures.fileForm1GiB.makeBodyStream()
        stream.open()
        for _ in 0..<16 { precondition(stream.read(buffer, maxLength: readSize) == readSize) }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(stream.read(buffer, maxLength: readSize))
        }
        benchmark.stopMeasurement()
        stream.close()
    }
}
