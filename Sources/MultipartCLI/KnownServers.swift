import Foundation
import MultipartStream

/// What `-C -` found each server to speak, kept beside the saved uploads (`servers/origins.json` in the state
/// directory, by origin: a directory of its own, so that the saved uploads' is left empty when none is), so that a
/// later run to the same origin asks nothing: each run asked five `OPTIONS` of a server without the draft. A server
/// found to speak the draft gets its upload created at once, in the version and with the limits found (one that
/// refuses that creation is asked again, and what it says then is kept); one found to speak none
/// gets the form whole without a question for a day, then is asked again, in case it took up the draft since.
///
/// Read as the saved uploads are: a file that is not this user's own, or does not decode, is no knowledge, and the
/// server is asked. A file that cannot be written costs the next run its questions, nothing more.
struct KnownServers {
    private let directory: SavedUploadDirectory

    /// What is kept in the state directory `directory`.
    init(in directory: URL) {
        self.directory = SavedUploadDirectory(
            directory.appendingPathComponent("servers", isDirectory: true), interopVersions: [])
    }

    /// What a server was found to speak.
    enum Finding: Codable, Equatable {
        /// The draft, in this version and with these limits.
        case speaks(ResumableUpload.KnownServer)
        /// No version of the draft, as found then.
        case speaksNone(since: Date)
    }

    /// How long a server found to speak no draft is taken at its word.
    static let speaksNoneFor: TimeInterval = 24 * 3_600

    /// The largest file read: an origin and its limits take a hundred bytes.
    private static let largestFile = 1 << 20

    private var file: URL { directory.url.appendingPathComponent("origins.json") }

    /// What `origin` was found to speak, if it still holds at `now`.
    func finding(for origin: String, at now: Date = Date()) -> Finding? {
        switch all()[origin] {
        case .speaksNone(let since)? where !(now.timeIntervalSince(since) < Self.speaksNoneFor): nil
        case let finding: finding
        }
    }

    /// Keeps `finding` for `origin`, beside what is kept of the others.
    func keep(_ finding: Finding, for origin: String) {
        var all = all()
        guard all[origin] != finding else { return }
        all[origin] = finding
        guard let data = try? JSONEncoder().encode(all) else { return }
        try? directory.prepare()
        // Not synced: a crash that loses it costs the next run its questions.
        try? directory.replace(file, with: data, syncing: false)
    }

    private func all() -> [String: Finding] {
        guard let data = try? directory.readTrusted(file.path, atMost: Self.largestFile) else { return [:] }
        return (try? JSONDecoder().decode([String: Finding].self, from: data)) ?? [:]
    }
}
