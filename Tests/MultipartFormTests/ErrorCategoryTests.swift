import Foundation
import Testing

@testable import MultipartForm

/// ``MultipartError``'s category, part and underlying error: what a caller branches on without listing reasons.
@Suite struct ErrorCategoryTests {
    private let url = URL(fileURLWithPath: "/tmp/missing.bin")

    @Test(arguments: [
        (MultipartError.Reason.fileNotFound(URL(fileURLWithPath: "/tmp/x")), MultipartError.Category.file),
        (.fileChanged(URL(fileURLWithPath: "/tmp/x")), .file),
        (.invalidBoundary("bad\r\n"), .form),
        (.invalidHeaderValue(name: "X", value: "a\r\nb"), .form),
        (.streamEndedEarly(expected: 10, received: 5), .stream),
        (.notReplayable, .stream),
        (.offsetPastEnd(offset: 10, contentLength: 5), .stream),
        (.answeredBeforeBodySent(statusCode: 200, bytesSent: 1, contentLength: 2), .upload),
        (.redirectNotFollowed(statusCode: 307, location: nil), .upload),
        (.appendResent, .resumable),
        (.resumeFailed(retries: 1, bytesAcknowledged: 0, contentLength: 1), .resumable),
        (.resumeSaved(retries: 0, bytesAcknowledged: 1, contentLength: 2), .resumable),
        (.outputFileExists(URL(fileURLWithPath: "/tmp/x")), .output),
        (.tooLargeForMemory(1 << 62), .output),
    ])
    func everyReasonHasItsCategory(reason: MultipartError.Reason, category: MultipartError.Category) {
        #expect(MultipartError(reason).category == category, "\(reason)")
    }

    @Test func thePartIsNamedOnlyWhereThereIsOne() throws {
        var form = MultipartFormData()
        form.append("v", name: "first")
        let error = #expect(throws: MultipartError.self) { try form.append(fileURL: url, name: "photo") }
        #expect(error?.part == MultipartError.Part(index: 1, name: "photo"))
        #expect(error?.category == .file)
        #expect(error?.description.hasPrefix("part 1 (\"photo\"): ") == true)
        let whole = MultipartError(.resumeFailed(retries: 2, bytesAcknowledged: 5, contentLength: 9))
        #expect(whole.part == nil && whole.description.hasPrefix("form: "))
    }

    @Test func theUnderlyingErrorIsKeptNotItsDescription() {
        struct Broken: Error {}
        let thrown = MultipartError(.streamFactoryFailed(Broken()), partIndex: 0, partName: "s")
        #expect(thrown.underlying is Broken)
        let gaveUp = MultipartError(
            .resumeFailed(retries: 5, bytesAcknowledged: 10, contentLength: 20),
            underlying: URLError(.networkConnectionLost))
        #expect((gaveUp.underlying as? URLError)?.code == .networkConnectionLost)
        #expect(gaveUp.description.contains("10 of the form's 20 bytes"))
        #expect(gaveUp.description.contains(URLError(.networkConnectionLost).localizedDescription))
        #expect(MultipartError(.notReplayable).underlying == nil)
    }

    @Test func aOneShotPartAndAnAppendResentAreTwoReasons() {
        #expect(MultipartError(.notReplayable).description.contains("one-shot InputStream"))
        #expect(!MultipartError(.appendResent).description.contains("one-shot"))
    }
}
