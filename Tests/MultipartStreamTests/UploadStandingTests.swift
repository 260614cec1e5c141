import Foundation
import Testing

@testable import MultipartQueue
@testable import MultipartStream

/// An upload's standing in its one vocabulary: what a record's state makes of it, its column's text and back, the
/// schedule's state it opens as, and the public state that comes of that.
@Suite struct UploadStandingTests {
    private static let standings: [UploadStanding] = [
        .pending, .paused, .completed, .removing, .failed(reason: "the server answered 413\r\nX-Injected: 1"),
        .failed(reason: ""),
    ]

    @Test func everyStandingComesBackFromItsColumn() {
        for standing in Self.standings {
            let reason: String? = if case .failed(let reason) = standing { reason } else { nil }
            #expect(UploadStanding(column: standing.column, reason: reason) == standing, "\(standing)")
        }
        #expect(Set(Self.standings.map(\.column)).count == 5, "one text a case")
        #expect(UploadStanding(column: "running", reason: nil) == nil, "a text no version writes is no standing")
    }

    /// A removal asked for comes before the end and the pause; the end before the pause.
    @Test func aStateMakesItsStanding() {
        let failure = MultipartUploadQueue.Failure(reason: "gone")
        let answer = QueueRecord.Answer(statusCode: 201, headers: [:], body: Data())
        let cases: [(QueueRecord.State, UploadStanding)] = [
            (QueueRecord.State(), .pending),
            (QueueRecord.State(paused: true), .paused),
            (QueueRecord.State(paused: true, outcome: .completed(answer)), .completed),
            (QueueRecord.State(paused: true, outcome: .failed(failure)), .failed(reason: "gone")),
            (QueueRecord.State(paused: true, removing: true, outcome: .completed(answer)), .removing),
        ]
        for (state, standing) in cases { #expect(UploadStanding(state) == standing, "\(state)") }
    }

    /// Each standing opens as the schedule's state, which a caller reads as the public state, its answer and kind of
    /// failure from the row: an upload whose removal was asked goes on as pending until the run removes it.
    @Test func eachStandingIsReadAsThePublicState() {
        let answer = QueueRecord.Answer(statusCode: 413, headers: ["Retry-After": "1"], body: Data("no".utf8))
        let listing = QueueStore.Listing(
            url: nil, added: Date(), sentAgain: 0, files: [], answer: answer, runner: nil, category: .status)
        let expected: [(UploadStanding, MultipartUploadQueue.State)] = [
            (.pending, .pending), (.paused, .paused), (.removing, .pending),
            (.completed, .completed(MultipartUploadQueue.Answer(answer))),
            (
                .failed(reason: "refused"),
                .failed(.init(reason: "refused", category: .status, answer: MultipartUploadQueue.Answer(answer)))
            ),
        ]
        for (standing, state) in expected {
            #expect(standing.scheduled.published(runner: nil, listing: listing) == state, "\(standing)")
        }
        let until = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(QueueSchedule.State.pending.published(runner: 4_242, listing: nil) == .running, "another's send")
        #expect(QueueSchedule.State.running.published(runner: nil, listing: nil) == .running)
        #expect(
            QueueSchedule.State.waiting(until: until).published(runner: nil, listing: nil) == .waiting(until: until))
        #expect(
            QueueSchedule.State.completed.published(runner: nil, listing: nil)
                == .completed(MultipartUploadQueue.Answer(statusCode: nil)), "a row without its answer")
    }
}
