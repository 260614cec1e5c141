import Foundation
import MultipartForm
import MultipartStreamTestSupport
import Testing

/// `MultipartBodyStream`'s status, `hasBytesAvailable`, `read` results and progress, as URLSession relies on them.
@Suite struct BodyStreamStateTests {
    private func smallForm() throws -> MultipartFormData {
        var form = try MultipartFormData(boundary: "B0undary")
        form.append("value", name: "field")
        return form
    }

    private func read(_ stream: InputStream, _ maxLength: Int) -> (count: Int, bytes: [UInt8]) {
        var buffer = [UInt8](repeating: 0, count: max(maxLength, 1))
        let count = buffer.withUnsafeMutableBufferPointer { stream.read($0.baseAddress!, maxLength: maxLength) }
        return (count, Array(buffer.prefix(max(count, 0))))
    }

    @Test func aNewStreamIsNotOpenAndHasBytes() throws {
        let stream = try smallForm().makeBodyStream()
        #expect(stream.streamStatus == .notOpen)
        #expect(stream.hasBytesAvailable)
        #expect(stream.streamError == nil)
        #expect(stream.bytesRead == 0)
    }

    @Test func openThenReadToTheEnd() throws {
        let form = try smallForm()
        let stream = form.makeBodyStream()
        stream.open()
        #expect(stream.streamStatus == .open)
        let length = Int(form.contentLength!)
        let first = read(stream, length - 1)
        #expect(first.count == length - 1)
        #expect(stream.streamStatus == .open)
        #expect(stream.hasBytesAvailable)
        // The read that returns the last byte leaves the stream at its end, not the read after it.
        let last = read(stream, 100)
        #expect(last.count == 1)
        #expect(stream.streamStatus == .atEnd)
        #expect(!stream.hasBytesAvailable)
        #expect(read(stream, 100).count == 0)
        #expect(stream.streamStatus == .atEnd)
        #expect(Data(first.bytes + last.bytes) == (try form.encode()))
        stream.close()
        #expect(stream.streamStatus == .closed)
        #expect(!stream.hasBytesAvailable)
        #expect(stream.streamError == nil)
    }

    @Test func aReadExactlyAsLongAsTheBodyEndsIt() throws {
        let form = try smallForm()
        let stream = form.makeBodyStream()
        stream.open()
        #expect(read(stream, Int(form.contentLength!)).count == Int(form.contentLength!))
        #expect(stream.streamStatus == .atEnd)
        #expect(!stream.hasBytesAvailable)
    }

    @Test(arguments: [1, 2, 3, 65_536, 1 << 20])
    func readFillsTheBufferAcrossPartsAndReturnsZeroOnlyAtTheEnd(readSize: Int) throws {
        var form = try MultipartFormData(boundary: "B0undary")
        for index in 0..<50 { form.append(String(repeating: "v", count: index), name: "f\(index)") }
        let stream = form.makeBodyStream()
        stream.open()
        var total = 0
        while true {
            let count = read(stream, readSize).count
            #expect(count >= 0)
            if count == 0 { break }
            total += count
            // Every read but the last is full.
            if total < Int(form.contentLength!) { #expect(count == readSize) }
        }
        #expect(total == Int(form.contentLength!))
        #expect(stream.bytesRead == form.contentLength!)
    }

    @Test func maxLengthZeroReturnsZeroAndChangesNothing() throws {
        let stream = try smallForm().makeBodyStream()
        stream.open()
        #expect(read(stream, 0).count == 0)
        #expect(stream.streamStatus == .open)
        #expect(stream.hasBytesAvailable)
    }

    @Test func readingBeforeOpenFails() throws {
        let stream = try smallForm().makeBodyStream()
        #expect(read(stream, 10).count == -1)
        #expect(stream.streamStatus == .error)
        #expect(stream.hasBytesAvailable, "a failed stream must make URLSession read its -1, not end the body")
        let error = try #require(stream.streamError as? MultipartError)
        guard case .streamNotOpen = error.reason else {
            Issue.record("\(error)")
            return
        }
    }

    @Test func readingAfterAnEarlyCloseFails() throws {
        let stream = try smallForm().makeBodyStream()
        stream.open()
        #expect(read(stream, 3).count == 3)
        stream.close()
        #expect(stream.streamStatus == .closed)
        #expect(stream.hasBytesAvailable, "a body closed before its end is not complete")
        #expect(read(stream, 10).count == -1)
        #expect(stream.streamStatus == .error)
    }

    @Test func openingTwiceBeforeReadingChangesNothing() throws {
        let form = try smallForm()
        let stream = form.makeBodyStream()
        stream.open()
        stream.open()
        #expect(stream.streamStatus == .open)
        #expect(stream.drain().bytes == (try form.encode()))
    }

    @Test func closingTwiceIsHarmless() throws {
        let stream = try smallForm().makeBodyStream()
        stream.open()
        _ = stream.drain()
        stream.close()
        stream.close()
        #expect(stream.streamStatus == .closed)
    }

    @Test func bytesReadCountsWhatWasHandedOut() throws {
        let form = try smallForm()
        let stream = form.makeBodyStream()
        stream.open()
        _ = read(stream, 10)
        #expect(stream.bytesRead == 10)
        _ = read(stream, 1000)
        #expect(stream.bytesRead == form.contentLength!)
        #expect(stream.contentLength! == form.contentLength!)
    }

    @Test func getBufferIsUnsupportedAndThereAreNoProperties() throws {
        let stream = try smallForm().makeBodyStream()
        var pointer: UnsafeMutablePointer<UInt8>?
        var length = 0
        #expect(!stream.getBuffer(&pointer, length: &length))
        #expect(stream.property(forKey: .fileCurrentOffsetKey) == nil)
    }

    @Test(arguments: [(0, -1.0), (-7, Double.nan), (Int.min, -Double.infinity)])
    func pacingWithOutOfRangeValuesReadsOneByteAtATimeWithoutPausing(packetSize: Int, delay: Double) throws {
        var form = try MultipartFormData(boundary: "b")
        form.append("xyz", name: "f")
        let pacing = MultipartPacing(packetSize: packetSize, delay: delay)
        #expect(pacing.packetSize == 1 && pacing.delay == 0)
        let stream = form.makeBodyStream(pacing: pacing)
        stream.open()
        defer { stream.close() }
        var body: [UInt8] = []
        while true {
            let (count, bytes) = read(stream, 65_536)
            if count <= 0 { break }
            #expect(count == 1)
            body += bytes
        }
        #expect(Data(body) == (try form.encode()))
    }

    @Test func pacingLimitsEachReadAndPausesAfterIt() throws {
        var form = try MultipartFormData(boundary: "B0undary")
        form.append(String(repeating: "x", count: 1_600), name: "f")
        let stream = form.makeBodyStream(pacing: MultipartPacing(packetSize: 16, delay: 0.01))
        stream.open()
        var reads = 0
        let stopwatch = Stopwatch()
        while true {
            let count = read(stream, 65_536).count
            if count == 0 { break }
            #expect(count <= 16)
            reads += 1
        }
        let elapsed = stopwatch.seconds
        #expect(reads == (Int(form.contentLength!) + 15) / 16)
        // A lower bound only: the pauses must have happened; a slow machine may take longer.
        // Reads start 10 ms apart: the first at once.
        #expect(elapsed >= 0.01 * Double(reads - 1))
        // Pacing belongs to the stream, not the form: another stream of the same form and encoding are not paced.
        let unpaced = Stopwatch()
        let other = form.makeBodyStream()
        other.open()
        #expect(read(other, 65_536).count == Int(form.contentLength!))
        #expect(try form.encode().count == Int(form.contentLength!))
        #expect(unpaced.seconds < 0.01 * Double(reads - 1))
    }

    @Test func aRateIsPacedAsCurlsLimitRate() {
        let pacing = MultipartPacing(bytesPerSecond: 500 << 10)
        #expect(pacing.packetSize == 51_200 && abs(pacing.delay - 0.1) < 1e-9)
        #expect(MultipartPacing(bytesPerSecond: 100 << 20).packetSize == 64 << 10, "at most 64 KiB a read")
        #expect(MultipartPacing(bytesPerSecond: 0).packetSize == 1, "at least a byte")
        #expect(MultipartPacing(packetSize: 10, delay: 1_000).delay == 60, "a pause of a minute at most")
    }
}
