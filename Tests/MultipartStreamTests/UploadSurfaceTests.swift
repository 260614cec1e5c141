import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionSuites {
    /// What `upload(_:with:strategy:headers:acceptableStatusCodes:responseBody:progress:)` offers a newcomer beyond
    /// the bytes (#43): fresh headers on every request on every strategy, opt-in status validation, and a `Progress`
    /// that Swift 6 code reads without a lock of its own.
    @Suite(.serialized) struct UploadSurfaceTests {
        let directory: TemporaryDirectory
        let form: MultipartFormData

        init() throws {
            directory = try TemporaryDirectory()
            var generator = SeededGenerator(seed: 43)
            var form = MultipartFormData()
            form.append("Ada", name: "author")
            try form.append(
                fileURL: directory.file("photo.jpg", contents: Data([UInt8].random(count: 1 << 20, using: &generator))),
                name: "photo")
            self.form = form
        }

        static let strategies: [(String, MultipartUploadStrategy)] = [
            ("automatic", .automatic), ("stream", .stream), ("file", .file),
            ("paced", .stream(pacing: MultipartPacing(packetSize: 1 << 20, delay: 0))),
        ]

        // MARK: Fresh headers

        /// The form's own request, and the resend after a 307 (asked again, so a fresh value), on every strategy
        /// that is not resumable (the resumable ones are in `ResumableDraftServerTests` and `SavedUploadTests`).
        @Test(arguments: strategies.map(\.0))
        func everyRequestCarriesTheHooksFreshHeaders(name: String) async throws {
            let strategy = try #require(Self.strategies.first { $0.0 == name }?.1)
            let server = try await UploadServer()
            let counter = Counter()
            let seenMethods = Recorded<String>()
            let headers = MultipartHeaders.fresh { request in
                seenMethods.append(request.httpMethod ?? "")
                return ["Authorization": "Bearer t\(counter.next())", "X-Tag": name]
            }
            let (data, _) = try await URLSession.shared.upload(
                form, with: URLRequest(url: server.url("/redirect/307")), strategy: strategy, headers: headers)
            let seen = try server.seen(in: data)
            #expect(seen.authorization == "Bearer t2" && seen.tag == name, "the resend's own fresh token")
            #expect(seen.parts?.count == 2 && seen.bytes == Int(form.contentLength!))
            let log = try await server.log()
            #expect(log.map(\.authorization) == ["Bearer t1", "Bearer t2"], "\(log)")
            #expect(
                seenMethods.values == ["POST", "POST"], "the hook sees the method sent, not URLRequest(url:)'s GET")
        }

        /// A 401 to a token the hook has refreshed since is sent once more with the fresh one; a hook that gives the
        /// same headers again leaves the 401 as the answer.
        @Test(arguments: strategies.map(\.0))
        func a401IsSentAgainOnceWithFreshHeaders(name: String) async throws {
            let strategy = try #require(Self.strategies.first { $0.0 == name }?.1)
            let server = try await UploadServer()
            let counter = Counter()
            // Node's /auth wants Basic u:p: the first token is stale.
            let refreshing = MultipartHeaders.fresh { _ in
                ["Authorization": counter.next() == 1 ? "Basic c3RhbGU6eA==" : "Basic dTpw"]
            }
            let (data, response) = try await URLSession.shared.upload(
                form, with: URLRequest(url: server.url("/auth")), strategy: strategy, headers: refreshing)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try server.seen(in: data).parts?.count == 2)
            #expect(try await server.log().map(\.authorization) == ["Basic c3RhbGU6eA==", "Basic dTpw"])

            let stale = MultipartHeaders.fresh { _ in ["Authorization": "Basic c3RhbGU6eA=="] }
            let (_, refused) = try await URLSession.shared.upload(
                form, with: URLRequest(url: server.url("/auth")), strategy: strategy, headers: stale)
            #expect((refused as? HTTPURLResponse)?.statusCode == 401)
            #expect(try await server.log().count == 3, "the same headers are not sent again")
        }

        @Test func theHooksErrorFailsTheUploadBeforeAnyByte() async throws {
            struct Expired: Error {}
            let server = try await UploadServer()
            await #expect(throws: Expired.self) {
                _ = try await URLSession.shared.upload(
                    form, with: URLRequest(url: server.url()), headers: .fresh { _ in throw Expired() })
            }
            // Failing at the resend after a redirect: the upload fails with it, and nothing more is sent.
            let counter = Counter()
            await #expect(throws: Expired.self) {
                _ = try await URLSession.shared.upload(
                    form, with: URLRequest(url: server.url("/redirect/307")),
                    headers: .fresh { _ in
                        if counter.next() > 1 { throw Expired() }
                        return [:]
                    })
            }
            #expect(try await server.log().map(\.path) == ["/redirect/307"])
        }

        // MARK: Validation

        @Test(arguments: [413, 500])
        func anUnacceptableStatusThrowsWithTheResponseAndItsBody(status: Int) async throws {
            let server = try await UploadServer()
            let error = try await #require(throws: MultipartError.self) {
                _ = try await URLSession.shared.upload(
                    form, with: URLRequest(url: server.url("/status/\(status)")), acceptableStatusCodes: 200..<300)
            }
            guard case .unacceptableStatus(status, let body) = error.reason else {
                Issue.record("\(error)")
                return
            }
            #expect(String(decoding: body, as: UTF8.self) == "the server says no\nsecond line\n")
            #expect(error.response?.statusCode == status && error.category == .status)
            #expect(error.description.contains("answered \(status)"), "\(error)")
            // Without validation, the default, the response is the answer.
            let (_, response) = try await URLSession.shared.upload(
                form, with: URLRequest(url: server.url("/status/\(status)")))
            #expect((response as? HTTPURLResponse)?.statusCode == status)
        }

        @Test func anAcceptableStatusIsTheAnswer() async throws {
            let server = try await UploadServer()
            let (data, response) = try await URLSession.shared.upload(
                form, with: URLRequest(url: server.url("/status/201")), acceptableStatusCodes: 200..<300)
            #expect((response as? HTTPURLResponse)?.statusCode == 201)
            #expect(String(decoding: data, as: UTF8.self) == "the server says no\nsecond line\n")
        }

        // MARK: Progress

        /// A `Progress` observed from another task, as a view model would, with no lock of the caller's: it only
        /// rises, never passes its total, and ends at the form's length.
        @Test(arguments: strategies.map(\.0) + ["resumable"])
        func aProgressIsKeptUpToDateForAnyTaskToRead(name: String) async throws {
            let strategy = try #require((Self.strategies + [("resumable", .resumable)]).first { $0.0 == name }?.1)
            let server = try await UploadServer()
            // Larger than loopback's socket buffers, so that the slow server's reading (64 KiB each 10 ms) paces
            // what is handed out.
            var form = MultipartFormData()
            try form.append(
                fileURL: directory.file("large.bin", contents: Data(count: 3 << 20)), name: "large")
            let progress = Progress(totalUnitCount: 0)
            let upload = Task { [form] in
                try await URLSession.shared.upload(
                    form, with: URLRequest(url: server.url("/slow?ms=10")), strategy: strategy, progress: progress)
            }
            let watcher = Task { () -> [Int64] in
                var seen: [Int64] = []
                let stopwatch = Stopwatch()
                // Bounded: an upload that fails never finishes its progress.
                while !progress.isFinished && !Task.isCancelled && stopwatch.seconds < 60 {
                    seen.append(progress.completedUnitCount)
                    try? await Task.sleep(nanoseconds: 2_000_000)
                }
                seen.append(progress.completedUnitCount)
                return seen
            }
            let (data, _) = try await upload.value
            let seen = await watcher.value
            #expect(try server.seen(in: data).bytes == Int(form.contentLength!))
            let total = Int64(form.contentLength!)
            #expect(progress.totalUnitCount == total && progress.completedUnitCount == total)
            #expect(progress.fractionCompleted == 1)
            #expect(seen == seen.sorted(), "only rises")
            #expect(seen.allSatisfy { $0 <= total })
            #expect(Set(seen).count > 2, "seen in between: \(Set(seen).sorted())")
        }

        // MARK: A Progress that tells the truth

        enum Ending: String, CaseIterable {
            case success, refusedStatus, networkFailure, cancelled
        }

        /// Finished only when the upload succeeded; cancelled only when it was; a refused status or a refused
        /// connection leaves it neither (the failure is what the upload throws).
        @Test(arguments: Ending.allCases)
        func aProgressIsFinishedOnlyWhenTheUploadSucceeded(ending: Ending) async throws {
            let server = try await UploadServer()
            var form = MultipartFormData()
            try form.append(fileURL: directory.file("large.bin", contents: Data(count: 3 << 20)), name: "large")
            let url =
                switch ending {
                case .success: server.url()
                case .refusedStatus: server.url("/status/500")
                case .networkFailure: URL(string: "http://127.0.0.1:1/upload")!
                case .cancelled: server.url("/slow")
                }
            let progress = Progress(totalUnitCount: 0)
            let upload = Task { [form] in
                try await URLSession.shared.upload(
                    form, with: URLRequest(url: url), acceptableStatusCodes: 200..<300, progress: progress)
            }
            if ending == .cancelled {
                try await Stopwatch.wait(atMost: 10) { progress.completedUnitCount == 0 }
                upload.cancel()
            }
            let result = await upload.result
            let total = Int64(form.contentLength!)
            #expect(progress.totalUnitCount == total)
            switch ending {
            case .success:
                #expect(throws: Never.self) { try result.get() }
                #expect(progress.isFinished && progress.completedUnitCount == total && !progress.isCancelled)
            case .refusedStatus, .networkFailure, .cancelled:
                #expect(throws: (any Error).self) { try result.get() }
                #expect(!progress.isFinished, "\(progress.completedUnitCount) of \(total)")
                #expect(progress.completedUnitCount < total)
                #expect(progress.isCancelled == (ending == .cancelled))
            }
        }

        /// `progress.cancel()`, as a Cancel button calls it, cancels the upload: it throws `CancellationError` within
        /// 1 s (where the test runs alone, `measuredAlone`; 5 s beside other suites, ``CancelBound``), and nothing
        /// more is reported.
        @Test(.tags(.measuredAlone)) func cancellingTheProgressCancelsTheUpload() async throws {
            let server = try await UploadServer()
            var form = MultipartFormData()
            try form.append(fileURL: directory.file("large.bin", contents: Data(count: 8 << 20)), name: "large")
            let progress = Progress(totalUnitCount: 0)
            let handlerRuns = Recorded<Int>()
            progress.cancellationHandler = { handlerRuns.append(1) }
            let upload = Task { [form] in
                try await URLSession.shared.upload(
                    form, with: URLRequest(url: server.url("/slow")), progress: progress)
            }
            try await Stopwatch.wait(atMost: 10) { progress.completedUnitCount == 0 }
            let stopwatch = Stopwatch()
            progress.cancel()
            await #expect(throws: CancellationError.self) { _ = try await upload.value }
            #expect(
                stopwatch.seconds < CancelBound.seconds(promised: 1),
                "the upload ended \(stopwatch.seconds) s after the cancel")
            let count = progress.completedUnitCount
            #expect(count < Int64(form.contentLength!) && !progress.isFinished)
            #expect(try await server.log().isEmpty, "no complete form reached the server")
            // Foundation calls it on a queue of its own.
            try await Stopwatch.wait(atMost: 5) { handlerRuns.values.isEmpty }
            #expect(handlerRuns.values.count == 1, "the caller's own cancellationHandler ran too")
        }

        /// A resend shows: after a 401 the hook answers, and after a 307, the form goes out again, and the closure's
        /// values go back to its start rather than sitting at 100%; the Progress ends finished, once.
        @Test(arguments: ["/auth", "/redirect/307"])
        func aResendShowsInTheProgress(path: String) async throws {
            let server = try await UploadServer()
            let reports = ProgressReports()
            let headers = MultipartHeaders.fresh { _, reason in
                if case .unauthorized = reason { return ["Authorization": "Basic dTpw"] }
                return [:]
            }
            let (data, _) = try await URLSession.shared.upload(
                form, with: URLRequest(url: server.url(path)), headers: headers, acceptableStatusCodes: 200..<300,
                progress: reports.append)
            #expect(try server.seen(in: data).bytes == Int(form.contentLength!))
            let sent = reports.values.map(\.bytesSent)
            let total = form.contentLength!
            let firstWhole = try #require(sent.firstIndex(of: total), "\(sent)")
            #expect(sent[firstWhole...].contains { $0 < total }, "the resend went back: \(sent)")
            #expect(sent.last == total)

            let progress = Progress(totalUnitCount: 0)
            _ = try await URLSession.shared.upload(
                form, with: URLRequest(url: server.url(path)), headers: headers, progress: progress)
            #expect(progress.isFinished && progress.completedUnitCount == Int64(total))
        }

        /// A stream of unknown length: indeterminate (-1) until it is known, then the form's length.
        @Test func aProgressOfAStreamOfUnknownLengthLearnsItsTotal() async throws {
            let server = try await UploadServer()
            var form = MultipartFormData()
            form.append(InputStream(data: Data(count: 200_000)), name: "pipe", fileName: "pipe.bin")
            let progress = Progress(totalUnitCount: 0)
            #expect(form.contentLength == nil)
            let (data, _) = try await URLSession.shared.upload(
                form, with: URLRequest(url: server.url()), progress: progress)
            let seen = try server.seen(in: data)
            #expect(progress.totalUnitCount == Int64(seen.bytes) && progress.completedUnitCount == Int64(seen.bytes))
        }
    }
}

/// A count that a `@Sendable` closure takes the next of.
final class Counter: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Lock()
    private var value = 0

    func next() -> Int {
        lock.withLock {
            value += 1
            return value
        }
    }
}

/// Values recorded from `@Sendable` closures, in order.
final class Recorded<Value: Sendable>: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = Lock()
    private var list: [Value] = []

    func append(_ value: Value) {
        lock.withLock { list.append(value) }
    }

    var values: [Value] { lock.withLock { list } }
}
