import Foundation
import MultipartQueue
import Testing

/// `import MultipartQueue` alone (this file imports nothing else of the package) reaches every type the queue's API
/// names, as the README's queue example does.
@Suite struct QueueReexportTests {
    @Test func theQueuesAPINamesItsTypesThroughItsOneImport() throws {
        var form = MultipartQueue.MultipartFormData()
        form.append("Summer 2026", name: "album")
        let resumption = MultipartResumption(maximumWaitWithoutProgress: 600)
        let pacing = MultipartPacing(bytesPerSecond: 1_000_000)
        let headers: MultipartHeaders = .fresh { _ in [:] }
        #expect(form.contentLength != nil && resumption.maximumWaitWithoutProgress == 600)
        #expect(pacing.packetSize > 0)
        _ = headers
    }
}
