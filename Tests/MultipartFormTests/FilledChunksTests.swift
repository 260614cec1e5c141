import Foundation
import MultipartForm
import MultipartStreamTestSupport
import Testing

/// `bodyChunks(makeChunk:)`: chunks that the caller allocates and the form fills in place, equal to `encode()`, and
/// failing rather than ending early whatever the maker does.
@Suite struct FilledChunksTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    /// A chunk as a client's buffer would be: `room` bytes of storage (any size), filled by one call to `fill`.
    private static func makeChunk(room: Int? = nil) -> MultipartFilledChunks<Data>.MakeChunk {
        { size, fill in
            var chunk = Data(count: room ?? size)
            let count = try chunk.withUnsafeMutableBytes { try fill($0) }
            chunk.count = count
            return chunk
        }
    }

    @Test func theDefaultChunkIsOneMebibyteOfAFile() async throws {
        let fileBody = Data((0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 11) })
        var form = MultipartFormData()
        form.append("caption", name: "title")
        try form.append(fileURL: try directory.file("big.bin", contents: fileBody), name: "file")
        let (collected, error) = await collectIteration(form.bodyChunks(makeChunk: Self.makeChunk()))
        #expect(error == nil)
        #expect(collected.map(\.count).dropLast().allSatisfy { $0 == 1 << 20 })
        #expect(collected.count == Int((form.contentLength! + (1 << 20) - 1) >> 20))
        let parts = try Peer.node.parse(collected.concatenated(), contentType: form.contentType)
        #expect(parts.map(\.name) == ["title", "file"])
        #expect(parts.last?.body == fileBody)
    }

    @Test(arguments: [1, 1_000, 70_000])
    func roomOtherThanTheSizeKeepsTheBytesExact(room: Int) async throws {
        var form = MultipartFormData()
        form.append(Data((0..<50_000).map { UInt8(truncatingIfNeeded: $0) }), name: "data")
        let (collected, error) = await collectIteration(
            form.bodyChunks(maximumSize: 4_096, makeChunk: Self.makeChunk(room: room)))
        #expect(error == nil)
        // More room than the size is filled only up to the size; less makes smaller chunks.
        #expect(collected.allSatisfy { $0.count == min(room, 4_096) || $0 == collected.last })
        #expect(collected.concatenated() == (try form.encode()))
    }

    @Test func fillCalledTwiceFillsOneChunkUpToItsSize() async throws {
        var form = MultipartFormData()
        form.append(Data(count: 10_000), name: "zeros")
        let chunks = form.bodyChunks(maximumSize: 1_000) { size, fill in
            var chunk = Data(count: size + 500)
            let first = try chunk.withUnsafeMutableBytes {
                try fill(UnsafeMutableRawBufferPointer(rebasing: $0[..<300]))
            }
            let second = try chunk.withUnsafeMutableBytes {
                try fill(UnsafeMutableRawBufferPointer(rebasing: $0[first...]))
            }
            chunk.count = first + second
            return chunk
        }
        let (collected, error) = await collectIteration(chunks)
        #expect(error == nil)
        #expect(collected.dropLast().allSatisfy { $0.count == 1_000 })
        #expect(collected.concatenated() == (try form.encode()))
    }

    @Test func aMakerThatNeverFillsFailsInsteadOfSpinning() async throws {
        var form = MultipartFormData()
        form.append("x", name: "n")
        let (collected, error) = await collectIteration(form.bodyChunks { size, _ in Data(count: size) })
        #expect(collected.isEmpty)
        guard case .chunkNotFilled(let size) = (error as? MultipartError)?.reason else {
            Issue.record("wrong error: \(String(describing: error))")
            return
        }
        #expect(UInt64(size) == form.contentLength!)
    }

    @Test func aReadErrorTheMakerSwallowsStillFailsTheIteration() async throws {
        let fileURL = try directory.file("shrinks.bin", contents: Data(count: 200_000))
        var form = MultipartFormData()
        try form.append(fileURL: fileURL, name: "file")
        try Data(count: 100).write(to: fileURL)
        let chunks = form.bodyChunks(maximumSize: 65_536) { size, fill in
            var chunk = Data(count: size)
            chunk.count = (try? chunk.withUnsafeMutableBytes { try fill($0) }) ?? 0
            return chunk
        }
        let (collected, error) = await collectIteration(chunks)
        #expect(UInt64(collected.reduce(0) { $0 + $1.count }) < form.contentLength!)
        let failure = try #require(error as? MultipartError)
        #expect(failure.part?.index == 0)
        guard case .fileSizeChanged(_, expected: 200_000, actual: 100) = failure.reason else {
            Issue.record("wrong reason: \(failure)")
            return
        }
    }

    struct OutOfBuffers: Error {}

    @Test func theMakersOwnErrorEndsTheIteration() async throws {
        var form = MultipartFormData()
        form.append(Data(count: 5_000), name: "zeros")
        let (collected, error) = await collectIteration(
            form.bodyChunks(maximumSize: 1_000) { _, _ -> Data in throw OutOfBuffers() })
        #expect(collected.isEmpty)
        #expect(error is OutOfBuffers)
    }

    @Test func anIterationStartsAtItsOffsetOrThrowsWhyItCannot() async throws {
        var form = MultipartFormData()
        form.append("caption", name: "title")
        form.append(Data((0..<9_000).map { UInt8(truncatingIfNeeded: $0 >> 3) }), name: "data")
        let encoded = try form.encode()
        for offset in [0, 1, 150, encoded.count - 1, encoded.count] {
            let chunks = form.bodyChunks(maximumSize: 777, startingAt: UInt64(offset), makeChunk: Self.makeChunk())
            let (collected, error) = await collectIteration(chunks)
            #expect(error == nil)
            #expect(collected.concatenated() == encoded.dropFirst(offset), "from \(offset)")
        }
        let past = form.bodyChunks(startingAt: UInt64(encoded.count + 1), makeChunk: Self.makeChunk())
        let (collected, error) = await collectIteration(past)
        #expect(collected.isEmpty)
        guard case .offsetPastEnd = (error as? MultipartError)?.reason else {
            Issue.record("wrong error: \(String(describing: error))")
            return
        }
    }

    @Test func aFormWithAnAppendErrorThrowsItBeforeAnyChunkIsMade() async throws {
        var form = MultipartFormData()
        form.append(Data(), name: "bad", mimeType: "text/plain\r\nX-Evil: 1")
        let (collected, error) = await collectIteration(form.bodyChunks { _, _ -> Data in throw OutOfBuffers() })
        #expect(collected.isEmpty)
        let failure = try #require(error as? MultipartError)
        #expect(failure.part?.name == "bad")
        guard case .invalidMIMEType = failure.reason else {
            Issue.record("wrong reason: \(failure)")
            return
        }
    }
}
