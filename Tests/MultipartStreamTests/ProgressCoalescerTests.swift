import Testing

@testable import MultipartForm
@testable import MultipartStream

/// ``ProgressCoalescer``: the one place an upload's progress is bounded, and settled at the count a request ended
/// with.
@Suite struct ProgressCoalescerTests {
    private let total: UInt64 = 1 << 20

    @Test func reportsThatAreNotDueAreDroppedAndTheSettledCountIsTheLast() {
        let reports = ProgressReports()
        let coalescer = ProgressCoalescer(totalBytes: total, handler: reports.append)
        coalescer.report(1_000)
        // Due only if 100 ms passed in between.
        coalescer.report(60_000)
        #expect(reports.values.first?.bytesSent == 1_000)
        coalescer.settle(at: 62_000)
        #expect(reports.values.last?.bytesSent == 62_000, "the count the request ended with is reported")
        coalescer.settle(at: 62_000)
        coalescer.settle(at: 50_000)
        #expect(reports.values.filter { $0.bytesSent == 62_000 }.count == 1, "a count is reported once")
        #expect(reports.values.last?.bytesSent == 62_000, "reports only rise")
    }

    @Test func aHundredPercentComesOnceWhetherReportedOrSettled() {
        let reports = ProgressReports()
        let coalescer = ProgressCoalescer(totalBytes: total, handler: reports.append)
        coalescer.report(total)
        coalescer.settle(at: total)
        #expect(reports.values.map(\.bytesSent) == [total])
        let settled = ProgressReports()
        let other = ProgressCoalescer(totalBytes: total, handler: settled.append)
        other.settle(at: total)
        other.report(total)
        #expect(settled.values.map(\.bytesSent) == [total])
    }

    @Test func nothingComesAfterFinish() {
        let reports = ProgressReports()
        let coalescer = ProgressCoalescer(totalBytes: total, handler: reports.append)
        coalescer.report(100)
        coalescer.finish()
        coalescer.settle(at: 500_000)
        coalescer.report(total)
        #expect(reports.values.map(\.bytesSent) == [100])
    }
}
