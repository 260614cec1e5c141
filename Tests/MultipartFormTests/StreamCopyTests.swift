import Foundation
import MultipartForm
import MultipartStreamTestSupport
import Testing

/// `MultipartBodyStream` as `NSCopying`: what a `needNewBodyStream` delegate answers with, whatever state the
/// request's own stream is in.
@Suite struct StreamCopyTests {
    let directory: TemporaryDirectory
    let form: MultipartFormData
    let body: Data

    init() throws {
        directory = try TemporaryDirectory()
        var form = MultipartFormData()
        form.append("text", name: "t")
        try form.append(fileURL: directory.file("f.bin", contents: Data(repeating: 7, count: 100_000)), name: "f")
        form.append(length: 3, name: "s") { InputStream(data: Data("abc".utf8)) }
        self.form = form
        body = try form.encode()
    }

    private func copy(of stream: MultipartBodyStream) throws -> MultipartBodyStream {
        let copy = try #require((stream as NSCopying).copy(with: nil) as? MultipartBodyStream)
        #expect(copy !== stream)
        #expect(copy.streamStatus == .notOpen)
        #expect(copy.bytesRead == 0)
        #expect(copy.contentLength == stream.contentLength!)
        return copy
    }

    private func read(_ stream: InputStream, _ count: Int) -> Int {
        var buffer = [UInt8](repeating: 0, count: count)
        return stream.read(&buffer, maxLength: count)
    }

    @Test func aCopyOfAnUnopenedStreamIsTheWholeForm() throws {
        #expect(try copy(of: form.makeBodyStream()).drain().bytes == body)
    }

    @Test func aCopyOfAHalfReadStreamIsTheWholeFormAndLeavesTheOriginalWhereItWas() throws {
        let original = form.makeBodyStream()
        original.open()
        #expect(read(original, 50_000) == 50_000)
        let copy = try copy(of: original)
        #expect(copy.drain().bytes == body)
        #expect(original.bytesRead == 50_000)
        #expect(original.drain().bytes == body[50_000...])
    }

    @Test func aCopyOfAClosedStreamIsTheWholeForm() throws {
        let finished = form.makeBodyStream()
        _ = finished.drain()
        finished.close()
        #expect(try copy(of: finished).drain().bytes == body)
        let closedEarly = form.makeBodyStream()
        closedEarly.open()
        #expect(read(closedEarly, 10) == 10)
        closedEarly.close()
        #expect(try copy(of: closedEarly).drain().bytes == body)
    }

    @Test func aCopyOfAFailedStreamIsTheWholeForm() throws {
        let failed = form.makeBodyStream()
        #expect(read(failed, 10) == -1, "a read before open fails the stream")
        #expect(failed.streamStatus == .error)
        let copy = try copy(of: failed)
        let drained = copy.drain()
        #expect(drained.error == nil)
        #expect(drained.bytes == body)
        #expect(failed.streamStatus == .error, "the original stays failed")
    }

    @Test func aCopyStartsWhereTheOriginalStarted() throws {
        let original = form.makeBodyStream(startingAt: 1_234)
        _ = original.drain()
        #expect(try copy(of: original).drain().bytes == body[1_234...])
    }

    @Test func copyWithoutAZoneIsACopyToo() throws {
        let copy = try #require(form.makeBodyStream().copy() as? MultipartBodyStream)
        #expect(copy.drain().bytes == body)
    }

    /// The request's own stream is never read by `uploadTask(withStreamedRequest:)`: its first copy may read the
    /// one-shot part; a second copy (a resend) fails at that part, naming it.
    @Test func aOneShotPartGoesOutOnceAcrossCopiesAndThenFailsNamingThePart() throws {
        var form = try MultipartFormData(boundary: "B0undary")
        form.append("before", name: "a")
        form.append(InputStream(data: Data("once".utf8)), length: 4, name: "once")
        let original = form.makeBodyStream()
        let first = try copy(of: original).drain()
        #expect(first.error == nil)
        #expect(first.bytes.count == Int(form.contentLength!))
        let second = try copy(of: original).drain()
        let error = try #require(second.error)
        #expect(error.part?.index == 1)
        #expect(error.part?.name == "once")
        guard case .streamAlreadyConsumed = error.reason else {
            Issue.record("\(error)")
            return
        }
    }

    @Test func aCopyIsPacedAsTheOriginal() throws {
        let original = form.makeBodyStream(pacing: MultipartPacing(packetSize: 1_000, delay: 0))
        let copy = try copy(of: original)
        copy.open()
        #expect(read(copy, 65_536) == 1_000, "at most one packet a read")
    }
}
