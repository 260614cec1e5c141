import Foundation
import MultipartForm
import MultipartStreamTestSupport
import Testing

/// `encode()` and `writeEncodedData(to:)`: the same bytes as the stream, and safe with files.
@Suite struct EncodingTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    private func sampleForm() throws -> MultipartFormData {
        var form = MultipartFormData()
        form.append("value", name: "field")
        try form.append(fileURL: directory.file("a.bin", contents: Data(repeating: 0x5A, count: 3 << 20)), name: "file")
        form.append(length: 4, name: "s") { InputStream(data: Data("abcd".utf8)) }
        return form
    }

    @Test func encodeWriteAndStreamProduceTheSameBytes() throws {
        let form = try sampleForm()
        let encoded = try form.encode()
        let output = directory.path("body.multipart")
        try form.writeEncodedData(to: output)
        #expect(try Data(contentsOf: output) == encoded)
        #expect(try form.streamedBody() == encoded)
        #expect(UInt64(encoded.count) == form.contentLength!)
    }

    @Test func writeEncodedDataRefusesToReplaceAFile() throws {
        let form = try sampleForm()
        let output = try directory.file("existing", contents: Data("keep me".utf8))
        let error = try #require(#expect(throws: MultipartError.self) { try form.writeEncodedData(to: output) })
        guard case .outputFileExists(output) = error.reason else {
            Issue.record("\(error)")
            return
        }
        #expect(try Data(contentsOf: output) == Data("keep me".utf8))
    }

    @Test func writeEncodedDataIntoAMissingDirectory() throws {
        let output = directory.path("no/such/dir/body")
        let error = try #require(#expect(throws: MultipartError.self) { try sampleForm().writeEncodedData(to: output) })
        guard case .outputWriteFailed(_, errno: ENOENT) = error.reason else {
            Issue.record("\(error)")
            return
        }
    }

    @Test func writeEncodedDataNeedsAFileURL() throws {
        let url = URL(string: "https://example.com/body")!
        let error = try #require(#expect(throws: MultipartError.self) { try sampleForm().writeEncodedData(to: url) })
        guard case .notAFileURL = error.reason else {
            Issue.record("\(error)")
            return
        }
    }

    @Test func writtenFilesHoldEncodesBytesForRandomFormsOfManyFiles() throws {
        // On Linux the file parts go from file to file in the kernel (copy_file_range), the rest through a buffer.
        var generator = SeededGenerator(seed: 19)
        for round in 0..<60 {
            let form = try RandomForm(using: &generator, in: directory, maxParts: 10, maxBodyLength: 200_000).form
            guard form.isReplayable else { continue }
            let output = directory.path("round-\(round).multipart")
            try form.writeEncodedData(to: output)
            #expect(try Data(contentsOf: output) == form.encode(), "round \(round)")
        }
    }

    @Test func aFileThatShrankFailsTheKernelCopyAndLeavesNoFile() throws {
        let file = try directory.file("shrinking.bin", contents: Data(count: 1 << 20))
        var form = MultipartFormData()
        form.append("before", name: "a")
        try form.append(fileURL: file, name: "doc")
        let handle = try FileHandle(forWritingTo: file)
        try handle.truncate(atOffset: 1_000)
        try handle.close()
        let output = directory.path("shrunk.multipart")
        let error = try #require(#expect(throws: MultipartError.self) { try form.writeEncodedData(to: output) })
        guard case .fileSizeChanged(_, expected: 1 << 20, actual: 1_000) = error.reason else {
            Issue.record("\(error)")
            return
        }
        #expect(error.part?.name == "doc")
        #expect(!FileManager.default.fileExists(atPath: output.path))
    }

    @Test func aFileChangedInPlaceFailsAtItsLastByte() throws {
        let file = try directory.file("rewritten.bin", contents: Data(count: 1 << 20))
        var form = MultipartFormData()
        try form.append(fileURL: file, name: "doc")
        // Same length, new contents, a modification time of its own: only the identity check can tell.
        try Data(repeating: 7, count: 1 << 20).write(to: file)
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: 60)], ofItemAtPath: file.path)
        let error = try #require(
            #expect(throws: MultipartError.self) {
                try form.writeEncodedData(to: directory.path("changed.multipart"))
            })
        guard case .fileChanged = error.reason else {
            Issue.record("\(error)")
            return
        }
    }

    @Test func aFailureAfterSomeBytesWereWrittenRemovesThePartialFile() throws {
        var form = MultipartFormData()
        form.append(length: 3 << 20, name: "short") { ScriptedStream(Array(repeating: 1, count: 2 << 20)) }
        let output = directory.path("partial")
        let error = try #require(#expect(throws: MultipartError.self) { try form.writeEncodedData(to: output) })
        guard case .streamEndedEarly(expected: 3 << 20, received: 2 << 20) = error.reason else {
            Issue.record("\(error)")
            return
        }
        #expect(!FileManager.default.fileExists(atPath: output.path))
    }
}
