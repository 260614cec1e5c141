import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// Outages through the library's API, as the command's are tested (`OutageCommandTests`): a proxy resets the upload's
    /// connection 64 MiB into a 256 MiB form, and every connection after it for a while. Serialized with the other
    /// URLSession suites: a test that holds Linux URLSession's one thread stalls every other upload.
    @Suite(.longRun) struct OutageTests {
        let directory: TemporaryDirectory

        init() throws {
            directory = try TemporaryDirectory()
        }

        /// A 256 MiB form with a fixed boundary, and what the server must process for it.
        private func bigForm() throws -> (MultipartFormData, DraftServer.Form) {
            let file = directory.path("big.bin")
            _ = FileManager.default.createFile(atPath: file.path, contents: nil)
            let handle = try FileHandle(forWritingTo: file)
            let block = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 151 &+ $0 >> 10) })
            for _ in 0..<256 { try handle.write(contentsOf: block) }
            try handle.close()
            var form = try MultipartFormData(boundary: "outage-boundary")
            form.append("backup", name: "title")
            try form.append(fileURL: file, name: "file")
            let expected = directory.path("expected.multipart")
            try form.writeEncodedData(to: expected)
            return (form, DraftServer.Form(bytes: Int(form.contentLength!), sha256: try sha256sum(expected)))
        }

        /// What went twice: the PATCH bodies the server read past the form's length.
        private func resent(_ server: DraftServer, form: DraftServer.Form) throws -> Int {
            try server.log().filter { $0.method == "PATCH" }.reduce(0) { $0 + $1.bytes } - form.bytes
        }

        /// `.resumable` with the defaults waits out a 45 s outage: at most 15 tries meanwhile, the next within 15 s of
        /// the network's return, the form once and whole, at most 8 MiB of it twice.
        @Test func theDefaultsWaitOutAFortyFiveSecondOutage() async throws {
            let server = try await DraftServer()
            let proxy = try await FaultProxy(to: server.port, cuts: ["outage:64M:45"])
            let (form, expected) = try bigForm()
            let request = URLRequest(url: proxy.url(server.url(scenario: "relative-location")))
            let (_, response) = try await within(seconds: 240, "the upload through the outage") {
                try await URLSession(configuration: .ephemeral).upload(form, with: request, strategy: .resumable)
            }
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try server.forms() == [expected])
            #expect(try resent(server, form: expected) <= 8 << 20)
            let seen = try proxy.stop()
            #expect(seen.outageTries >= 1 && seen.outageTries <= 15, "\(seen.outageTries) tries during the outage")
            let back = try #require(seen.firstAfterOutage)
            #expect(back - (seen.outageEnd ?? 0) <= 15, "sent again \(back - (seen.outageEnd ?? 0)) s after")
        }

        /// `maximumWaitWithoutProgress: 10` with saved state through a 30 s outage: a typed error within 10 to 30 s of
        /// its start, the state and the server's upload kept; once the network is back, the same upload sends only the
        /// rest.
        @Test func anOutageLongerThanTheBoundKeepsTheUploadForTheNextRun() async throws {
            let server = try await DraftServer()
            let proxy = try await FaultProxy(to: server.port, cuts: ["outage:64M:30"])
            let (form, expected) = try bigForm()
            let request = URLRequest(url: proxy.url(server.url(scenario: "relative-location")))
            var policy = MultipartResumption(maximumWaitWithoutProgress: 10)
            policy.stateDirectory = directory.path("state")
            let error = try await #require(throws: MultipartError.self) {
                _ = try await within(seconds: 120, "the upload to end") { [policy] in
                    try await URLSession(configuration: .ephemeral).upload(
                        form, with: request, strategy: .resumable(policy))
                }
            }
            let ended = Date().timeIntervalSince1970
            let outageBegan = try #require(try proxy.seen().outageEnd) - 30
            let took = ended - outageBegan
            guard case .resumeSaved = error.reason,
                case .outageOutlasted(let seconds, let acknowledged, _)? = (error.underlying as? MultipartError)?.reason
            else {
                Issue.record("\(error)")
                return
            }
            #expect(seconds >= 10 && took >= 10 && took <= 30, "ended \(took) s into the outage, \(seconds) s stalled")
            #expect(try FileManager.default.contentsOfDirectory(atPath: policy.stateDirectory!.path).count == 1)
            let held = try server.log().filter { $0.method == "PATCH" }.reduce(0) { $0 + $1.bytes }
            #expect(held >= 60 << 20, "the server holds what came before the outage: \(held)")
            // What the server said it has, never more: nothing, when every connection since the drop was reset.
            #expect(acknowledged <= held, "\(acknowledged) said acknowledged; the server held \(held)")
            #expect(try !server.log().contains { $0.method == "DELETE" }, "the server's upload was deleted")

            try await waitFor("the outage to end", upTo: 60, every: 0.5) {
                (try? loopbackGet(proxy.url(URL(string: "http://127.0.0.1/log")!))) != nil
            }
            let before = try server.log().count
            let (_, response) = try await within(seconds: 120, "the resumed upload") { [policy] in
                try await URLSession(configuration: .ephemeral).upload(
                    form, with: request, strategy: .resumable(policy))
            }
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try server.forms() == [expected])
            let patches = try server.log().dropFirst(before).filter { $0.method == "PATCH" }
            #expect(patches.first?.offset == String(held), "resumed where the server stood: \(patches)")
            #expect(patches.reduce(0) { $0 + $1.bytes } == expected.bytes - held, "only the rest went")
        }
    }
}
