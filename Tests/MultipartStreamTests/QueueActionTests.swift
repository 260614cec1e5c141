import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartQueue
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What the queue's actor does with each of its schedule's actions, checked on its database, its events and its
/// progress, with no server: an upload to a port nothing listens on that no action sends.
@Suite struct QueueActionTests {
    let directory: TemporaryDirectory
    let queue: MultipartUploadQueue

    init() throws {
        directory = try TemporaryDirectory()
        queue = try MultipartUploadQueue(directory: directory.path("queue"))
    }

    private func add(key: String? = nil) async throws -> MultipartUploadQueue.ID {
        var form = MultipartFormData()
        form.append("a title", name: "title")
        return try await queue.add(form, with: URLRequest(url: URL(string: "http://127.0.0.1:9/up")!), key: key)
    }

    private var store: QueueStore {
        get throws { try QueueStore(directory.path("queue")) }
    }

    @Test func aWriteChangesTheRecordAndNothingElse() async throws {
        let id = try await add()
        await queue.perform([.write(id, .pauseAsked), .write(id, .moved(priority: 4))])
        let state = try store.read(id.rawValue).state
        #expect(state.paused == true && state.priority == 4)
        #expect(await queue.upload(id)?.state == .pending, "the schedule changes through its events only")
    }

    @Test func anEventIsToldOnceTheProgressCountsIt() async throws {
        let events = queue.events
        let id = try await add()
        await queue.perform([.emit(.paused(id))])
        let heard = try await within(seconds: 10, "two events") {
            var heard: [MultipartUploadQueue.Event] = []
            for await event in events {
                heard.append(event)
                if heard.count == 2 { break }
            }
            return heard
        }
        #expect(heard == [.added(id), .paused(id)])
        #expect(queue.progress.totalUnitCount == Int64(try #require(await queue.upload(id)).contentLength))
    }

    @Test func aCompletionIsWrittenWithTheNextStartsThenToldAndItsStateGone() async throws {
        let id = try await add()
        let events = queue.events
        let answer = MultipartUploadQueue.Answer(statusCode: 201, headers: ["Location": "/u/1"], body: Data("ok".utf8))
        let saved = try store.stateDirectory(of: id.rawValue)
        try FileManager.default.createDirectory(at: saved, withIntermediateDirectories: true)
        await queue.perform([.complete(id, answer)])
        #expect(try store.read(id.rawValue).state.outcome == nil, "not written alone")
        try await queue.recordCompletions()
        #expect(try store.read(id.rawValue).state.outcome == .completed(answer.stored))
        #expect(!FileManager.default.fileExists(atPath: saved.path))
        let heard = try await within(seconds: 10, "the completion's event") { () -> MultipartUploadQueue.Event? in
            for await event in events { return event }
            return nil
        }
        #expect(heard == .completed(id, answer))
    }

    @Test func aForgetAndAClearTakeTheRecordAndStateAndLeaveTheKey() async throws {
        let forgotten = try await add(key: "a")
        let cleared = try await add(key: "b")
        let upload = try #require(await queue.scheduled(forgotten))
        await queue.perform([.forget(upload, givingUp: false), .clear([cleared])])
        #expect(throws: QueueRecord.Damage.self) { try store.read(forgotten.rawValue) }
        #expect(throws: QueueRecord.Damage.self) { try store.read(cleared.rawValue) }
        #expect(try store.removal(ofKey: "a")?.id == forgotten.rawValue)
        #expect(try store.removal(ofKey: "b")?.id == cleared.rawValue)
    }

    @Test func aRemoverIsAnsweredOnce() async throws {
        let id = try await add()
        let queue = queue
        let waiting = Task { await queue.waitForRemoval(of: id) }
        try await within(seconds: 10, "the remover") {
            while await !queue.hasRemover(of: id) { await Task.yield() }
        }
        await queue.perform([.answerRemovers(id, .removed), .answerRemovers(id, .notInQueue)])
        #expect(try await within(seconds: 10, "the answer") { await waiting.value } == .removed)
    }

    @Test func aServerThatSpeaksNoDraftIsForgottenAndAnOutageIsSaid() async throws {
        let origin = try #require(Origin(URL(string: "http://127.0.0.1:9/up")))
        await queue.learned(ResumableUpload.KnownServer(version: .newest, limits: .init()), for: origin)
        #expect(try store.knownServers()[origin.serialized] != nil)
        await queue.perform([.speaksNone(origin)])
        #expect(try store.knownServers()[origin.serialized] == nil)

        let gate = await queue.gate(origin)
        await queue.perform([.serverOut(origin)])
        #expect(gate.isOut)
        await queue.perform([.serverAnswered(origin)])
        #expect(!gate.isOut)
    }

    @Test func aCancelReachesTheSendAndAWakeEndsAnEarlierSleepOnly() async throws {
        let id = try await add()
        let cancelled = LockedValue(false)
        await queue.handCancel(of: id) { cancelled.withLock { $0 = true } }
        await queue.perform([.cancel(id)])
        #expect(cancelled.withLock { $0 })

        let alarm = MultipartUploadQueue.Alarm()
        await queue.sleep(until: Date(timeIntervalSince1970: 100), alarm: alarm)
        await queue.perform([.wake(by: Date(timeIntervalSince1970: 200))])
        #expect(!alarm.isRung, "a sleep that ends first is left")
        await queue.perform([.wake(by: Date(timeIntervalSince1970: 50))])
        #expect(alarm.isRung)
    }
}

extension MultipartUploadQueue {
    fileprivate func scheduled(_ id: ID) -> QueueSchedule.Upload? { schedule.uploads[id] }

    fileprivate func waitForRemoval(of id: ID) async -> Removal {
        await withCheckedContinuation { removers[id, default: []].append($0) }
    }

    fileprivate func hasRemover(of id: ID) -> Bool { removers[id] != nil }

    fileprivate func handCancel(of id: ID, _ cancel: @escaping @Sendable () -> Void) {
        let handle = CancelHandle()
        handle.set(cancel)
        cancels[id] = handle
    }

    fileprivate func sleep(until: Date, alarm: Alarm) {
        sleep = (alarm, until)
    }
}
