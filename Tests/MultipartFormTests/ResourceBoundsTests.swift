import Foundation
import MultipartForm
import MultipartStreamTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Descriptors and memory stay bounded however many and however large the files are.
@Suite struct ResourceBoundsTests {
    @Test func tenThousandFilesHoldAtMostOneDescriptorAtATime() throws {
        let directory = try TemporaryDirectory()
        var form = MultipartFormData()
        var expectedBodies = 0
        for index in 0..<10_000 {
            let body = Data("file \(index)\n".utf8)
            expectedBodies += body.count
            try form.append(fileURL: directory.file("f\(index).txt", contents: body), name: "f\(index)")
        }
        #expect(OpenDescriptors.count(under: directory.url) == 0, "appending opens nothing that stays open")
        let stream = form.makeBodyStream()
        stream.open()
        var buffer = [UInt8](repeating: 0, count: 4_096)
        var total = 0
        var mostOpen = 0
        var reads = 0
        while true {
            // A read ends mid-file often enough (4,096 is not a multiple of any part's length) to catch a leak.
            let count = stream.read(&buffer, maxLength: buffer.count)
            #expect(count >= 0)
            if count <= 0 { break }
            total += count
            reads += 1
            mostOpen = max(mostOpen, OpenDescriptors.count(under: directory.url))
        }
        #expect(UInt64(total) == form.contentLength!)
        #expect(reads > 100)
        #expect(mostOpen <= 1)
        #expect(OpenDescriptors.count(under: directory.url) == 0, "the last file is closed at the end")
    }

    @Test func aReleasedHalfReadStreamClosesItsFile() throws {
        let directory = try TemporaryDirectory()
        var form = MultipartFormData()
        try form.append(fileURL: directory.file("big.bin", contents: Data(count: 1 << 20)), name: "big")
        do {
            let stream = form.makeBodyStream()
            stream.open()
            var buffer = [UInt8](repeating: 0, count: 4_096)
            #expect(stream.read(&buffer, maxLength: 4_096) == 4_096)
            #expect(OpenDescriptors.count(under: directory.url) == 1)
        }
        #expect(OpenDescriptors.count(under: directory.url) == 0)
    }

    @Test func closingAHalfReadStreamClosesItsFile() throws {
        let directory = try TemporaryDirectory()
        var form = MultipartFormData()
        try form.append(fileURL: directory.file("big.bin", contents: Data(count: 1 << 20)), name: "big")
        let stream = form.makeBodyStream()
        stream.open()
        var buffer = [UInt8](repeating: 0, count: 4_096)
        #expect(stream.read(&buffer, maxLength: 4_096) == 4_096)
        stream.close()
        #expect(OpenDescriptors.count(under: directory.url) == 0)
    }

    /// A body dropped mid-file, as chunks or as a stream, closes the file at once, a thousand times over. Among the
    /// form's tests, beside the others: inside the serialized URLSession suites its 2,000 awaits waited for the
    /// concurrency pool behind the command's tests, and it added half a minute to the suite.
    @Test func aBodyDroppedInTheMiddleOfAFileClosesItAtOnce() async throws {
        let directory = try TemporaryDirectory()
        var form = MultipartFormData()
        form.append("x", name: "a")
        try form.append(fileURL: directory.file("f.bin", contents: Data(count: 1 << 20)), name: "f")
        for round in 0..<1_000 {
            do {
                var chunks = form.bodyChunks(maximumSize: 4_096).makeAsyncIterator()
                _ = try await chunks.next()
                _ = try await chunks.next()
                #expect(OpenDescriptors.count(under: directory.url) == 1, "round \(round): in the file")
            }
            do {
                let stream = form.makeBodyStream()
                stream.open()
                var buffer = [UInt8](repeating: 0, count: 8_192)
                #expect(stream.read(&buffer, maxLength: buffer.count) == buffer.count)
                #expect(OpenDescriptors.count(under: directory.url) == 1, "round \(round): in the file")
            }
            #expect(OpenDescriptors.count(under: directory.url) == 0, "round \(round): dropped, not closed")
        }
    }

    /// A 5 GiB sparse file streams with lengths beyond 32 bits, and resident memory does not grow with it.
    /// Linux only: it reads the resident set from /proc, the whole process's: it runs alone (`measuredAlone`), not
    /// beside the other long runs.
    @Test(.enabled(if: isLinux), .longRun, .tags(.measuredAlone)) func aFiveGiBFileStreamsInFlatMemory() throws {
        let directory = try TemporaryDirectory()
        let fileURL = directory.path("sparse.bin")
        let length: Int64 = 5 << 30
        let descriptor = open(fileURL.path, O_CREAT | O_WRONLY, 0o600)
        #expect(descriptor >= 0)
        #expect(ftruncate(descriptor, off_t(length)) == 0)
        // Markers at the start, across the 4 GiB line and at the end, to prove every byte is where it belongs.
        let markers: [(offset: Int64, byte: UInt8)] = [
            (0, 0xA1), ((1 << 32) - 1, 0xB2), (1 << 32, 0xC3), (length - 1, 0xD4),
        ]
        for marker in markers {
            var byte = marker.byte
            #expect(pwrite(descriptor, &byte, 1, off_t(marker.offset)) == 1)
        }
        close(descriptor)

        var form = MultipartFormData()
        form.append("before", name: "a")
        try form.append(fileURL: fileURL, name: "huge")
        form.append("after", name: "z")
        #expect(form.contentLength! > UInt64(length))

        let residentBefore = ProcessDescriptors.residentBytes()
        let stream = form.makeBodyStream()
        stream.open()
        let bufferSize = 1 << 20
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: bufferSize)
        defer { buffer.deallocate() }
        var total: UInt64 = 0
        var bodyStart: UInt64?
        var found: [UInt8] = []
        var peakResident = residentBefore
        var reads = 0
        while true {
            let count = stream.read(buffer, maxLength: bufferSize)
            #expect(count >= 0)
            if count <= 0 { break }
            if bodyStart == nil,
                let range = Data(bytesNoCopy: buffer, count: count, deallocator: .none)
                    .range(of: Data("filename=\"sparse.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n".utf8))
            {
                bodyStart = total + UInt64(range.upperBound)
            }
            if let bodyStart {
                for marker in markers {
                    let position = bodyStart + UInt64(marker.offset)
                    if position >= total, position < total + UInt64(count) {
                        found.append(buffer[Int(position - total)])
                    }
                }
            }
            total += UInt64(count)
            reads += 1
            if reads % 256 == 0 { peakResident = max(peakResident, ProcessDescriptors.residentBytes()) }
        }
        #expect(total == form.contentLength!)
        #expect(found == markers.map(\.byte))
        // What it rules out is memory growing with the file (5 GiB); the benchmarks measure the flat line precisely.
        let growth = peakResident - residentBefore
        #expect(growth < 256 << 20, "resident memory grew by \(growth) bytes while streaming 5 GiB")
    }
}
