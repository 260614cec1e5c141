import Foundation
import MultipartStreamTestSupport
import Testing

@testable import MultipartForm
@testable import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The saved state of resumable uploads on disk: what is written, how, and which files are never trusted.
@Suite struct SavedUploadStateTests {
    let directory: TemporaryDirectory
    let states: SavedUploadDirectory
    let key = String(repeating: "ab", count: 32)

    init() throws {
        directory = try TemporaryDirectory()
        states = SavedUploadDirectory(
            directory.path("state/multipart"), interopVersions: ResumableUpload.InteropVersion.spoken)
    }

    private func record(acknowledged: UInt64 = 10) -> SavedUpload {
        SavedUpload(
            method: "POST", requestURL: "http://127.0.0.1:1/upload", uploadURL: "http://127.0.0.1:1/u/1",
            uploadOnOtherOrigin: false, interopVersion: 6, boundary: "b", contentLength: 100,
            fingerprint: String(repeating: "0", count: 64),
            acknowledged: acknowledged, created: Date(timeIntervalSince1970: 1_000_000_000),
            updated: Date(timeIntervalSince1970: 1_000_000_000))
    }

    /// Loads `key`, collecting the reasons it was ignored for.
    private func load() -> (SavedUpload?, [String]) {
        var reasons: [String] = []
        let loaded = states.load(key) { reasons.append("\($0.lastPathComponent): \($1)") }
        return (loaded, reasons)
    }

    private func mode(_ url: URL) throws -> Int {
        try (FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int) ?? -1
    }

    @Test func aRecordIsWrittenPrivatelyAndReadBack() throws {
        try states.prepare()
        try states.save(record(), as: key)
        #expect(try mode(states.url) == 0o700)
        #expect(try mode(states.file(for: key)) == 0o600)
        let (loaded, reasons) = load()
        #expect(loaded == record().sealed() && reasons.isEmpty)
        // Replaced whole, with no temporary file left beside it.
        try states.save(record(acknowledged: 50), as: key)
        #expect(load().0?.acknowledged == 50)
        #expect(try FileManager.default.contentsOfDirectory(atPath: states.url.path) == ["\(key).json"])
        states.remove(key)
        #expect(load().0 == nil && load().1.isEmpty, "no file is no state, and no warning")
    }

    @Test func aDirectoryOthersMayWriteIsRefused() throws {
        try FileManager.default.createDirectory(at: states.url, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: states.url.path)
        let error = try #require(throws: MultipartError.self) { try states.prepare() }
        guard case .stateUnwritable(states.url, _) = error.reason else {
            Issue.record("\(error)")
            return
        }
    }

    @Test(arguments: [
        ("corrupt", Data("{\"format\": 1, \"uploadURL\": ".utf8), "corrupt or truncated"),
        ("truncated", Data(), "corrupt or truncated"),
        ("not json", Data([0xFF, 0x00, 0x13]), "corrupt or truncated"),
    ])
    func aCorruptOrTruncatedFileIsIgnoredWithAWarning(name: String, contents: Data, reason: String) throws {
        try states.prepare()
        try contents.write(to: states.file(for: key))
        let (loaded, reasons) = load()
        #expect(loaded == nil, "\(name)")
        #expect(reasons.count == 1 && reasons[0].contains(reason), "\(name): \(reasons)")
    }

    @Test func aHalfWrittenRecordIsIgnored() throws {
        try states.prepare()
        try states.save(record(), as: key)
        let whole = try Data(contentsOf: states.file(for: key))
        for length in stride(from: 0, to: whole.count, by: 7) {
            try whole.prefix(length).write(to: states.file(for: key))
            #expect(load().0 == nil, "\(length) of \(whole.count) bytes")
        }
    }

    @Test func aRecordOfAnotherFormatOrVersionOrWithABadFieldIsIgnored() throws {
        try states.prepare()
        let flaws: [(reason: String, change: (inout SavedUpload) -> Void)] = [
            ("format 3", { $0.format = 3 }),
            ("another origin", { $0.uploadURL = "http://127.0.0.2:1/u/1" }),
            ("interop version 5, not 6 or 7 or 8 or 9 or 10", { $0.interopVersion = 5 }),
            ("interop version 11", { $0.interopVersion = 11 }),
            ("cannot be requested: its scheme is not http or https", { $0.uploadURL = "file:///etc/passwd" }),
            // A URL no request can reach is ignored as a tampered one is (#44), not tried at every run.
            ("cannot be requested: it has no host", { $0.uploadURL = "http:///u/1" }),
            ("cannot be requested: it holds a user or password", { $0.uploadURL = "http://u:p@127.0.0.1:1/u/1" }),
            (
                "cannot be requested: it is longer than 8192 bytes",
                { $0.uploadURL = "http://127.0.0.1:1/u/1?" + String(repeating: "a", count: 9_000) }
            ),
            ("boundary", { $0.boundary = "bad\r\nboundary" }),
            ("past the form's length", { $0.acknowledged = 101 }),
            ("fingerprint", { $0.fingerprint = "xyz" }),
        ]
        for (reason, change) in flaws {
            var flawed = record()
            change(&flawed)
            try states.save(flawed, as: key)
            let (loaded, reasons) = load()
            #expect(loaded == nil && reasons.count == 1 && reasons[0].contains(reason), "\(reasons)")
        }
    }

    @Test func anUploadURLOnAnotherOriginIsTakenWhereTheRecordSaysTheServerChoseIt() throws {
        try states.prepare()
        var elsewhere = record()
        (elsewhere.uploadURL, elsewhere.uploadOnOtherOrigin) = ("https://uploads.example/u/1", true)
        try states.save(elsewhere, as: key)
        #expect(load().0?.uploadURL == "https://uploads.example/u/1")
    }

    /// One character changed anywhere in the file, as a disk or a hand would: the record is ignored with a warning,
    /// unless what it holds is unchanged (a space for a tab between fields).
    @Test func aRecordChangedAnywhereIsIgnored() throws {
        try states.prepare()
        try states.save(record(), as: key)
        let whole = try Data(contentsOf: states.file(for: key))
        var ignored = 0
        for index in whole.indices {
            var changed = whole
            changed[index] = whole[index] == UInt8(ascii: "1") ? UInt8(ascii: "2") : UInt8(ascii: "1")
            try changed.write(to: states.file(for: key))
            let (loaded, reasons) = load()
            #expect(loaded == nil || loaded == record().sealed(), "byte \(index): \(String(describing: loaded))")
            if loaded == nil {
                ignored += 1
                #expect(reasons.count == 1, "byte \(index)")
            }
        }
        #expect(ignored == whole.count, "every change of a byte to a digit changes the record or its JSON")
    }

    /// Pruning removes this user's records past their lifetime, and nothing else.
    @Test func onlyRecordsPastTheirLifetimeThatNoProcessSendsArePruned() throws {
        try states.prepare()
        let now = Date()
        func key(_ n: Int) -> String { String(repeating: String(n), count: 64) }
        var expired = record()
        expired.expires = now.addingTimeInterval(-1)
        var stale = record()
        stale.updated = now.addingTimeInterval(-8 * 86_400)
        var alive = record()
        alive.expires = now.addingTimeInterval(60)
        alive.updated = now.addingTimeInterval(-30 * 86_400)
        var recent = record()
        recent.updated = now.addingTimeInterval(-6 * 86_400)
        for (n, record) in [(1, expired), (2, stale), (3, alive), (4, recent), (5, expired), (6, expired)] {
            try states.save(record, as: key(n))
        }
        let held = try states.lock(key(5))
        defer { held.release() }
        try Data("{ not a record".utf8).write(to: states.file(for: key(7)))
        let removed = states.prune(except: key(6), now: now)
        #expect(Set(removed) == [states.file(for: key(1)), states.file(for: key(2))])
        let left = try FileManager.default.contentsOfDirectory(atPath: states.url.path).filter { $0.hasSuffix(".json") }
        #expect(
            Set(left) == Set([3, 4, 5, 6, 7].map { "\(key($0)).json" }), "the live, the held, the excepted, the foreign"
        )
    }

    @Test func aFileOfAnotherUserOrThatOthersMayWriteOrALinkIsIgnored() throws {
        try states.prepare()
        try states.save(record(), as: key)
        var reasons: [String] = []
        let stranger = SavedUploadDirectory(states.url, interopVersions: states.interopVersions, owner: geteuid() &+ 1)
        #expect(stranger.load(key) { reasons.append($1) } == nil)
        #expect(reasons.count == 1 && reasons[0].contains("belongs to user"), "\(reasons)")

        try FileManager.default.setAttributes([.posixPermissions: 0o666], ofItemAtPath: states.file(for: key).path)
        #expect(load().0 == nil && load().1.first?.contains("others may write") == true)

        states.remove(key)
        let elsewhere = directory.path("elsewhere.json")
        try states.save(record(), as: "other")
        try FileManager.default.moveItem(at: states.file(for: "other"), to: elsewhere)
        try FileManager.default.createSymbolicLink(at: states.file(for: key), withDestinationURL: elsewhere)
        #expect(load().0 == nil && load().1.first?.contains("cannot be opened") == true, "a link is not followed")
    }

    @Test func aHugeFileIsNotRead() throws {
        try states.prepare()
        try Data(count: 1 << 20).write(to: states.file(for: key))
        #expect(load().0 == nil && load().1.first?.contains("more than a record of its kind holds") == true)
    }

    @Test func oneProcessHoldsAnUploadsLockAtATime() throws {
        try states.prepare()
        let held = try states.lock(key)
        let error = try #require(throws: MultipartError.self) { _ = try states.lock(key) }
        guard case .uploadInProgress(let file) = error.reason else {
            Issue.record("\(error)")
            return
        }
        #expect(file == states.file(for: key))
        held.release()
        let again = try states.lock(key)
        again.release()
        #expect(try FileManager.default.contentsOfDirectory(atPath: states.url.path).isEmpty, "the lock file goes")
    }

    @Test func theStandardDirectoryFollowsXDGStateHome() {
        // The process's environment is read as it is: either answer is checked against it.
        let url = MultipartResumption.standardStateDirectory(named: "multipart")
        let environment = ProcessInfo.processInfo.environment
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            #expect(url.path == URL(fileURLWithPath: state).appendingPathComponent("multipart").path)
        } else {
            #expect(url.path.hasSuffix("/.local/state/multipart"))
        }
    }

    // MARK: The form's fingerprint and key

    @Test func theFingerprintFollowsTheBoundaryTheLengthAndEveryPartAndFile() throws {
        let file = try directory.file("log.txt", contents: Data("first".utf8))
        func form(_ value: String = "v", boundary: String? = nil, type: String? = nil) throws -> MultipartFormData {
            var form = try boundary.map { try MultipartFormData(boundary: $0) } ?? MultipartFormData()
            form.append(Data(value.utf8), name: "field", mimeType: type)
            try form.append(fileURL: file, name: "log")
            return form
        }
        let request = URLRequest(url: URL(string: "http://127.0.0.1/upload")!)
        let base = try form(boundary: "sameLength1")
        #expect(try form(boundary: "sameLength1").savedUploadFingerprint == base.savedUploadFingerprint)
        #expect(
            try form(boundary: "sameLength2").savedUploadFingerprint != base.savedUploadFingerprint,
            "a boundary of the same length swapped into a record")
        #expect(try form("w").savedUploadFingerprint != base.savedUploadFingerprint, "a value")
        #expect(try form(type: "text/csv").savedUploadFingerprint != base.savedUploadFingerprint, "a header")
        #expect(try form("w").savedUploadKey(for: request) == base.savedUploadKey(for: request), "same shape")
        // The same size, other bytes: the modification time moves.
        let before = base.savedUploadFingerprint
        try Data("other".utf8).write(to: file)
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: 5)], ofItemAtPath: file.path)
        let changed = try form()
        #expect(changed.savedUploadFingerprint != before)
        #expect(changed.savedUploadKey(for: request) == base.savedUploadKey(for: request), "found again, and deleted")
        var other = request
        other.url = URL(string: "http://127.0.0.1/elsewhere")
        #expect(base.savedUploadKey(for: other) != base.savedUploadKey(for: request), "another URL")
        other = request
        other.httpMethod = "PUT"
        #expect(base.savedUploadKey(for: other) != base.savedUploadKey(for: request), "another method")
        var streamed = base
        streamed.append(InputStream(data: Data("x".utf8)), length: 1, name: "s")
        #expect(streamed.savedUploadFingerprint == nil && streamed.savedUploadKey(for: request) == nil)
    }

    @Test func aFormRebuiltWithTheSavedBoundaryIsByteEqual() throws {
        var form = MultipartFormData()
        form.append("value", name: "field")
        var saved = try MultipartFormData(boundary: form.boundary)
        saved.append("value", name: "field")
        var next = MultipartFormData()
        next.append("value", name: "field")
        let rebuilt = try #require(next.replacingBoundary(with: form.boundary))
        #expect(try rebuilt.encode() == (try saved.encode()))
        #expect(next.replacingBoundary(with: "bad\r\n") == nil)
        #expect(next.replacingBoundary(with: "value") == nil, "a part holds it")
    }

    @Test func theDigestIsSHA256() throws {
        var generator = SeededGenerator(seed: 9)
        for count in [0, 1, 55, 56, 63, 64, 65, 1_000, 100_000] {
            let bytes = Data([UInt8].random(count: count, using: &generator))
            var digest = SHA256()
            digest.update(bytes.prefix(count / 3))
            digest.update(Array(bytes.dropFirst(count / 3)))
            let file = try directory.file("digest-\(count)", contents: bytes)
            #expect(digest.hexDigest() == (try sha256sum(file)), "\(count) bytes")
        }
    }
}
