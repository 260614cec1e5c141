import Foundation
import MultipartForm
import MultipartStreamTestSupport
import Testing

/// `contentLength` equals the bytes produced, whatever the form and however it is read.
@Suite struct ContentLengthTests {
    @Test func randomFormsProduceExactlyTheirContentLength() throws {
        let seed = UInt64.random(in: .min ... .max)
        var generator = SeededGenerator(seed: seed)
        let directory = try TemporaryDirectory()
        for round in 0..<200 {
            let random = try RandomForm(using: &generator, in: directory)
            let readSize = Int.random(in: 1...9_000, using: &generator)
            let streamed = random.form.makeBodyStream().drain(readSize: readSize)
            #expect(streamed.error == nil, "seed \(seed) round \(round)")
            #expect(UInt64(streamed.bytes.count) == random.form.contentLength, "seed \(seed) round \(round)")
            let expectedBodies = random.expected.reduce(0) { $0 + $1.body.count }
            #expect(streamed.bytes.count > expectedBodies, "seed \(seed) round \(round)")
        }
    }

    /// One form of every kind of part, read with every buffer size from 1 to 70,000 bytes (URLSession asks for
    /// 65,536): the same bytes each time, and `hasBytesAvailable` false from the read that ends the body.
    @Test func everyReadSizeFromOneTo70000GivesTheSameBytes() throws {
        let directory = try TemporaryDirectory()
        var generator = SeededGenerator(seed: 70_000)
        var form = MultipartFormData()
        let fileBody = Data([UInt8].random(count: 30_000, using: &generator))
        let streamBody = Data([UInt8].random(count: 20_000, using: &generator))
        form.append("a short field", name: "text")
        try form.append(fileURL: directory.file("file.bin", contents: fileBody), name: "file")
        form.append(Data([UInt8].random(count: 25_000, using: &generator)), name: "data", fileName: "d.bin")
        form.append(length: UInt64(streamBody.count), name: "stream") { InputStream(data: streamBody) }
        form.append("", name: "empty")
        let expected = try form.encode()
        #expect(UInt64(expected.count) == form.contentLength!)
        #expect(expected.count > 70_000)

        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 70_000, alignment: 1)
        defer { buffer.deallocate() }
        var mismatches: [Int] = []
        expected.withUnsafeBytes { expectedBytes in
            for readSize in 1...70_000 {
                let stream = form.makeBodyStream()
                stream.open()
                var offset = 0
                let pointer = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
                while true {
                    let count = stream.read(pointer, maxLength: readSize)
                    guard count > 0, offset + count <= expectedBytes.count,
                        memcmp(pointer, expectedBytes.baseAddress! + offset, count) == 0
                    else {
                        if count != 0 || offset != expectedBytes.count || stream.hasBytesAvailable {
                            mismatches.append(readSize)
                        }
                        break
                    }
                    offset += count
                    // Every read is full until the end; the one that ends the body clears hasBytesAvailable.
                    if offset < expectedBytes.count, count != readSize || !stream.hasBytesAvailable {
                        mismatches.append(readSize)
                        break
                    }
                }
            }
        }
        #expect(mismatches.isEmpty, "read sizes that produced other bytes: \(mismatches.prefix(20))")
    }

    @Test func contentLengthCountsUTF8BytesNotCharacters() throws {
        var form = try MultipartFormData(boundary: "B0undary")
        form.append("😀é", name: "名前")
        #expect(form.contentLength! == UInt64(try form.encode().count))
    }

    @Test func theLengthOfAnEmptyForm() throws {
        let form = try MultipartFormData(boundary: "XyZ")
        #expect(form.contentLength! == UInt64("--XyZ--\r\n".utf8.count))
        #expect(form.count == 0)
    }
}
