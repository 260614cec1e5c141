import MultipartStream

/// Hands each event to every stream made so far: a view and a logger each read all of them, where one `AsyncStream`
/// would split them between its readers.
final class EventBroadcast<Event: Sendable>: Sendable {
    private typealias Readers = [Int: AsyncStream<Event>.Continuation]
    private let readers = LockedValue<(next: Int, all: Readers)>((0, [:]))

    /// A stream of every event from now on, until its reader stops reading; at most the newest 10,000 wait for a
    /// reader that falls behind.
    func stream() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(10_000))
        let key = readers.withLock { readers in
            defer { readers.next += 1 }
            readers.all[readers.next] = continuation
            return readers.next
        }
        continuation.onTermination = { [readers] _ in _ = readers.withLock { $0.all.removeValue(forKey: key) } }
        return stream
    }

    func yield(_ event: Event) {
        for reader in readers.withLock({ Array($0.all.values) }) { reader.yield(event) }
    }

    /// Ends every stream.
    func finish() {
        for reader in readers.withLock({ Array($0.all.values) }) { reader.finish() }
    }
}
