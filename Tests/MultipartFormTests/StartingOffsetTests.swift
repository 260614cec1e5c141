import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm

#if canImport(Glibc)
    import Glibc
#endif

/// A body that starts at any byte: `makeBodyStream(startingAt:)` and `bodyChunks(maximumSize:startingAt:)` give
/// `encode()`'s bytes from that byte on, finding it per part, never per skipped byte.
@Suite struct StartingOffsetTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    private func chunks(of form: MultipartFormData, from offset: UInt64, size: Int) async throws -> Data {
        var body = Data()
        for try await chunk in form.bodyChunks(maximumSize: size, startingAt: offset) { body.append(contentsOf: chunk) }
        return body
    }

    @Test func twoHundredRandomFormsAtRandomOffsetsGiveEncodesSuffix() async throws {
        var generator = SeededGenerator(seed: 18)
        var checked = 0
        for round in 0..<200 {
            let form = try RandomForm(using: &generator, in: directory, maxParts: 8).form
            guard form.isReplayable else {
                // A one-shot stream part lies before the end: the end cannot be resumed.
                let drained = form.makeBodyStream(startingAt: form.contentLength!).drain()
                guard case .cannotResumeOneShotStream(form.contentLength!) = drained.error?.reason else {
                    Issue.record("round \(round): \(String(describing: drained.error))")
                    continue
                }
                continue
            }
            let whole = try form.encode()
            let offsets = [0, form.contentLength!, UInt64.random(in: 0...form.contentLength!, using: &generator)]
            for offset in offsets {
                let readSize = Int.random(in: 1...5_000, using: &generator)
                let stream = form.makeBodyStream(startingAt: offset)
                #expect(stream.contentLength! == form.contentLength! - offset)
                let drained = stream.drain(readSize: readSize)
                #expect(drained.error == nil, "round \(round) at \(offset): \(String(describing: drained.error))")
                #expect(drained.bytes == whole[Int(offset)...], "round \(round): stream from \(offset)")
                #expect(try await chunks(of: form, from: offset, size: readSize) == whole[Int(offset)...])
                checked += 1
            }
        }
        #expect(checked > 200, "only \(checked) offsets of replayable forms")
    }

    @Test func everyOffsetOfAFormOfEveryKindOfPart() async throws {
        var form = try MultipartFormData(boundary: "B0undary")
        form.append("text value", name: "t")
        form.append(Data([0, 1, 2, 3, 255]), name: "d", fileName: "d.bin")
        try form.append(fileURL: directory.file("f.txt", contents: Data("file contents\n".utf8)), name: "f")
        form.append(length: 9, name: "s", fileName: "s.txt") { InputStream(data: Data("streamed!".utf8)) }
        form.append(Data(), name: "empty")
        let whole = try form.encode()
        for offset in 0...form.contentLength! {
            let drained = form.makeBodyStream(startingAt: offset).drain(readSize: 7)
            #expect(drained.bytes == whole[Int(offset)...], "at \(offset): \(String(describing: drained.error))")
            #expect(try await chunks(of: form, from: offset, size: 3) == whole[Int(offset)...], "chunks at \(offset)")
        }
    }

    @Test func anEmptyFormStartsAtAnyOfItsBytes() throws {
        let form = MultipartFormData()
        let whole = try form.encode()
        for offset in 0...form.contentLength! {
            #expect(form.makeBodyStream(startingAt: offset).drain().bytes == whole[Int(offset)...])
        }
    }

    @Test func anOffsetPastTheEndIsATypedError() async throws {
        var form = MultipartFormData()
        form.append("v", name: "n")
        let past = form.contentLength! + 1
        let stream = form.makeBodyStream(startingAt: past)
        #expect(stream.contentLength! == 0)
        let drained = stream.drain()
        guard case .offsetPastEnd(offset: past, contentLength: form.contentLength!) = drained.error?.reason else {
            Issue.record("\(String(describing: drained.error))")
            return
        }
        await #expect(throws: MultipartError.self) { _ = try await chunks(of: form, from: .max, size: 10) }
    }

    @Test func aOneShotStreamCanBeStartedBeforeItsBodyOnly() throws {
        let streamed = Data("one shot body".utf8)
        func form() throws -> MultipartFormData {
            var form = try MultipartFormData(boundary: "B0undary")
            form.append("first", name: "a")
            form.append(InputStream(data: streamed), length: UInt64(streamed.count), name: "once")
            form.append("last", name: "z")
            return form
        }
        // The twin made of the same bytes, replayable, tells where the one-shot part's body lies.
        var twin = try MultipartFormData(boundary: "B0undary")
        twin.append("first", name: "a")
        twin.append(length: UInt64(streamed.count), name: "once") { InputStream(data: streamed) }
        twin.append("last", name: "z")
        let whole = try twin.encode()
        let bodyStart = UInt64(whole.range(of: streamed)!.lowerBound)

        // In its headers, and at its first body byte, nothing of it was read before: it streams.
        for offset in [bodyStart - 3, bodyStart] {
            let drained = try form().makeBodyStream(startingAt: offset).drain()
            #expect(drained.bytes == whole[Int(offset)...], "\(String(describing: drained.error))")
        }
        // Inside it, or after it, its earlier bytes would have to be read again.
        for offset in [bodyStart + 1, bodyStart + UInt64(streamed.count), twin.contentLength!] {
            let error = try form().makeBodyStream(startingAt: offset).drain().error
            guard case .cannotResumeOneShotStream(offset) = error?.reason else {
                Issue.record("at \(offset): \(String(describing: error))")
                continue
            }
            #expect(error?.part?.index == 1 && error?.part?.name == "once")
        }
    }

    @Test func aStreamFactoryIsReadAndDroppedUpToTheOffsetAndMustHaveItsBytes() throws {
        var form = MultipartFormData()
        form.append(length: 100_000, name: "short") { ScriptedStream(Array(repeating: 7, count: 1_000)) }
        // Ten bytes before the end of the part's body: 99,990 to drop from a stream that has 1,000.
        let closeLength = UInt64("\r\n--\(form.boundary)--\r\n".utf8.count)
        let error = form.makeBodyStream(startingAt: form.contentLength! - closeLength - 10).drain().error
        guard case .streamEndedEarly(expected: 100_000, received: 1_000) = error?.reason else {
            Issue.record("\(String(describing: error))")
            return
        }
        #expect(error?.part?.name == "short")
    }

    @Test func aFileChangedSinceItWasAppendedFailsWhereverTheBodyStarts() throws {
        let file = try directory.file("changing.bin", contents: Data(count: 10_000))
        var form = MultipartFormData()
        try form.append(fileURL: file, name: "doc")
        let inside = form.contentLength! / 2
        try Data(repeating: 1, count: 10_000).write(to: file)
        let error = form.makeBodyStream(startingAt: inside).drain().error
        guard case .fileChanged = error?.reason else {
            Issue.record("\(String(describing: error))")
            return
        }
        #expect(error?.part?.name == "doc")
    }

    @Test func reopeningStartsAtTheOffsetAgain() throws {
        var form = MultipartFormData()
        try form.append(fileURL: directory.file("f.bin", contents: Data((0..<200).map { UInt8($0) })), name: "f")
        let whole = try form.encode()
        let stream = form.makeBodyStream(startingAt: 100)
        let first = stream.drain(readSize: 13).bytes
        stream.open()
        #expect(stream.drain(readSize: 13).bytes == first)
        #expect(first == whole[100...])
    }

    /// Bytes this thread has read through `read(2)` and its kin, from `/proc/thread-self/io`: the stream reads on
    /// the thread that calls `read`, and a count of the whole process would take in the reads of tests running
    /// beside this one (under the sanitizers, megabytes of them).
    private func bytesReadByThisThread() throws -> UInt64 {
        let text = try String(contentsOfFile: "/proc/thread-self/io", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("rchar:") })
        return try #require(UInt64(line.dropFirst("rchar:".count).trimmingCharacters(in: .whitespaces)))
    }

    @Test(.enabled(if: isLinux)) func startingAtTheLastByteOfALargeFileReadsNoneOfTheRest() throws {
        // Sparse: 1 GiB of length, no disk, and no time to read unless someone reads it.
        let url = directory.path("sparse.bin")
        #expect(FileManager.default.createFile(atPath: url.path, contents: nil))
        let handle = try FileHandle(forWritingTo: url)
        try handle.truncate(atOffset: 1 << 30)
        try handle.close()
        var form = MultipartFormData()
        try form.append(fileURL: url, name: "big")
        let closeLength = UInt64("\r\n--\(form.boundary)--\r\n".utf8.count)
        let lastFileByte = form.contentLength! - closeLength - 1
        let before = try bytesReadByThisThread()
        let drained = form.makeBodyStream(startingAt: lastFileByte).drain()
        let read = try bytesReadByThisThread() - before
        #expect(drained.error == nil)
        #expect(drained.bytes == Data([0]) + Data("\r\n--\(form.boundary)--\r\n".utf8))
        #expect(read < 1 << 20, "\(read) bytes read to start at the last of 1 GiB")
    }
}

/// A stream of a part of the form, as one append of a resumable upload under `max-append-size` sends: exactly
/// `encode()`'s bytes in the range, and at its end as soon as the last of them is handed out.
@Suite struct FormRangeStreamTests {
    @Test func aRangeGivesEncodesBytesInItAndEndsWithTheLast() throws {
        let directory = try TemporaryDirectory()
        var generator = SeededGenerator(seed: 77)
        for _ in 0..<50 {
            let form = try RandomForm(using: &generator, in: directory, maxParts: 8).form
            guard form.isReplayable else { continue }
            let encoded = try form.encode()
            let length = form.contentLength!
            let start = UInt64.random(in: 0...length, using: &generator)
            let end = UInt64.random(in: start...length, using: &generator)
            let stream = MultipartBodyStream(.form(form, offset: start, end: end))
            #expect(stream.contentLength! == end - start)
            stream.open()
            var got = Data()
            var buffer = [UInt8](repeating: 0, count: Int.random(in: 1...70_000, using: &generator))
            while stream.hasBytesAvailable {
                let count = stream.read(&buffer, maxLength: buffer.count)
                #expect(count >= 0, "\(String(describing: stream.streamError))")
                if count <= 0 { break }
                got.append(contentsOf: buffer[0..<count])
            }
            #expect(got == encoded[Int(start)..<Int(end)], "\(start)..<\(end) of \(length)")
            #expect(stream.streamStatus == .atEnd, "at its end with the last byte, not one read later")
            stream.close()
        }
    }
}
