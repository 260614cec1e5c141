import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Uploads no queue gathers share what their process found of a server (``DiscoveryGate/forProcess(of:)``): a form
/// over 1 MiB, created first by default, asks a server what it speaks once a process, not once an upload, and those
/// that start together ask once. Each trial sends with the defaults, a session of its own each, and checks every form
/// the application processed.
extension URLSessionSuites {
    @Suite struct ProcessDiscoveryTests {
        let directory: TemporaryDirectory

        init() throws {
            directory = try TemporaryDirectory()
        }

        /// A form just over the default one-request limit, so that it is created first, as the defaults do; its
        /// photo's bytes.
        private func form(_ index: Int) throws -> (form: MultipartFormData, photo: Data) {
            var generator = SeededGenerator(seed: 8_000 + UInt64(index))
            let photo = Data([UInt8].random(count: 1_100_000, using: &generator))
            var form = MultipartFormData()
            form.append("photo \(index)\r\nü", name: "caption")
            try form.append(
                fileURL: try directory.file("photo-\(index).jpg", contents: photo), name: "photo",
                fileName: "photo-\(index).jpg", mimeType: "image/jpeg")
            return (form, photo)
        }

        /// What a draft server's application must have processed of `form`.
        private func expected(_ form: MultipartFormData) throws -> DraftServer.Form {
            let file = directory.path("expected-\(UUID())")
            try form.writeEncodedData(to: file)
            return DraftServer.Form(bytes: Int(form.contentLength!), sha256: try sha256sum(file))
        }

        /// `form` sent `.resumable` with the defaults, on a session of its own; the answer.
        private func upload(_ form: MultipartFormData, to url: URL) async throws -> Data {
            let session = URLSession(configuration: .ephemeral)
            defer { session.finishTasksAndInvalidate() }
            let (data, _) = try await within(seconds: 60, "an upload") {
                try await session.upload(
                    form, with: URLRequest(url: url), strategy: .resumable(MultipartResumption()),
                    acceptableStatusCodes: 200..<300)
            }
            return data
        }

        /// The methods of the requests the server saw, in order.
        private func methods(_ draftServer: DraftServer?, _ plainServer: UploadServer?) async throws -> [String] {
            if let draftServer { return try draftServer.log().map(\.method) }
            return try await #require(plainServer).log().map(\.method)
        }

        /// The first upload to a server of the draft asks what it speaks; every later one of the process creates its
        /// upload resource at once, in the version found: a `POST` and its `PATCH`, on sessions of their own.
        @Test func aServerFoundToSpeakTheDraftIsAskedOnceAProcess() async throws {
            let server = try await DraftServer()
            let forms = try (0..<3).map { try form($0).form }
            for form in forms { _ = try await upload(form, to: server.url()) }
            let log = try server.log()
            let probes = log.prefix { $0.method == "OPTIONS" }.count
            #expect(probes >= 1, "the first upload asks")
            #expect(log.filter { $0.method == "OPTIONS" }.count == probes, "\(log.map(\.method)): no other asks")
            let created = log.dropFirst(probes)
            #expect(
                created.map(\.method) == ["POST", "PATCH", "POST", "PATCH", "POST", "PATCH"], "\(log.map(\.method))")
            #expect(Set(created.compactMap(\.version)).count == 1, "in the version the first found")
            #expect(try server.forms() == forms.map(expected))
        }

        /// Three uploads that start together to a server the process knows nothing of ask it once: the others wait
        /// for the first's finding. An upload after them asks nothing: to a server without the draft, one request,
        /// the whole form.
        @Test(arguments: [false, true]) func uploadsThatStartTogetherAskTheirServerOnce(speaksDraft: Bool) async throws
        {
            let draftServer = speaksDraft ? try await DraftServer() : nil
            let plainServer = speaksDraft ? nil : try await UploadServer()
            let url = try draftServer.map { $0.url() } ?? #require(plainServer).url()
            let made = try (0..<4).map(form)
            let answers = try await withThrowingTaskGroup(of: (Int, Data).self) { group in
                for index in 0..<3 { group.addTask { (index, try await upload(made[index].form, to: url)) } }
                return try await group.reduce(into: [Int: Data]()) { $0[$1.0] = $1.1 }
            }
            let methods = try await self.methods(draftServer, plainServer)
            let asked = methods.filter { $0 == "OPTIONS" }.count
            // A server with the draft answers the newest version's question; one without it, each of five.
            #expect(speaksDraft ? asked == 1 : (1...5).contains(asked), "\(methods)")
            let last = try await upload(made[3].form, to: url)
            let after = try await self.methods(draftServer, plainServer)
            #expect(Array(after.dropFirst(methods.count)) == (speaksDraft ? ["POST", "PATCH"] : ["POST"]), "\(after)")
            if let draftServer {
                let wanted = try made.map { try expected($0.form).sha256 }
                #expect(try draftServer.forms().map(\.sha256).sorted() == wanted.sorted())
                return
            }
            let server = try #require(plainServer)
            for (index, answer) in answers.merging([3: last], uniquingKeysWith: { $1 }) {
                let seen = try server.seen(in: answer)
                #expect(seen.parts?.map(\.name) == ["caption", "photo"], "\(index)")
                #expect(seen.parts?.first?.body == Data("photo \(index)\r\nü".utf8), "\(index)")
                #expect(seen.parts?.last?.body == made[index].photo, "\(index): the photo, byte for byte")
            }
        }
    }
}
