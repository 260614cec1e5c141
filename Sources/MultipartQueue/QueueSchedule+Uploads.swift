import Foundation
import MultipartStream

/// What the schedule holds of its uploads: each upload, its rank in the order, the table of them all, and the
/// progress's counts.
extension QueueSchedule {
    /// An upload's place in the order: the caller's latest move first, then the order added.
    struct Rank: Comparable {
        var priority: Int
        var order: Int
        var id: String

        static func < (one: Rank, other: Rank) -> Bool {
            if one.priority != other.priority { return one.priority > other.priority }
            if one.order != other.order { return one.order < other.order }
            return one.id < other.id
        }
    }

    /// The uploads, by ID: in one array, a hundred thousand of them in as little memory as they take, with the place
    /// of each in a dictionary (a dictionary of the uploads themselves would keep twice the room for them).
    struct Table {
        private(set) var values: [Upload] = []
        private var slots: [ID: Int] = [:]

        var isEmpty: Bool { values.isEmpty }

        /// Makes room for `count` uploads at once: a queue opened with a hundred thousand holds them, not the room
        /// that growing by doubling leaves.
        mutating func reserve(_ count: Int) {
            values.reserveCapacity(count)
            slots.reserveCapacity(count)
        }

        subscript(id: ID) -> Upload? {
            get { slots[id].map { values[$0] } }
            set {
                guard let slot = slots[id] else {
                    if let newValue {
                        slots[id] = values.count
                        values.append(newValue)
                    }
                    return
                }
                if let newValue {
                    values[slot] = newValue
                    return
                }
                // The last takes the place of the one removed.
                slots[id] = nil
                let last = values.removeLast()
                guard slot < values.count else { return }
                values[slot] = last
                slots[last.id] = slot
            }
        }
    }

    /// What the schedule knows of one upload, with the few facts of it the queue keeps beside.
    struct Upload: Equatable {
        /// Its ID, which its rank holds: one string, not two.
        var id: ID { ID(rawValue: rank.id) }
        /// Its place in the order added; `nil` for a file that is no record.
        var sequence: Int?
        /// Whether a send of it is under way (`running`, or `waiting` between its own tries).
        var isInFlight = false
        /// What the caller asked of it while it ran, which its end carries out.
        var stopping: Stop?
        var key: String?
        var rank: Rank
        /// Where its requests go (``origin``), held once for every upload to it (``QueueSchedule/add(_:)``).
        var server: SharedOrigin?
        var origin: Origin? { server?.origin }
        var state: State
        /// The last of its send's reports of a wait between its own tries that was applied.
        var waitReports = 0
        /// The form's length.
        var contentLength: UInt64
        /// The most bytes of the form it handed out, in the queue's progress.
        var sent: UInt64 = 0

        init(
            id: ID, sequence: Int?, key: String?, priority: Int = 0, origin: Origin?, state: State,
            contentLength: UInt64
        ) {
            self.sequence = sequence
            self.key = key
            server = origin.map(SharedOrigin.init)
            self.state = state
            self.contentLength = contentLength
            let order = sequence ?? Int(id.rawValue.prefix(12)) ?? .max
            rank = Rank(priority: priority, order: order, id: id.rawValue)
        }
    }

    /// The queue's progress in bytes (``MultipartUploadQueue/progress``): never taken back.
    struct Counts: Equatable {
        /// Every upload's length.
        var total: UInt64 = 0
        /// The lengths of those that completed or left the queue.
        var ended: UInt64 = 0
        /// The bytes the others handed out, each short of its last.
        var inFlight: UInt64 = 0

        var completed: UInt64 { ended &+ inFlight }

        /// `upload` ended, completed or given up: its bytes count whole, and no longer as handed out.
        mutating func end(_ upload: Upload) {
            inFlight -= min(inFlight, upload.sent)
            ended &+= upload.contentLength
        }
    }

    /// An origin that the uploads to it share: most queues send to one server or a few, and an origin held in each
    /// of a hundred thousand uploads is 40 bytes each, where a shared one is 8.
    final class SharedOrigin: Sendable, Equatable {
        let origin: Origin

        init(_ origin: Origin) {
            self.origin = origin
        }

        static func == (one: SharedOrigin, other: SharedOrigin) -> Bool {
            one === other || one.origin == other.origin
        }
    }
}
