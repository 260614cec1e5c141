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
        (.responseTooLarge(statusCode: 200, limit: 1), .upload),
        (.appendResent, .resumable),
        (.resumeFailed(retries: 1, bytesAcknowledged: 0, contentLength: 1), .resumable),
        (.resumeSaved(retries: 0, bytesAcknowledged: 1, contentLength: 2), .resumable),
        (.outageOutlasted(seconds: 10, bytesAcknowledged: 1, contentLength: 2), .resumable),
        (.queueInUse(URL(fileURLWithPath: "/tmp/q")), .upload),
        (.credentialNotQueued("Authorization"), .upload),
        (.streamNotQueued, .form),
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
        let whole = MultipartError(.bodyTooLong(partLength: UInt64.max))
        #expect(whole.part == nil && whole.description.hasPrefix("form: "))
    }

    /// A 413 is the server's answer, not a fault of the form: a description without a part says its category.
    @Test(arguments: [
        (MultipartError.Reason.unacceptableStatus(statusCode: 413, body: Data()), "response: the server answered 413"),
        (.resumeFailed(retries: 2, bytesAcknowledged: 5, contentLength: 9), "resumable upload: "),
        (.lengthUnknown, "upload: "),
        (
            .responseTooLarge(statusCode: 200, limit: 16),
            "upload: the server's answer (200) is longer than the 16 bytes"
        ),
        (.tooLargeForMemory(1), "output: "),
        (.invalidBoundary("a\r\n"), "form: "),
    ])
    func aDescriptionWithoutAPartSaysItsCategory(reason: MultipartError.Reason, prefix: String) {
        #expect(MultipartError(reason).description.hasPrefix(prefix), "\(MultipartError(reason).description)")
    }

    /// Every reason the type declares has a row in the article that says what raises each: a new case without one
    /// fails here, as `.fileVanished` once was in no article and a `switch` on `.fileNotFound` missed it.
    @Test func everyReasonIsInTheArticle() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let source = try String(
            contentsOf: root.appending(path: "Sources/MultipartForm/MultipartError.swift"), encoding: .utf8)
        let article = try String(
            contentsOf: root.appending(path: "Sources/MultipartStream/MultipartStream.docc/HandlingErrors.md"),
            encoding: .utf8)
        let reasons = source.components(separatedBy: "public enum Reason")[1]
            .components(separatedBy: "extension MultipartError.Reason")[0]
            .split(separator: "\n")
            .compactMap { line -> String? in
                let line = line.trimmingCharacters(in: .whitespaces)
                guard line.hasPrefix("case ") else { return nil }
                return String(line.dropFirst(5).prefix { $0.isLetter || $0.isNumber })
            }
        #expect(reasons.count >= 55, "\(reasons)")
        for reason in reasons {
            #expect(
                article.contains("| ``MultipartError/Reason/\(reason)"), "\(reason) has no row in HandlingErrors.md")
        }
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

/// An error that names a URL the server chose names it without user information: a relative `Location` resolved
/// against a request URL with a user and password carries them, and an error description is logged.
@Test func errorsNameServersURLsWithoutUserInformation() throws {
    let url = try #require(URL(string: "http://ada:s3cret@127.0.0.1:8080/u/1"))
    let errors = [
        MultipartError(.insecureUploadLocation(url)),
        MultipartError(.unusableUploadLocation(url.absoluteString, flaw: "x")),
        MultipartError(.redirectNotFollowed(statusCode: 307, location: url)),
    ]
    for error in errors {
        #expect(!error.description.contains("s3cret") && !error.description.contains("ada"), "\(error.description)")
        #expect(error.description.contains("127.0.0.1:8080/u/1"), "\(error.description)")
    }
}
