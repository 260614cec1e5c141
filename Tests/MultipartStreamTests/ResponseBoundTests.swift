import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// No answer takes memory a server decides (#49): a refused status's body is a bounded prefix and the rest is not
/// waited for; an answer past its bound fails loudly on every way to send; a body taken as it arrives (a file, chunks)
/// is whole. What the server put on the wire decides (`/sent`): its bytes, hash, and whether the client hung up.
/// Peak memory is the benchmarks' `answer-check`, in a process of its own.
///
/// Linux URLSession stops a task on its one thread for the process, which a connection that stays readable can hold
/// (under a sanitizer, for seconds): a finite answer may be read to its end before the stop takes effect, so the
/// endless answers are the ones that show the upload does not wait for the rest.
extension URLSessionSuites {
    @Suite(.serialized) struct ResponseBoundTests {
        static let gib = 1 << 30

        /// A way to send, with the options a user types first.
        typealias Path = UploadPath

        private func form() -> MultipartFormData {
            var form = MultipartFormData()
            form.append("value", name: "field")
            form.append(Data(repeating: 7, count: 3_000), name: "file", fileName: "f.bin")
            return form
        }

        /// Sends the form to `url` `path`'s way, with the default bound; the error it ends with.
        private func send(to url: URL, path: Path) async -> (any Error)? {
            switch path {
            case .task:
                return await multipartTaskError(URLRequest(url: url), form: form())
            case .streamedDelegate:
                return await streamedDelegateError(URLRequest(url: url, multipartFormData: form()))
            default:
                do {
                    _ = try await URLSession.shared.upload(form(), with: URLRequest(url: url), strategy: path.strategy)
                    return nil
                } catch {
                    return error
                }
            }
        }

        /// What the server sent once it has seen the client hang up (or finished), looked at until it has.
        private func sentOnceSettled(_ server: LargeAnswerServer) async throws -> LargeAnswerServer.Sent {
            var sent = try server.sent()
            try await waitFor("the server to see the client hang up or finish", upTo: 10, every: 0.02) {
                sent = try server.sent()
                return sent.hungUp || sent.sha256 != nil
            }
            return sent
        }

        /// A 1 GiB answer to the default bound: `responseTooLarge` naming the bound and the status, with the response,
        /// and the client hangs up long before the end, on every way to send.
        @Test(arguments: Path.allCases)
        func aLargeAnswerPastTheDefaultBoundFails(path: Path) async throws {
            let server = try await LargeAnswerServer()
            let error = await send(to: server.url(bytes: Self.gib), path: path)
            let failure = try #require(error as? MultipartError, "\(path): \(String(describing: error))")
            guard case .responseTooLarge(200, let limit) = failure.reason else {
                Issue.record("\(path): \(failure)")
                return
            }
            #expect(limit == MultipartResponseBody.defaultLimit && limit == 16 << 20)
            #expect(failure.category == .upload)
            #expect(failure.description.contains("16777216 bytes"), "\(failure)")
            if path.isUpload { #expect(failure.response?.statusCode == 200) }
            // Stopped at the bound; when the stop takes effect is URLSession's (under a sanitizer, after the server
            // has written the whole 1 GiB), so the endless answers below are what prove the rest is not waited for.
        }

        /// A refused status's body, 2 GiB with a length or chunked without end: the error carries its first 64 KiB,
        /// exactly, and the upload does not wait for the rest.
        @Test(arguments: [Path.automatic, .stream, .file, .resumableToAPlainServer], [false, true])
        func aRefusedAnswerCarriesABoundedPrefix(path: Path, endless: Bool) async throws {
            let server = try await LargeAnswerServer()
            let url = server.url(status: 500, bytes: endless ? nil : 2 * Self.gib)
            let error = try await #require(throws: MultipartError.self) {
                _ = try await URLSession.shared.upload(
                    form(), with: URLRequest(url: url), strategy: path.strategy, acceptableStatusCodes: 200..<300)
            }
            guard case .unacceptableStatus(500, let body) = error.reason else {
                Issue.record("\(path): \(error)")
                return
            }
            #expect(body == LargeAnswerServer.body(MultipartResponseBody.refusedBodyLimit), "\(path): \(body.count)")
            #expect(error.response?.statusCode == 500)
            // The server writes at a pace libcurl outreads (`LargeAnswerServer.bytesPerSecond`), so the upload's stop
            // takes effect when it is made: the client hangs up on the 2 GiB answer (which takes 17 s to send whole)
            // as on the endless one, which ends only by that stop. Under a sanitizer a stop can take longer than the
            // 2 GiB takes (the slowest seen, an endless answer under ThreadSanitizer beside every suite: 31 s to be
            // stopped and to return), so there the endless answers alone tell.
            if endless || !CancelBound.sanitized {
                let sent = try await sentOnceSettled(server)
                #expect(sent.hungUp, "\(path): \(sent.bytes) bytes written")
            }
        }

        /// An endless answer that is accepted fails at the bound, as a long one does.
        @Test func anEndlessAcceptedAnswerFailsAtTheBound() async throws {
            let server = try await LargeAnswerServer()
            let error = try await #require(throws: MultipartError.self) {
                _ = try await URLSession.shared.upload(
                    form(), with: URLRequest(url: server.url(bytes: nil)), responseBody: .inMemory(upTo: 1 << 20))
            }
            guard case .responseTooLarge(200, 1 << 20) = error.reason else {
                Issue.record("\(error)")
                return
            }
        }

        /// `.inMemory(upTo:)`: an answer of exactly the bound is whole; one byte more fails.
        @Test func theBoundIsExact() async throws {
            let server = try await LargeAnswerServer()
            let limit = 300_000
            let (data, _) = try await URLSession.shared.upload(
                form(), with: URLRequest(url: server.url(bytes: limit)), responseBody: .inMemory(upTo: limit))
            #expect(data == LargeAnswerServer.body(limit))
            let error = try await #require(throws: MultipartError.self) {
                _ = try await URLSession.shared.upload(
                    form(), with: URLRequest(url: server.url(bytes: limit + 1, chunked: true)),
                    responseBody: .inMemory(upTo: limit))
            }
            guard case .responseTooLarge(200, limit) = error.reason else {
                Issue.record("\(error)")
                return
            }
        }

        /// `.file(url)`: the whole answer, byte for byte as the server hashed it, on every way to send with
        /// `upload`; nothing but the file is left beside it.
        @Test(arguments: [Path.automatic, .stream, .file, .resumableToAPlainServer])
        func anAnswerToAFileIsWhole(path: Path) async throws {
            let server = try await LargeAnswerServer()
            let directory = try TemporaryDirectory()
            let destination = directory.url.appendingPathComponent("answer.bin")
            let length = 64 << 20
            let (data, response) = try await URLSession.shared.upload(
                form(), with: URLRequest(url: server.url(bytes: length)), strategy: path.strategy,
                acceptableStatusCodes: 200..<300, responseBody: .file(destination))
            #expect(data.isEmpty && (response as? HTTPURLResponse)?.statusCode == 200)
            let sent = try server.sent()
            #expect(sent.bytes == length && !sent.hungUp)
            #expect(try sha256sum(destination) == sent.sha256)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path) == ["answer.bin"])
        }

        /// `.file(url)` with a refused status, or cancelled while the answer is written: what was at `url` stays, and
        /// no file is left beside it.
        @Test func aFailedAnswerLeavesTheDestinationAsItWas() async throws {
            let server = try await LargeAnswerServer()
            let directory = try TemporaryDirectory()
            let destination = try directory.file("answer.bin", contents: Data("before".utf8))
            let form = form()
            await #expect(throws: MultipartError.self) {
                _ = try await URLSession.shared.upload(
                    form, with: URLRequest(url: server.url(status: 503, bytes: 5 << 20)),
                    acceptableStatusCodes: 200..<300, responseBody: .file(destination))
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path) == ["answer.bin"])
            let upload = Task {
                try await URLSession.shared.upload(
                    form, with: URLRequest(url: server.url(bytes: nil)), responseBody: .file(destination))
            }
            // Cancelled once the answer is being written beside the destination.
            try await waitFor("the answer written beside the destination", upTo: 10) {
                try FileManager.default.contentsOfDirectory(atPath: directory.url.path).count >= 2
            }
            upload.cancel()
            await #expect(throws: CancellationError.self) { _ = try await upload.value }
            #expect(try Data(contentsOf: destination) == Data("before".utf8))
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path) == ["answer.bin"])
        }

        /// `.chunks`: every piece in order, with its response, adds up to the server's body; a refused status's body
        /// never reaches it.
        @Test func chunksAddUpToTheAnswer() async throws {
            let server = try await LargeAnswerServer()
            let directory = try TemporaryDirectory()
            let received = try Received(to: directory.path("chunks.bin"))
            let length = 48 << 20
            let (data, _) = try await URLSession.shared.upload(
                form(), with: URLRequest(url: server.url(bytes: length)), acceptableStatusCodes: 200..<300,
                responseBody: .chunks { response, piece in received.take(response.statusCode, piece) })
            #expect(data.isEmpty)
            let (statuses, count) = received.seen
            #expect(statuses == [200] && count == length)
            #expect(try sha256sum(directory.path("chunks.bin")) == server.sent().sha256)
            await #expect(throws: MultipartError.self) {
                _ = try await URLSession.shared.upload(
                    form(), with: URLRequest(url: server.url(status: 500, bytes: 1 << 20)),
                    acceptableStatusCodes: 200..<300,
                    responseBody: .chunks { response, piece in received.take(response.statusCode, piece) })
            }
            #expect(received.seen.statuses == [200])
        }

        /// A `.chunks` closure that throws stops the upload with its error, and the rest is not waited for: the
        /// answer never ends.
        @Test func aThrowingChunkHandlerStopsTheUpload() async throws {
            struct Enough: Error {}
            let server = try await LargeAnswerServer()
            await #expect(throws: Enough.self) {
                _ = try await URLSession.shared.upload(
                    form(), with: URLRequest(url: server.url(bytes: nil)),
                    responseBody: .chunks { _, _ in throw Enough() })
            }
            #expect(try await sentOnceSettled(server).hungUp)
        }
    }
}

/// What a `.chunks` closure saw: statuses in order of first piece, bytes, and the pieces in a file, in order.
private final class Received: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = NSLock()
    private var statuses: [Int] = []
    private var count = 0
    private let file: FileHandle

    init(to url: URL) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
            throw CocoaError(.fileWriteUnknown)
        }
        file = try FileHandle(forWritingTo: url)
    }

    deinit {
        try? file.close()
    }

    func take(_ status: Int, _ piece: Data) {
        lock.lock()
        defer { lock.unlock() }
        if statuses.last != status { statuses.append(status) }
        file.write(piece)
        count += piece.count
    }

    var seen: (statuses: [Int], count: Int) {
        lock.lock()
        defer { lock.unlock() }
        return (statuses, count)
    }
}
