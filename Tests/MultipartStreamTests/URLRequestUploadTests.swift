import Foundation
import MultipartStream
import MultipartStreamTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// `URLRequest(url:multipartFormData:)` for real: URLSession streams the form to a strict server on loopback.
    @Suite struct URLRequestUploadTests {
        @Test func aStreamedRequestReachesAStrictServerIntact() async throws {
            let directory = try TemporaryDirectory()
            var generator = SeededGenerator(seed: 3)
            let fileBody = Data([UInt8].random(count: 5 << 20, using: &generator))
            let streamBody = Data([UInt8].random(count: 100_000, using: &generator))
            var form = MultipartFormData()
            form.append("Summer 2026", name: "album")
            try form.append(fileURL: directory.file("beach.mov", contents: fileBody), name: "video")
            form.append(length: UInt64(streamBody.count), name: "log", fileName: "app.log") {
                InputStream(data: streamBody)
            }

            let server = try await UploadServer()
            let (data, response) = try await URLSession(configuration: .ephemeral).data(
                for: URLRequest(url: server.url(), multipartFormData: form))
            let seen = try server.seen(in: data)
            #expect((response as? HTTPURLResponse)?.statusCode == 200, "\(seen.error ?? "")")
            #expect(seen.method == "POST")
            #expect(seen.contentType == form.contentType)
            #expect(UInt64(seen.bytes) == form.contentLength!)
            #expect(seen.contentLength == String(form.contentLength!))
            #expect(seen.transferEncoding == nil, "the body goes out raw, not chunked")
            #expect(
                seen.parts == [
                    FormPart(name: "album", body: Data("Summer 2026".utf8)),
                    FormPart(name: "video", fileName: "beach.mov", contentType: "video/quicktime", body: fileBody),
                    FormPart(name: "log", fileName: "app.log", contentType: "text/plain", body: streamBody),
                ]
            )
        }

        @Test func aFailingPartFailsTheRequestInsteadOfSendingAShortBody() async throws {
            var form = MultipartFormData()
            form.append("x", name: "first")
            form.append(length: 1 << 20, name: "short") { ScriptedStream(Array(repeating: 7, count: 1_000)) }
            let server = try await UploadServer()
            await #expect(throws: (any Error).self) {
                _ = try await URLSession(configuration: .ephemeral).data(
                    for: URLRequest(url: server.url(), multipartFormData: form))
            }
        }
    }
}
