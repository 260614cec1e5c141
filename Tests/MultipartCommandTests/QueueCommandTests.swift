import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartCLI
@testable import MultipartQueue
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct QueueOptionTests {
    @Test func queueOptionsParse() throws {
        let add = try Options(parsing: ["--queue", "/tmp/q", "-F", "a=1", "http://a.example/"])
        #expect(add.queue == "/tmp/q" && !add.runsQueue)
        let run = try Options(parsing: ["--queue=/tmp/q", "--run", "--parallel", "5", "-H", "Authorization: Bearer t"])
        #expect(run.runsQueue && run.parallel == 5)
        #expect(try Options(parsing: ["--queue", "q", "--retry", "3f2a"]).queueChange == .retry("3f2a"))
        #expect(try Options(parsing: ["--queue", "q", "--remove", "3f2a"]).queueChange == .remove("3f2a"))
        #expect(try Options(parsing: ["--queue", "q", "--list"]).queueChange == .list)
        #expect(try Options(parsing: ["--queue", "q", "--remove-completed"]).queueChange == .removeCompleted)
        #expect(try Options(parsing: ["--queue", "q", "--pause", "3f2a"]).queueChange == .pause("3f2a"))
        #expect(try Options(parsing: ["--queue", "q", "--resume", "3f2a"]).queueChange == .resume("3f2a"))
        #expect(try Options(parsing: ["--queue", "q", "--prioritize", "3f2a"]).queueChange == .prioritize("3f2a"))
        let keyed = try Options(parsing: ["--queue", "q", "--key", "k", "-F", "a=1", "http://a.example/"])
        #expect(keyed.queueKey == "k" && keyed.queueChange == nil)
        // curl's --retry N, without a queue, is still a number of retries.
        #expect(try Options(parsing: ["--retry", "3", "-F", "a=1", "http://a.example/"]).retryOption == 3)
    }

    @Test(arguments: [
        (["--run"], "give it with --queue DIR"),
        (["--queue", "q", "--run", "-F", "a=1", "http://a.example/"], "-F with --queue DIR --run: it is kept"),
        (["--queue", "q", "--run", "http://a.example/"], "a URL is kept with each upload"),
        (["--queue", "q", "-F", "a=1"], "give -F and the URL"),
        (["--queue", "q", "--parallel", "2", "-F", "a=1", "http://a.example/"], "--parallel with --queue DIR adding"),
        (["--queue", "q", "-C", "-", "-F", "a=1", "http://a.example/"], "resumable already"),
        (["--queue", "q", "--run", "--parallel", "0"], "from 1 to 64"),
        (["--queue", "q", "--list", "-F", "a=1", "http://a.example/"], "-F with --queue DIR --list"),
        (["--queue", "q", "--list", "--remove-completed"], "one of --list"),
        (["--queue", "q", "--run", "--key", "k"], "--key with --queue DIR --run: it is kept"),
        (["--key", "k", "-F", "a=1", "http://a.example/"], "give it with --queue DIR"),
        (["--retry", "abc", "-F", "a=1", "http://a.example/"], "expected a number of retries"),
    ])
    func badQueueOptions(arguments: [String], message: String) throws {
        let error = try #require(throws: UsageError.self) { try Options(parsing: arguments) }
        #expect(error.message.contains(message), "\(error.message)")
    }
}

extension CommandLineTests {
    /// `multipart --queue DIR -F ... URL`, printing the upload's ID.
    func enqueue(_ index: Int, to url: URL, queue: String) async throws -> (id: String, form: DraftServer.Form) {
        let arguments = ["--boundary", "queued-\(index)", "-F", "n=\(index)", "-F", "file=@f-\(index).bin"]
        let added = try await run(["--queue", queue] + arguments + [url.absoluteString])
        #expect(added.status == 0, "\(added.stderr)")
        let written = try await run(["-s"] + arguments + ["-o", "e-\(index).multipart"])
        #expect(written.status == 0, "\(written.stderr)")
        let expected = directory.path("e-\(index).multipart")
        let bytes = try FileManager.default.attributesOfItem(atPath: expected.path)[.size] as? Int ?? 0
        let id = String(decoding: added.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return (id, DraftServer.Form(bytes: bytes, sha256: try sha256sum(expected)))
    }

    /// 24 files of 8 MiB queued, and a 25th whose file is deleted, then `--run` through a link of 10 MB/s that the
    /// draft server shares among its uploads, killed with SIGKILL 6 times at random moments and started again:
    /// every form on the server, byte-exact, and once unless the queue says it went again; never more than 3 uploads
    /// in flight at the server; at most 48 MiB sent twice; all 24 completed, the 25th failed alone; a further run
    /// sends nothing. A kill that lands after a creation reached the server and before its `Location` was saved
    /// rightly leaves that upload resource unused (the next run creates another): at most one such creation for each
    /// kill, made in the run that was killed, and none else.
    @Test(.longRun) func aQueueKilledSixTimesDeliversEveryFormOnce() async throws {
        // As NIOResumableUpload: a creation sent again is another upload resource.
        let server = try await DraftServer()
        try server.ignoreIdempotencyKeys()
        let queue = directory.path("queue").path
        var generator = SeededGenerator(seed: 55)
        var queued: [(id: String, form: DraftServer.Form)] = []
        var gone = ""
        for index in 0..<25 {
            try generator.writeFile(at: directory.path("f-\(index).bin"), size: 8 << 20)
            let added = try await enqueue(index, to: server.url(scenario: "paced"), queue: queue)
            if index == 12 {
                gone = added.id
                try FileManager.default.removeItem(at: directory.path("f-\(index).bin"))
            } else {
                queued.append(added)
            }
        }
        // The kills come from a thread of their own, at moments the test chose: awaited on the pool of threads that
        // the synchronous tests beside it keep busy, a kill could come after the run had ended. An upload takes
        // about 2.5 s: a third of the link.
        let moments = (0..<6).map { _ in Double.random(in: 0.2...2.5, using: &generator) }
        // The server log's entries each killed run made: where a creation the kill left unused may be.
        let killed = LockedValue<[Range<Int>]>([])
        // What SQLite's integrity check says of the database after each kill.
        let integrity = LockedValue<[String]>([])
        try await onAThreadOfItsOwn { [self] in
            for (round, moment) in moments.enumerated() {
                let first = try server.log().count
                let creations = try server.log().filter { $0.method == "POST" }.count
                let process = try start(["--queue", queue, "--run"], stderr: directory.path("run-\(round).err"))
                // Once this run creates an upload (however loaded the machine), at a random moment of the time its
                // append takes: the kill's moment is the test's input, not a wait for anything.
                do {
                    try waitFor(
                        "run \(round) to send", upTo: 60, ended: { process.exitedWithStatus },
                        until: { try server.log().filter { $0.method == "POST" }.count > creations })
                } catch  where !process.isRunning && process.terminationStatus == 4 {
                    // The earlier runs left nothing to send.
                    break
                }
                Thread.sleep(forTimeInterval: moment)
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                integrity.withLock { $0.append(queueIntegrity(in: queue)) }
                let end = try server.log().count
                killed.withLock { $0.append(first..<end) }
            }
        }
        #expect(integrity.withLock { $0.allSatisfy { $0 == "ok" } }, "\(integrity.withLock { $0 })")
        let (last, _) = try await runQueue(queue, upTo: 240)
        #expect(last.status == 4, "one failed: \(last.stderr)")

        let uploads = try await MultipartUploadQueueSnapshot(directory: directory.path("queue"))
        #expect(uploads.completed == queued.map(\.id), "all 24 completed, in order: \(uploads)")
        #expect(uploads.failed == [gone], "the one whose file is gone failed, alone: \(uploads)")
        let most = try server.mostInFlight()
        #expect(most == 3, "3 uploads at a time at the server, never more: \(most)")
        let forms = try server.forms()
        for (id, form) in queued {
            let copies = forms.filter { $0 == form }.count
            #expect(copies >= 1, "\(id) is on the server")
            #expect(copies == 1 + (uploads.sentAgain[id] ?? 0), "\(id): \(copies) copies; the queue says")
        }
        let again = uploads.sentAgain.values.reduce(0, +)
        #expect(forms.count == 24 + again)
        // Resumed, not started over: one upload resource a form (and one more for each it says went again), and
        // the kills met uploads in flight, which the next run asked the server about. The server numbers its upload
        // resources in order of creation (`/u/N`); one that no request ever reached again was left by a kill.
        let log = try server.log()
        let creations = log.indices.filter { log[$0].method == "POST" }
        let used = Set(
            log.filter { $0.path.hasPrefix("/u/") }.map { $0.path.split(separator: "/").last.map(String.init) ?? "" })
        let unused = creations.enumerated().filter { !used.contains(String($0.offset + 1)) }.map(\.element)
        let kills = killed.withLock { $0 }
        #expect(creations.count - unused.count == 24 + again, "one upload resource a form that went")
        #expect(unused.count <= kills.count, "at most one unused creation a kill: \(unused.count) for \(kills.count)")
        for entry in unused {
            #expect(
                kills.contains { $0.contains(entry) }, "an unused creation that no kill explains: log entry \(entry)")
        }
        // Every creation carries its upload's Idempotency-Key: one a form, the same after a kill.
        let keys = creations.map { log[$0].idempotency ?? "none" }
        #expect(Set(keys) == Set(queued.map { "\"\($0.id)\"" }), "one key an upload, whatever the kills: \(keys)")
        let said = (0..<6).map { (try? String(contentsOf: directory.path("run-\($0).err"), encoding: .utf8)) ?? "" }
        #expect(
            log.contains { $0.method == "HEAD" },
            "no kill met an upload in flight: \(log.map { "\($0.method) \($0.path) \($0.bytes)" }) \(said)")
        let sent = log.filter { $0.method == "PATCH" }.reduce(0) { $0 + $1.bytes }
        #expect(sent - queued.reduce(0) { $0 + $1.form.bytes } <= 48 << 20, "\(sent) bytes of PATCH bodies")

        let before = try server.log().count
        let (further, _) = try await runQueue(queue, upTo: 60)
        #expect(further.status == 4, "the failed one stays failed: \(further.stderr)")
        #expect(try server.log().count == before, "a further run sends nothing")
    }

    /// A 1 MiB file queued for `server`'s `scenario`, which takes the whole form and never answers; the run killed
    /// once the server processed it, then run again, which must succeed.
    private func wentWholeAndKilled(
        _ server: DraftServer, _ scenario: String
    ) async throws -> (id: String, form: DraftServer.Form) {
        let queue = directory.path("queue").path
        var generator = SeededGenerator(seed: 63)
        try generator.writeFile(at: directory.path("f-0.bin"), size: 1 << 20)
        let added = try await enqueue(0, to: server.url(scenario: scenario), queue: queue)
        try await onAThreadOfItsOwn { [self] in
            let process = try start(["--queue", queue, "--run"], stderr: directory.path("run-0.err"))
            try waitFor(
                "the whole form to reach the application", upTo: 60, ended: { process.exitedWithStatus },
                until: { try server.forms().count == 1 })
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        let (second, _) = try await runQueue(queue, upTo: 60)
        #expect(second.status == 0, "\(second.stderr)")
        return added
    }

    /// A form that went whole (the server's `OPTIONS` said no draft), whose server processed it while the run was
    /// killed before the answer, goes again as a resumable upload once the server speaks the draft: two copies on the
    /// server, and the queue says it went again. The record said the form went whole before it went, so the kill
    /// could not hide it.
    @Test func aFormSentWholeAndKilledIsCountedWhenItGoesAgain() async throws {
        let server = try await DraftServer()
        let (id, form) = try await wentWholeAndKilled(server, "plain-first")
        let uploads = try await MultipartUploadQueueSnapshot(directory: directory.path("queue"))
        #expect(uploads.completed == [id], "\(uploads)")
        #expect(try server.forms() == [form, form], "the whole form, then the resumable upload's")
        #expect(uploads.sentAgain == [id: 1], "the queue says it went again: \(uploads.sentAgain)")
        let log = try server.log()
        #expect(log.filter { $0.method == "POST" && $0.complete == nil }.count == 1, "one plain POST")
        #expect(log.filter { $0.method == "PATCH" }.count == 1, "then one resumable upload")
    }

    /// A form that goes whole to a server without the draft, which processed it and whose answer a kill lost, goes
    /// again with the same `Idempotency-Key`: a server that honours it answers as it did and takes the form once
    /// (exactly once); one that does not takes it twice, as the queue says (at least once).
    @Test(arguments: [true, false])
    func anIdempotencyKeyMakesAWholeFormSentAgainExactlyOnce(honoured: Bool) async throws {
        let server = try await DraftServer(version: 5)
        if !honoured { try server.ignoreIdempotencyKeys() }
        let (id, form) = try await wentWholeAndKilled(server, "plain-lost")
        let posts = try server.log().filter { $0.method == "POST" }
        #expect(posts.count == 2 && posts.allSatisfy { $0.idempotency == "\"\(id)\"" }, "\(posts)")
        #expect(try server.forms() == Array(repeating: form, count: honoured ? 1 : 2))
        let uploads = try await MultipartUploadQueueSnapshot(directory: directory.path("queue"))
        #expect(uploads.completed == [id] && uploads.sentAgain == [id: 1], "\(uploads)")
    }

    /// A queued upload whose completing append dropped unanswered, and whose `HEAD` then says every byte with no
    /// `Upload-Complete`, is never recorded completed on that word: in version 6 an empty append with `?1` completes
    /// it with the application's answer; from version 7 it fails naming the breach, and the application never got
    /// the form.
    @Test(arguments: [6, 9])
    func aQueuedUploadIsCompletedOnlyWhereTheServerSaidSo(version: Int) async throws {
        let server = try await DraftServer(version: version)
        let queue = directory.path("queue").path
        var generator = SeededGenerator(seed: 630)
        try generator.writeFile(at: directory.path("f-0.bin"), size: 1 << 20)
        let (id, form) = try await enqueue(0, to: server.url(scenario: "drop-at-end-no-field"), queue: queue)
        let (ran, _) = try await runQueue(queue, upTo: 60)
        let found = try await MultipartUploadQueue(directory: directory.path("queue")).uploads
        let state = try #require(found.first { $0.id.rawValue == id }?.state)
        if version == 6 {
            #expect(ran.status == 0, "\(ran.stderr)")
            guard case .completed(let answer) = state else {
                Issue.record("completed by the empty append: \(state)")
                return
            }
            #expect(answer.statusCode == 200, "the application's own answer, not one taken as lost")
            #expect(try server.forms() == [form])
        } else {
            #expect(ran.status == 4, "\(ran.stderr)")
            guard case .failed(let reason) = state else {
                Issue.record("never completed without ?1: \(state)")
                return
            }
            #expect(reason.reason.contains("without Upload-Complete"), "\(reason)")
            #expect(reason.category == .resumable && reason.answer == nil, "a breach, not a refusal: \(reason)")
            #expect(try server.forms().isEmpty)
        }
    }

    /// Trials of 4 queued forms against a server of a random version whose every answer is drawn at random (see the
    /// `hostile` scenario: forms sent whole and left unanswered, drops, completions dropped, `HEAD`s without
    /// `Upload-Complete`), each run killed at a random moment, then a run against the same server behaving well.
    /// Whatever happened: an upload is completed only where the application processed its form, the server never
    /// holds more copies of a form than one plus what the queue says went again, and every upload ends completed or
    /// failed. `MULTIPART_HOSTILE_TRIALS` sets how many trials (5 unless set), `MULTIPART_HOSTILE_SEED` their seed.
    @Test(.longRun) func aHostileServerAndKillsNeverHideACopyOrFakeACompletion() async throws {
        let environment = ProcessInfo.processInfo.environment
        let trials = environment["MULTIPART_HOSTILE_TRIALS"].flatMap(Int.init) ?? 5
        var generator = SeededGenerator(seed: environment["MULTIPART_HOSTILE_SEED"].flatMap(UInt64.init) ?? 6_300)
        var tally: [String: Int] = [:]
        for trial in 0..<trials {
            let version = Int.random(in: 6...10, using: &generator)
            let server = try await DraftServer(version: version)
            let queue = directory.path("queue-\(trial)").path
            var forms: [String: DraftServer.Form] = [:]
            for index in 0..<4 {
                let size = Int.random(in: 1...(512 << 10), using: &generator)
                try generator.writeFile(at: directory.path("f-\(index).bin"), size: UInt64(size))
                let added = try await enqueue(index, to: server.url(scenario: "hostile"), queue: queue)
                forms[added.id] = added.form
            }
            try server.setHostile(seed: generator.next())
            let moments = (0..<3).map { _ in Double.random(in: 0.05...1.5, using: &generator) }
            let integrity = LockedValue<[String]>([])
            try await onAThreadOfItsOwn { [self] in
                for (round, moment) in moments.enumerated() {
                    let process = try start(
                        ["--queue", queue, "--run"], stderr: directory.path("hostile-\(round).err"))
                    Thread.sleep(forTimeInterval: moment)
                    kill(process.processIdentifier, SIGKILL)
                    process.waitUntilExit()
                    integrity.withLock { $0.append(queueIntegrity(in: queue)) }
                }
            }
            #expect(integrity.withLock { $0.allSatisfy { $0 == "ok" } }, "trial \(trial): \(integrity.withLock { $0 })")
            try server.setHostile(seed: nil)
            let (last, _) = try await runQueue(queue, upTo: 120)
            #expect([0, 4].contains(last.status), "trial \(trial): \(last.stderr)")
            let received = try server.forms()
            let found = try await MultipartUploadQueue(directory: directory.path("queue-\(trial)")).uploads
            for upload in found {
                let form = try #require(forms[upload.id.rawValue])
                let copies = received.filter { $0 == form }.count
                let seen = "trial \(trial), version \(version), \(upload.id): \(upload.state), \(copies) copies"
                switch upload.state {
                case .completed(let answer):
                    tally[answer.statusCode == nil ? "completed, answer lost" : "completed", default: 0] += 1
                    #expect(copies >= 1, "completed, and the application never got it: \(seen)")
                case .failed:
                    tally["failed", default: 0] += 1
                default:
                    Issue.record("every upload ends completed or failed: \(seen)")
                }
                let log = try server.log().map {
                    "\($0.method) \($0.path) \($0.version ?? "-") \($0.offset ?? "-") \($0.complete ?? "-") \($0.bytes)"
                }
                #expect(
                    copies <= 1 + upload.sentAgain,
                    "more copies than the queue says: \(seen), \(upload.sentAgain) again; the server saw \(log)")
                if upload.sentAgain > 0 { tally["sent again", default: 0] += upload.sentAgain }
            }
        }
        print("hostile trials: \(trials), \(tally.sorted { $0.key < $1.key })")
    }

    /// A refusal is never a completion: a creation refused with 413 or 401 (a JSON body, the form never sent), and a
    /// `HEAD` that says complete in a field version 9 does not read (`Upload-Incomplete: ?0`) or at an offset short
    /// of the form's length. `--run` exits 4 naming each as failed; `-w '%{http_code}'` prints the refusal's status
    /// (000 where no answer refused it); `-C -` alone ends each the same way, with exit 4.
    @Test func aRefusalOrAHeadThatDoesNotSayCompleteFailsTheQueueRunAndTheCommandAlike() async throws {
        let server = try await DraftServer(version: 9)
        let queue = directory.path("queue").path
        let scenarios = ["create-refused-413", "create-refused-401", "legacy-head", "complete-short"]
        var ids: [String: String] = [:]
        for (index, scenario) in scenarios.enumerated() {
            _ = try directory.file("f-\(index).bin", contents: Data(repeating: UInt8(index), count: 30_000))
            ids[scenario] = try await enqueue(index, to: server.url(scenario: scenario), queue: queue).id
        }
        // Created first, as a form over 1 MiB is: the HEADs' lies are told about an upload that has appends.
        let ran = try await run([
            "--queue", queue, "--run", "--single-request-limit", "0", "-w", "%{http_code} %{url_effective}\\n",
        ])
        #expect(ran.status == 4, "\(ran.stderr)")
        let written = String(decoding: ran.stdout, as: UTF8.self)
        for (scenario, id) in ids {
            #expect(ran.stderr.contains("\(id) failed: "), "\(scenario): \(ran.stderr)")
            #expect(!ran.stderr.contains("\(id) completed"), "\(scenario): \(ran.stderr)")
            let code = scenario.hasPrefix("create-refused-") ? String(scenario.suffix(3)) : "000"
            #expect(written.contains("\(code) \(server.url(scenario: scenario))\n"), "\(scenario): \(written)")
        }
        #expect(ran.stderr.hasSuffix("multipart: 0 completed, 4 failed\n"), "\(ran.stderr)")
        for (index, scenario) in scenarios.enumerated() {
            let alone = try await run([
                "-sS", "-C", "-", "--single-request-limit", "0", "-m", "30", "-F", "file=@f-\(index).bin",
                server.url(scenario: scenario).absoluteString,
            ])
            #expect(alone.status == 4, "\(scenario): \(alone.stderr)")
        }
        #expect(try server.forms().isEmpty)
    }

    /// A credential given to an add is refused, and never written: it goes to `--run`, on every request.
    @Test func aQueueTakesCredentialsAtRunOnly() async throws {
        let server = try await DraftServer()
        let queue = directory.path("queue").path
        _ = try directory.file("f-0.bin", contents: Data(count: 1_000))
        let refused = try await run([
            "--queue", queue, "-u", "ada:secret", "-F", "file=@f-0.bin", server.url().absoluteString,
        ])
        #expect(
            refused.status == 2 && refused.stderr.contains("give -H and -u to --queue DIR --run"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("run(on:headers:pacing:)"), "a Swift API named to a command user")
        let id = try await enqueue(0, to: server.url(scenario: "auth"), queue: queue).id
        let (sent, _) = try await runQueue(queue, upTo: 60, ["-u", "u:p"])
        #expect(sent.status == 0 && sent.stderr.contains("\(id) completed: HTTP 200"), "\(sent.stderr)")
        for path in try FileManager.default.subpathsOfDirectory(atPath: queue) {
            let text = (try? String(contentsOfFile: queue + "/" + path, encoding: .utf8)) ?? ""
            #expect(!text.contains("secret") && !text.contains("dTpw"), "\(path) holds a credential")
        }
    }

    /// The queue steered from the command as a curl user would: `--key` twice adds once; `--list` shows each upload
    /// with its state, key and file; a deleted file fails its upload, the run exits 4 naming it; `--retry ID` of a
    /// file still missing exits 3 naming it, and once the file is back (other bytes, another length) sends it as it
    /// is now; `--remove-completed` leaves nothing; an ID the queue does not hold exits 2.
    @Test func theQueueIsListedRetriedAndClearedFromTheCommand() async throws {
        let server = try await DraftServer()
        let queue = directory.path("queue").path
        var ids: [String] = []
        for index in 0..<3 {
            _ = try directory.file("f-\(index).bin", contents: Data(repeating: UInt8(index), count: 20_000))
            let add = [
                "--queue", queue, "--key", "photo \(index)", "--boundary", "keyed-\(index)", "-F",
                "file=@f-\(index).bin",
                server.url().absoluteString,
            ]
            let (first, second) = (try await run(add), try await run(add))
            #expect(first.status == 0 && second.status == 0, "\(first.stderr)\(second.stderr)")
            #expect(first.stdout == second.stdout, "a key adds once")
            ids.append(String(decoding: first.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let listed = String(decoding: try await run(["--queue", queue, "--list"]).stdout, as: UTF8.self)
            .split(separator: "\n")
        #expect(listed.count == 3, "\(listed)")
        for (index, line) in listed.enumerated() {
            #expect(line.hasPrefix("\(ids[index])  pending  "), "\(line)")
            #expect(line.contains("key photo \(index)") && line.contains("/f-\(index).bin"), "\(line)")
        }

        try FileManager.default.removeItem(at: directory.path("f-1.bin"))
        let (sent, _) = try await runQueue(queue, upTo: 60)
        #expect(sent.status == 4, "\(sent.stderr)")
        #expect(sent.stderr.contains("\(ids[1]) failed") && sent.stderr.contains("f-1.bin"), "\(sent.stderr)")
        #expect(sent.stderr.hasSuffix("multipart: 2 completed, 1 failed\n"), "\(sent.stderr)")
        // A run that ends with the failure names it again, rather than exiting 4 with no word.
        let (idle, _) = try await runQueue(queue, upTo: 60)
        #expect(idle.status == 4 && idle.stderr.contains("\(ids[1]) failed"), "\(idle.stderr)")
        #expect(!idle.stderr.contains("\(ids[0]) completed"), "said once, by the run that completed it")
        #expect(idle.stderr.hasSuffix("multipart: 2 completed, 1 failed\n"), "\(idle.stderr)")
        let failed = String(decoding: try await run(["--queue", queue, "--list"]).stdout, as: UTF8.self)
        #expect(
            failed.contains("\(ids[1])  failed (") && failed.contains("\(ids[0])  completed (HTTP 200)"), "\(failed)")

        let missing = try await run(["--queue", queue, "--retry", ids[1]])
        #expect(missing.status == 3 && missing.stderr.contains("f-1.bin"), "\(missing.stderr)")
        _ = try directory.file("f-1.bin", contents: Data(repeating: 9, count: 33_333))
        let retried = try await run(["--queue", queue, "--retry", ids[1]])
        #expect(retried.status == 0, "\(retried.stderr)")
        let (again, _) = try await runQueue(queue, upTo: 60)
        #expect(again.status == 0 && again.stderr.contains("\(ids[1]) completed: HTTP 200"), "\(again.stderr)")
        #expect(again.stderr.hasSuffix("multipart: 3 completed, 0 failed\n"), "\(again.stderr)")
        let written = try await run(["-s", "--boundary", "keyed-1", "-F", "file=@f-1.bin", "-o", "now.multipart"])
        #expect(written.status == 0)
        let now = DraftServer.Form(
            bytes: try Data(contentsOf: directory.path("now.multipart")).count,
            sha256: try sha256sum(directory.path("now.multipart")))
        #expect(try server.forms().count == 3 && server.forms().contains(now), "the file as it is now")

        let notFailed = try await run(["--queue", queue, "--retry", ids[0]])
        #expect(notFailed.status == 2 && notFailed.stderr.contains("has not failed"), "\(notFailed.stderr)")
        #expect(try await run(["--queue", queue, "--remove-completed"]).status == 0)
        #expect(try await run(["--queue", queue, "--list"]).stdout.isEmpty)
        let gone = try await run(["--queue", queue, "--remove", ids[2]])
        #expect(gone.status == 2 && gone.stderr.contains("no upload \(ids[2])"), "\(gone.stderr)")
        #expect(queueRecords(in: queue) == 0)

        // The script that added them, run again after the clear, adds nothing: each key's upload completed. It prints
        // that upload's ID and says so; --again adds it anew.
        let add = [
            "--queue", queue, "--key", "photo 0", "--boundary", "keyed-0", "-F", "file=@f-0.bin",
            server.url().absoluteString,
        ]
        let cleared = try await run(add)
        #expect(cleared.status == 0 && String(decoding: cleared.stdout, as: UTF8.self) == "\(ids[0])\n")
        #expect(
            cleared.stderr.contains("not added") && cleared.stderr.contains("photo 0")
                && cleared.stderr.contains("--again"), "\(cleared.stderr)")
        #expect(try await run(["--queue", queue, "--list"]).stdout.isEmpty)
        let anew = try await run(add + ["--again"])
        let id = String(decoding: anew.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(anew.status == 0 && !id.isEmpty && id != ids[0] && anew.stderr.isEmpty, "\(anew.stderr)")
        let listedAnew = String(decoding: try await run(["--queue", queue, "--list"]).stdout, as: UTF8.self)
        #expect(listedAnew.hasPrefix("\(id)  pending  ") && listedAnew.contains("key photo 0"), "\(listedAnew)")
    }

    /// 30 files added each with its key by a loop of `multipart --queue DIR --key K`, killed (the loop and the add
    /// under way, SIGKILL) at a random moment, then the same loop run to its end twice: 30 uploads, each key once, and
    /// a run sends each file once.
    @Test(.longRun) func addsKilledAndRunAgainQueueEachKeyOnce() async throws {
        let server = try await DraftServer()
        let queue = directory.path("queue").path
        var forms: [DraftServer.Form] = []
        for index in 0..<30 {
            _ = try directory.file("f-\(index).bin", contents: Data(repeating: UInt8(index), count: 10_000 + index))
            let written = try await run([
                "-s", "--boundary", "keyed-\(index)", "-F", "file=@f-\(index).bin", "-o", "e.multipart",
            ])
            #expect(written.status == 0, "\(written.stderr)")
            let expected = directory.path("e.multipart")
            forms.append(DraftServer.Form(bytes: try Data(contentsOf: expected).count, sha256: try sha256sum(expected)))
        }
        let loop = """
            for i in $(seq 0 29); do
              '\(Self.executable.path)' --queue queue --key "photos/$i.bin" --boundary "keyed-$i" -F "file=@f-$i.bin" \
                '\(server.url().absoluteString)' > /dev/null || exit 1
            done
            """
        let killedAt = Int.random(in: 3...25)
        try await onAThreadOfItsOwn { [self] in
            try killed(loop) { adding in
                try waitFor("\(killedAt) adds", upTo: 120, ended: { adding.exitedWithStatus }) {
                    queueRecords(in: queue) >= killedAt
                }
                // Within the next add, or the one after: its moment is random, not waited for.
                Thread.sleep(forTimeInterval: Double.random(in: 0...0.1))
            }
        }
        #expect(queueIntegrity(in: queue) == "ok", "killed after \(killedAt) adds")
        for round in 0..<2 {
            let again = try await run([], shell: loop)
            #expect(again.status == 0, "round \(round): \(again.stderr)")
        }
        let listed = String(decoding: try await run(["--queue", queue, "--list"]).stdout, as: UTF8.self).split(
            separator: "\n")
        let keys = listed.compactMap { line in line.firstRange(of: "key photos/").map { line[$0.upperBound...] } }
            .map { $0.prefix { $0 != " " } }
        #expect(listed.count == 30 && Set(keys).count == 30, "each key once, killed after \(killedAt): \(listed)")
        let (sent, _) = try await runQueue(queue, upTo: 120)
        #expect(sent.status == 0 && sent.stderr.hasSuffix("30 completed, 0 failed\n"), "\(sent.stderr)")
        #expect(try server.forms().sorted { $0.sha256 < $1.sha256 } == forms.sorted { $0.sha256 < $1.sha256 })
    }

    /// `--run` in a terminal draws one bar for the whole queue, to 100% of every form's bytes, ended before the last
    /// line; `-s` draws none.
    @Test(.enabled(if: isLinux)) func aRunDrawsOneBarForTheWholeQueueInATerminal() async throws {
        let server = try await DraftServer()
        var total = 0
        for index in 0..<3 {
            _ = try directory.file("f-\(index).bin", contents: Data(repeating: UInt8(index), count: 1 << 20))
            // 64 KiB every 50 ms: about a second a form, all three at once.
            await total += try enqueue(index, to: server.url(scenario: "slow"), queue: "queue").form.bytes
        }
        // `script` gives the command a pseudo-terminal and copies what it shows into typescript.
        let shown = try await run(
            [], shell: "script -qfec '\(Self.executable.path) --queue queue --run' typescript > /dev/null")
        #expect(shown.status == 0, "\(shown.stderr)")
        let screen = try String(contentsOf: directory.path("typescript"), encoding: .utf8)
        let frames = screen.components(separatedBy: "\r[").dropFirst()
        #expect(frames.count >= 3, "\(screen)")
        #expect(frames.count <= 40, "at most 10 redraws a second, whatever the uploads report: \(frames.count)")
        let all = ProgressReporter.bytes(UInt64(total))
        #expect(screen.contains("100%  \(all) / \(all)"), "\(screen)")
        let last = try #require(screen.range(of: "\r\nmultipart: 3 completed, 0 failed\r\n"), "\(screen)")
        #expect(!screen[last.upperBound...].contains("\r["), "no frame after the last line")

        for index in 3..<4 {
            _ = try directory.file("f-\(index).bin", contents: Data(repeating: UInt8(index), count: 1 << 20))
            _ = try await enqueue(index, to: server.url(scenario: "slow"), queue: "queue")
        }
        let silent = try await run(
            [], shell: "script -qfec '\(Self.executable.path) -s --queue queue --run' silent > /dev/null")
        #expect(silent.status == 0, "\(silent.stderr)")
        let quiet = try String(contentsOf: directory.path("silent"), encoding: .utf8)
        #expect(!quiet.contains("\r[") && !quiet.contains("completed"), "\(quiet.debugDescription)")
        #expect(try server.forms().count == 4)
    }

    /// `--pause ID` keeps an upload out of the runs, said in `--list` and in the run's last line, until
    /// `--resume ID`; a resume of an upload that is not paused exits 2.
    @Test func aPausedUploadWaitsForItsResumeFromTheCommand() async throws {
        let server = try await DraftServer()
        let queue = directory.path("queue").path
        var ids: [String] = []
        for index in 0..<2 {
            _ = try directory.file("f-\(index).bin", contents: Data(repeating: UInt8(index), count: 10_000))
            await ids.append(try enqueue(index, to: server.url(), queue: queue).id)
        }
        #expect(try await run(["--queue", queue, "--pause", ids[0]]).status == 0)
        let (sent, _) = try await runQueue(queue, upTo: 60)
        #expect(sent.status == 0 && sent.stderr.hasSuffix("1 completed, 0 failed, 1 paused\n"), "\(sent.stderr)")
        let listed = String(decoding: try await run(["--queue", queue, "--list"]).stdout, as: UTF8.self)
        #expect(listed.contains("\(ids[0])  paused  "), "\(listed)")
        let notPaused = try await run(["--queue", queue, "--resume", ids[1]])
        #expect(notPaused.status == 2 && notPaused.stderr.contains("is not paused"), "\(notPaused.stderr)")
        #expect(try await run(["--queue", queue, "--resume", ids[0]]).status == 0)
        let (rest, _) = try await runQueue(queue, upTo: 60)
        #expect(rest.status == 0 && rest.stderr.hasSuffix("2 completed, 0 failed\n"), "\(rest.stderr)")
        #expect(try server.forms().count == 2)
    }

    /// Ctrl-C while the queue runs: exit 130, and a line that says it was interrupted and what is kept; the next run
    /// sends the rest, each form once.
    @Test func ctrlCSaysTheQueueWasInterruptedAndWhatIsKept() async throws {
        let server = try await DraftServer()
        let queue = directory.path("queue").path
        var forms: [DraftServer.Form] = []
        for index in 0..<2 {
            _ = try directory.file("f-\(index).bin", contents: Data(repeating: UInt8(index), count: 8 << 20))
            // 64 KiB every 50 ms: about 6 s a form, so that the Ctrl-C comes while the first is under way.
            await forms.append(try enqueue(index, to: server.url(scenario: "slow"), queue: queue).form)
        }
        // One at a time: the second waits its turn.
        let first = try start(["--queue", queue, "--run", "--parallel", "1"], stderr: directory.path("first.err"))
        // Watched and interrupted from a thread of its own: a wait on the pool of threads, which the synchronous tests
        // beside it keep busy, saw the creation only once both forms had gone.
        try await onAThreadOfItsOwn {
            try waitFor(
                "the queue's first creation", ended: { first.exitedWithStatus },
                seen: { "\((try? server.log()) ?? [])" },
                until: { try server.log().contains(where: { $0.method == "POST" }) })
            first.interrupt()
            try waitFor("the interrupted run to exit", upTo: 30) { !first.isRunning }
        }
        let said = try String(contentsOf: directory.path("first.err"), encoding: .utf8)
        #expect(first.terminationStatus == 130, "\(said)")
        #expect(said.contains("multipart: interrupted: 2 uploads not completed are kept for the next --run"), "\(said)")
        #expect(said.contains("0 completed, 0 failed, 2 left for the next run"), "\(said)")
        let (rest, _) = try await runQueue(queue, upTo: 120)
        #expect(rest.status == 0 && rest.stderr.hasSuffix("2 completed, 0 failed\n"), "\(rest.stderr)")
        #expect(try server.forms().sorted { $0.sha256 < $1.sha256 } == forms.sorted { $0.sha256 < $1.sha256 })
    }

    /// Steering from another process while a run sends, one upload at a time: a paused upload and a removed one
    /// that have not started are never started, one removed while under way stops within seconds and is deleted on
    /// the server, one moved to the front goes next, and the run sends the rest. Before the queue kept one database every process shares, the run sent
    /// the paused upload and wrote it back completed.
    @Test func anotherProcessSteersARunningQueue() async throws {
        let server = try await DraftServer()
        let queue = directory.path("queue").path
        var added: [(id: String, form: DraftServer.Form)] = []
        for index in 0..<5 {
            // The first takes some 25 s (64 KiB every 50 ms): the others are steered while it goes.
            let (bytes, scenario) = index == 0 ? (32 << 20, "slow") : (10_000 + index, "default")
            _ = try directory.file("f-\(index).bin", contents: Data(repeating: UInt8(index), count: bytes))
            added.append(try await enqueue(index, to: server.url(scenario: scenario), queue: queue))
        }
        let runner = try start(["--queue", queue, "--run", "--parallel", "1"], stderr: directory.path("run.err"))
        try await onAThreadOfItsOwn {
            try waitFor(
                "the first upload's creation", upTo: 60, ended: { runner.exitedWithStatus },
                seen: { "\((try? server.log()) ?? [])" },
                until: { try server.log().contains(where: { $0.method == "POST" }) })
        }
        let sending = String(decoding: try await run(["--queue", queue, "--list"]).stdout, as: UTF8.self)
        #expect(
            sending.contains("\(added[0].id)  running (process \(runner.processIdentifier))  "),
            "another process's listing says who sends what: \(sending)")
        #expect(try await run(["--queue", queue, "--pause", added[1].id]).status == 0)
        #expect(try await run(["--queue", queue, "--remove", added[2].id]).status == 0)
        #expect(try await run(["--queue", queue, "--prioritize", added[4].id]).status == 0)
        #expect(try await run(["--queue", queue, "--remove", added[0].id]).status == 0)
        let errors = directory.path("run.err")
        let said = { @Sendable in (try? String(contentsOf: errors, encoding: .utf8)) ?? "" }
        let stoppedAfter = try await onAThreadOfItsOwn {
            let removed = Stopwatch()
            try waitFor(
                "the removed upload's DELETE", upTo: 60, ended: { runner.exitedWithStatus },
                seen: { "\((try? server.log().map { "\($0.method) \($0.path)" }) ?? []) \(said())" },
                until: { try server.log().contains(where: { $0.method == "DELETE" }) })
            let seconds = removed.seconds
            try waitFor("the run to end", upTo: 60) { !runner.isRunning }
            return seconds
        }
        #expect(runner.terminationStatus == 0, "\(said())")
        // The remove is looked for every half second, and the send stops as a cancel does. A run that never looked
        // sends the rest of the first upload's 25 s, some 20 s after the steering: 10 s fails it, and leaves a loaded
        // machine twenty times the half second.
        #expect(stoppedAfter < 10, "the upload under way was deleted \(stoppedAfter) s after its remove returned")
        #expect(try server.forms() == [added[4].form, added[3].form], "the one moved first, then the one not steered")
        let creations = try server.log().filter { $0.method == "POST" }.count
        #expect(creations == 3, "the paused and the removed upload were never created")
        let listed = String(decoding: try await run(["--queue", queue, "--list"]).stdout, as: UTF8.self)
        #expect(
            listed.contains("\(added[1].id)  paused  ") && listed.contains("\(added[3].id)  completed"), "\(listed)")
        #expect(listed.contains("\(added[4].id)  completed"), "\(listed)")
        #expect(!listed.contains(added[0].id) && !listed.contains(added[2].id), "\(listed)")
        print("steered from another process: the removed upload under way deleted \(stoppedAfter) s after the remove")
    }

    /// A run steered from another process by loops of `--pause`, `--prioritize` and `--resume`, each loop killed
    /// (SIGKILL, with the command under way) at a random moment: after every kill the database passes its integrity
    /// check, and the run, with what a kill left paused resumed and run again, delivers every form once.
    @Test(.longRun) func steeringKilledAtRandomMomentsLeavesAWholeQueue() async throws {
        let server = try await DraftServer()
        let queue = directory.path("queue").path
        var added: [(id: String, form: DraftServer.Form)] = []
        for index in 0..<8 {
            // 1 MiB at 64 KiB every 50 ms: some 0.8 s each, two at a time, while the loops steer them.
            _ = try directory.file("f-\(index).bin", contents: Data(repeating: UInt8(index), count: 1 << 20))
            added.append(try await enqueue(index, to: server.url(scenario: "slow"), queue: queue))
        }
        let runner = try start(["--queue", queue, "--run", "--parallel", "2"], stderr: directory.path("run.err"))
        var integrity: [String] = []
        for _ in 0..<4 {
            let steps = added.map(\.id).shuffled().prefix(4).flatMap { id in
                ["--pause \(id)", "--prioritize \(id)", "--resume \(id)"]
            }
            // A command that finds its upload ended exits 2: the loop goes on.
            let loop = steps.map { "'\(Self.executable.path)' --queue queue \($0) > /dev/null 2>&1" }
                .joined(separator: "\n")
            let killedAfter = Double.random(in: 0.05...1.5)
            try await onAThreadOfItsOwn { [self] in
                // The kill's moment is random, not waited for: nothing here waits on a race.
                try killed(loop) { _ in Thread.sleep(forTimeInterval: killedAfter) }
            }
            integrity.append(queueIntegrity(in: queue))
        }
        try await onAThreadOfItsOwn { try waitFor("the run to end", upTo: 120) { !runner.isRunning } }
        #expect(
            runner.terminationStatus == 0,
            "\((try? String(contentsOf: directory.path("run.err"), encoding: .utf8)) ?? "")")
        #expect(integrity.allSatisfy { $0 == "ok" }, "\(integrity)")
        // What a kill between a pause and its resume left paused goes in a run of its own.
        let listed = String(decoding: try await run(["--queue", queue, "--list"]).stdout, as: UTF8.self)
        for line in listed.split(separator: "\n") where line.contains("  paused  ") {
            let id = String(line.prefix { $0 != " " })
            #expect(try await run(["--queue", queue, "--resume", id]).status == 0)
        }
        let (again, _) = try await runQueue(queue, upTo: 120)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(queueIntegrity(in: queue) == "ok")
        let delivered = try server.forms().sorted { $0.sha256 < $1.sha256 }
        #expect(delivered == added.map(\.form).sorted { $0.sha256 < $1.sha256 }, "each form once")
    }

    /// Runs the shell `loop` in a session of its own, until `moment` returns, then kills the loop and the command
    /// under way with it (SIGKILL to the session's group), and waits for its end.
    private func killed(_ loop: String, at moment: (Process) throws -> Void) throws {
        let looping = Process()
        looping.executableURL = URL(fileURLWithPath: "/usr/bin/setsid")
        looping.arguments = ["/bin/bash", "-c", loop]
        looping.currentDirectoryURL = directory.url
        looping.environment = environment
        try looping.startAlone()
        defer {
            kill(-looping.processIdentifier, SIGKILL)
            looping.waitUntilExit()
        }
        try moment(looping)
    }

    /// `multipart --queue DIR --run` with `more` arguments, killed and failed past `seconds`.
    func runQueue(_ queue: String, upTo seconds: Double, _ more: [String] = []) async throws -> (Run, Date) {
        try await run(["--queue", queue, "--run"] + more, upTo: seconds)
    }
}

/// The queue kept in a directory, as a new process would find it.
private struct MultipartUploadQueueSnapshot: CustomStringConvertible {
    var completed: [String] = []
    var failed: [String] = []
    var sentAgain: [String: Int] = [:]
    var states: [String] = []

    init(directory: URL) async throws {
        let found = try await MultipartUploadQueue(directory: directory).uploads
        for upload in found {
            if case .completed = upload.state { completed.append(upload.id.rawValue) }
            if case .failed = upload.state { failed.append(upload.id.rawValue) }
            if upload.sentAgain > 0 { sentAgain[upload.id.rawValue] = upload.sentAgain }
            states.append("\(upload.id): \(upload.state)")
        }
    }

    var description: String { states.joined(separator: "\n") }
}

/// How many uploads the queue's database in `queue` holds, read as another process reads them (0 for none yet).
func queueRecords(in queue: String) -> Int {
    let path = URL(fileURLWithPath: queue).appendingPathComponent(QueueStore.databaseName).path
    guard FileManager.default.fileExists(atPath: path) else { return 0 }
    var count = 0
    try? SQLiteDatabase(path: path).withConnection { connection throws(SQLiteDatabase.Failure) in
        try connection.run("SELECT count(*) FROM uploads") { count = Int($0.integer(0) ?? 0) }
    }
    return count
}

/// What SQLite's `PRAGMA integrity_check` says of the queue's database in `queue`: "ok" for a whole one.
func queueIntegrity(in queue: String) -> String {
    let path = URL(fileURLWithPath: queue).appendingPathComponent(QueueStore.databaseName).path
    guard FileManager.default.fileExists(atPath: path) else { return "no database at \(path)" }
    var lines: [String] = []
    do {
        try SQLiteDatabase(path: path).withConnection { connection throws(SQLiteDatabase.Failure) in
            try connection.run("PRAGMA integrity_check") { lines.append($0.text(0) ?? "") }
        }
    } catch {
        return "\(error)"
    }
    return lines.joined(separator: "; ")
}
