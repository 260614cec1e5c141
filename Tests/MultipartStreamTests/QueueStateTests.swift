import Foundation
import Testing

@testable import MultipartQueue
@testable import MultipartStream

/// A queued upload's state prints as one line a user can read (`completed (HTTP 201)`), never the answer's headers
/// and body.
@Suite struct QueueStateTests {
    @Test func eachStatePrintsAsOneLine() {
        let answer = MultipartUploadQueue.Answer(
            statusCode: 201, headers: ["Location": "/photos/1", "Set-Cookie": "session=secret"],
            body: Data("{\"id\":1}".utf8))
        let lost = MultipartUploadQueue.Answer(statusCode: nil, headers: [:], body: Data())
        let until = Date(timeIntervalSince1970: 1_800_000_000)
        let said: [(MultipartUploadQueue.State, String)] = [
            (.pending, "pending"), (.running, "running"), (.paused, "paused"),
            (.completed(answer), "completed (HTTP 201)"), (.completed(lost), "completed (its answer lost)"),
            (
                .failed(.init(reason: "photo.jpg changed since it was added")),
                "failed (photo.jpg changed since it was added)"
            ),
            (.waiting(until: until), "waiting until \(until)"),
        ]
        for (state, line) in said {
            #expect("\(state)" == line)
            #expect(String(describing: state) == line)
        }
        #expect("\(answer)" == "HTTP 201")
    }
}
