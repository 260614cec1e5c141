import Foundation

extension SavedUploadDirectory {
    /// How long a saved upload whose server gave no `max-age` is kept after it was last saved.
    static let defaultLifetime: TimeInterval = 7 * 24 * 3_600

    /// The keys of the state files here (`KEY.json`, KEY a digest), in no order.
    private var keys: [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return names.compactMap { name in
            guard name.hasSuffix(".json") else { return nil }
            let key = String(name.dropLast(5))
            return key.utf8.count == 64
                && key.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
                ? key : nil
        }
    }

    /// Every saved upload here that can be trusted, oldest first; each file that cannot is given to `ignored`.
    func records(ignored: (URL, String) -> Void) -> [(key: String, record: SavedUpload)] {
        keys.compactMap { key in load(key, ignored: ignored).map { (key, $0) } }.sorted {
            $0.record.created < $1.record.created
        }
    }

    /// Removes the saved uploads whose lifetime is over at `now`: the server's `max-age`, else
    /// ``defaultLifetime`` since it was last saved. Never one that a process is sending (its lock is held), `except`
    /// (the upload about to run, which says itself that it starts over), nor a file that cannot be trusted: only
    /// this user's own records. Returns the state files removed.
    func prune(except: String? = nil, now: Date = Date()) -> [URL] {
        var removed: [URL] = []
        for key in keys where key != except {
            guard let record = load(key, ignored: { _, _ in }),
                (record.expires ?? record.updated.addingTimeInterval(Self.defaultLifetime)) <= now,
                let lock = try? lock(key)
            else { continue }
            remove(key)
            lock.release()
            removed.append(file(for: key))
        }
        return removed
    }
}
