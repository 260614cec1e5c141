import Foundation
import MultipartStream
import MultipartStreamTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// A refusal is never a completion, on any request of `.resumable`: a creation the application refuses throws
    /// its status as a plain upload's refusal does, and only an answer that says complete in its version's own field,
    /// at the form's whole length, is taken for a form the server holds. Each with the options a user types first.
    @Suite(.serialized) struct RefusalIsNoCompletionTests {
        let directory: TemporaryDirectory
        let form: MultipartFormData

        init() throws {
            directory = try TemporaryDirectory()
            var generator = SeededGenerator(seed: 77)
            var form = MultipartFormData()
            form.append("Summer", name: "album")
            try form.append(
                fileURL: try directory.file(
                    "photo.jpg", contents: Data([UInt8].random(count: 50_000, using: &generator))),
                name: "photo")
            self.form = form
        }

        /// The creation `POST` (none of the form sent yet) answered 400, 401, 403, 405 or 413 with a body, in each
        /// version: `acceptableStatusCodes` throws `unacceptableStatus` with the status, the response and the body,
        /// as for a plain upload; without it the refusal is the answer, its body whole. Nothing follows the refusal
        /// (no append, no `DELETE`), and the application has no form.
        @Test(arguments: [10, 9, 6])
        func aRefusedCreationThrowsWhatAcceptableStatusCodesRefuses(version: Int) async throws {
            let server = try await DraftServer(version: version)
            let session = URLSession(configuration: .ephemeral)
            defer { session.finishTasksAndInvalidate() }
            for status in [400, 401, 403, 405, 413] {
                let request = URLRequest(url: server.url(scenario: "create-refused-\(status)"))
                let before = try server.log().count
                let error = try await #require(throws: MultipartError.self, "\(status) in version \(version)") {
                    _ = try await session.upload(
                        form, with: request, strategy: .resumable(MultipartResumption()),
                        acceptableStatusCodes: 200..<300)
                }
                guard case .unacceptableStatus(let refused, let body) = error.reason else {
                    Issue.record("\(status) in version \(version): \(error)")
                    continue
                }
                #expect(refused == status && error.response?.statusCode == status)
                #expect(String(decoding: body, as: UTF8.self) == "{\"refused\": \(status)}", "\(status)")
                let (data, response) = try await session.upload(
                    form, with: request, strategy: .resumable(MultipartResumption()))
                #expect((response as? HTTPURLResponse)?.statusCode == status)
                #expect(String(decoding: data, as: UTF8.self) == "{\"refused\": \(status)}", "the refusal's body")
                let methods = try server.log().dropFirst(before).map(\.method)
                #expect(!methods.contains("PATCH") && !methods.contains("DELETE"), "\(status): \(methods)")
            }
            #expect(try server.forms().isEmpty)
        }

        /// The append is read whole and answered 503; the `HEAD` that follows answers 204 with every byte and
        /// `Upload-Incomplete: ?0` (the field of versions before 5) but no `Upload-Complete` (`legacy-head`), or with
        /// `Upload-Complete: ?1` at an offset 1,000 bytes short of `Upload-Length` (`complete-short`). From version 7
        /// on neither says the upload completed: a breach that names the fields, never `answerLost`; nothing is
        /// deleted, and a saved upload is kept, resource and state, for a later run to ask again. The application
        /// has no form.
        @Test(arguments: [10, 9])
        func aHeadThatDoesNotSayCompleteIsNoCompletion(version: Int) async throws {
            let server = try await DraftServer(version: version)
            let session = URLSession(configuration: .ephemeral)
            defer { session.finishTasksAndInvalidate() }
            for scenario in ["legacy-head", "complete-short"] {
                for saving in [false, true] {
                    // Created first, as a form over 1 MiB is: the HEAD's word is about an upload with appends.
                    var resumption = MultipartResumption(
                        maximumAttempts: 3, initialDelay: 0.01, maximumDelay: 0.05, singleRequestLimit: 0)
                    let states = directory.path("state-\(version)-\(scenario)")
                    if saving { resumption.stateDirectory = states }
                    let before = try server.log().count
                    let error = try await #require(throws: MultipartError.self, "\(scenario), version \(version)") {
                        _ = try await session.upload(
                            form, with: URLRequest(url: server.url(scenario: scenario)),
                            strategy: .resumable(resumption), acceptableStatusCodes: 200..<300)
                    }
                    switch (scenario, error.reason) {
                    case ("legacy-head", .uploadCompleteMissing(204)): break
                    case ("complete-short", .completeAtShortOffset(let offset, let length?)):
                        #expect(offset + 1_000 == length && length == form.contentLength, "\(error)")
                        #expect(
                            error.description.contains("Upload-Complete: ?1") && error.description.contains("\(offset)")
                        )
                    default: Issue.record("\(scenario), version \(version): \(error)")
                    }
                    #expect(FailureMeaning.of(error) != .answerLost, "\(scenario): never a form the server holds")
                    let methods = try server.log().dropFirst(before).map(\.method)
                    #expect(methods.last == "HEAD" && !methods.contains("DELETE"), "\(scenario): \(methods)")
                    let kept = (try? FileManager.default.contentsOfDirectory(atPath: states.path)) ?? []
                    #expect(kept.isEmpty != saving, "\(scenario), saving \(saving): the state is kept: \(kept)")
                }
            }
            #expect(try server.forms().isEmpty)
        }

        /// In version 6 `Upload-Incomplete: ?0` is how `NIOResumableUpload` says complete, and stays read so: the
        /// server holds the form and its answer was lost.
        @Test func version6ReadsUploadIncompleteAsItsServersWriteIt() async throws {
            let server = try await DraftServer(version: 6)
            let error = try await #require(throws: MultipartError.self) {
                _ = try await URLSession(configuration: .ephemeral).upload(
                    form, with: URLRequest(url: server.url(scenario: "legacy-head")),
                    // Created first, so that there is a HEAD to read.
                    strategy: .resumable(
                        MultipartResumption(
                            maximumAttempts: 3, initialDelay: 0.01, maximumDelay: 0.05, singleRequestLimit: 0)),
                    acceptableStatusCodes: 200..<300)
            }
            guard case .answerLost(let length) = error.reason else {
                Issue.record("\(error)")
                return
            }
            #expect(length == form.contentLength)
        }
    }
}
