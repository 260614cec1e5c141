import Foundation
import MultipartStream
import MultipartStreamTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// `.resumable` against a server that does not speak the draft: it must behave exactly as `.stream`, and never
    /// send a part of the form. (The state machine itself is checked against SwiftNIO's NIOResumableUpload through a
    /// fault-injecting proxy by Benchmarks/resumable-check.sh, in CI.)
    @Suite(.serialized) struct ResumableUploadTests {
        let directory: TemporaryDirectory
        let form: MultipartFormData

        init() throws {
            directory = try TemporaryDirectory()
            var form = MultipartFormData()
            form.append("Ada", name: "author")
            try form.append(
                fileURL: directory.file("clip.bin", contents: Data(repeating: 9, count: 2 << 20)), name: "clip")
            self.form = form
        }

        @Test func aPlainServerGetsTheWholeFormOnceAndNothingPartial() async throws {
            let server = try await UploadServer()
            let reports = ProgressReports()
            let (data, response) = try await URLSession(configuration: .ephemeral).upload(
                form, with: URLRequest(url: server.url()), strategy: .resumable, progress: reports.append)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            let seen = try server.seen(in: data)
            #expect(seen.parts?.count == 2 && UInt64(seen.bytes) == form.contentLength!)
            #expect(seen.contentLength == String(form.contentLength!))
            let log = try await server.log()
            // The OPTIONS that asked in each version, newest first, with no body; then the form, once and whole.
            #expect(log.map(\.method) == ["OPTIONS", "OPTIONS", "OPTIONS", "OPTIONS", "OPTIONS", "POST"])
            #expect(log.filter { $0.method == "OPTIONS" }.allSatisfy { $0.bytes == 0 })
            #expect(log.filter { $0.method == "POST" }.map(\.bytes) == [Int(form.contentLength!)])
            #expect(reports.values.filter { $0.fractionCompleted == 1 }.count == 1)
        }
    }
}
