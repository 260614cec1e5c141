import Foundation
import MultipartForm
import MultipartStreamTestSupport
import Testing

/// `bodyChunks()`: the body as an AsyncSequence, equal to `encode()` on every iteration, failing where the stream
/// would.
@Suite struct BodyChunksTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    @Test(arguments: [1, 7, 4_096, 65_536, 1 << 20])
    func everyIterationEqualsEncode(maximumSize: Int) async throws {
        var generator = SeededGenerator(seed: UInt64(maximumSize))
        for round in 0..<20 {
            var random = try RandomForm(using: &generator, in: directory, maxBodyLength: 20_000)
            // Replayable: the one-shot streams become factories of the same bytes.
            random.form = MultipartFormData()
            for part in random.expected {
                random.form.append(
                    length: UInt64(part.body.count), name: part.name, fileName: part.fileName,
                    mimeType: part.contentType
                ) { InputStream(data: part.body) }
            }
            let encoded = try random.form.encode()
            let chunks = random.form.bodyChunks(maximumSize: maximumSize)
            // The same body filled into buffers the caller makes (FilledChunksTests has the rest of their rules).
            let filled = random.form.bodyChunks(maximumSize: maximumSize) { size, fill in
                var chunk = Data(count: size)
                chunk.count = try chunk.withUnsafeMutableBytes { try fill($0) }
                return chunk
            }
            for iteration in 0..<2 {
                let (collected, error) = await collectIteration(chunks)
                #expect(error == nil, "round \(round) iteration \(iteration): \(String(describing: error))")
                #expect(collected.allSatisfy { !$0.isEmpty && $0.count <= maximumSize })
                #expect(collected.concatenated() == encoded, "round \(round) iteration \(iteration)")
                var filledBody = Data()
                for try await chunk in filled {
                    #expect(!chunk.isEmpty && chunk.count <= maximumSize)
                    filledBody.append(chunk)
                }
                #expect(filledBody == encoded, "filled, round \(round) iteration \(iteration)")
            }
        }
    }

    @Test func chunksOfAFileFormAreTheBytesNodeParses() async throws {
        let fileBody = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) })
        var form = MultipartFormData()
        form.append("caption", name: "title")
        try form.append(fileURL: try directory.file("big.bin", contents: fileBody), name: "file")
        let (collected, error) = await collectIteration(form.bodyChunks())
        #expect(error == nil)
        #expect(collected.count == Int((form.contentLength! + 65_535) / 65_536))
        let parts = try Peer.node.parse(collected.concatenated(), contentType: form.contentType)
        #expect(parts.map(\.name) == ["title", "file"])
        #expect(parts.last?.body == fileBody)
    }

    @Test func aMaximumSizeBelowOneMeansOne() async throws {
        var form = try MultipartFormData(boundary: "b")
        form.append("x", name: "n")
        for size in [0, -5, Int.min] {
            let (collected, error) = await collectIteration(form.bodyChunks(maximumSize: size))
            #expect(error == nil)
            #expect(collected.count == Int(form.contentLength!))
            #expect(collected.concatenated() == (try form.encode()))
        }
    }

    @Test func aHugeMaximumSizeIsCappedAt16MiB() async throws {
        var form = MultipartFormData()
        form.append(length: 40 << 20, name: "zeros") { InputStream(data: Data(count: 40 << 20)) }
        let (collected, error) = await collectIteration(form.bodyChunks(maximumSize: .max))
        #expect(error == nil)
        #expect(collected.map(\.count).max() == 16 << 20)
        #expect(UInt64(collected.reduce(0) { $0 + $1.count }) == form.contentLength!)
    }

    @Test func aOneShotStreamFailsTheSecondIterationAtItsPart() async throws {
        var form = MultipartFormData()
        form.append("a", name: "first")
        form.append(InputStream(data: Data("once".utf8)), length: 4, name: "once")
        let chunks = form.bodyChunks()
        let first = await collectIteration(chunks)
        #expect(first.error == nil)
        #expect(first.chunks.concatenated().count == Int(form.contentLength!))
        let second = await collectIteration(chunks)
        let error = try #require(second.error)
        #expect(error.part?.index == 1)
        #expect(error.part?.name == "once")
        guard case .streamAlreadyConsumed = error.reason else {
            Issue.record("wrong reason: \(error)")
            return
        }
    }

    @Test func aFormWithAnAppendErrorThrowsItFirst() async throws {
        var form = MultipartFormData()
        form.append(Data(), name: "bad", mimeType: "text/plain\r\nX-Evil: 1")
        let (collected, error) = await collectIteration(form.bodyChunks())
        #expect(collected.isEmpty)
        #expect(error?.part?.name == "bad")
        guard case .invalidMIMEType = error?.reason else {
            Issue.record("wrong reason: \(String(describing: error))")
            return
        }
    }

    @Test func aFileThatShrinksFailsTheIterationInsteadOfEndingIt() async throws {
        let fileURL = try directory.file("shrinks.bin", contents: Data(count: 200_000))
        var form = MultipartFormData()
        try form.append(fileURL: fileURL, name: "file")
        try Data(count: 100).write(to: fileURL)
        let (collected, error) = await collectIteration(form.bodyChunks())
        #expect(UInt64(collected.reduce(0) { $0 + $1.count }) < form.contentLength!)
        #expect(error?.part?.index == 0)
        guard case .fileSizeChanged(_, expected: 200_000, actual: 100) = error?.reason else {
            Issue.record("wrong reason: \(String(describing: error))")
            return
        }
    }

    @Test func aStreamThatEndsEarlyFailsTheIteration() async throws {
        var form = MultipartFormData()
        form.append(length: 10, name: "short") { InputStream(data: Data(count: 4)) }
        let (_, error) = await collectIteration(form.bodyChunks())
        guard case .streamEndedEarly(expected: 10, received: 4) = error?.reason else {
            Issue.record("wrong reason: \(String(describing: error))")
            return
        }
    }
}
