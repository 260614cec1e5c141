import Foundation

extension DiscoveryGate {
    /// The gate of `url`'s origin for the uploads of this process that no queue gathers: what one of them found a
    /// server to speak (a version, limits, none), the next asks nothing of, and those that start together ask once.
    /// A queue's upload tells it what it found too, and a queue's form that goes in one request, where its queue knows
    /// nothing of the server, goes in the version found here.
    /// A server found to speak none is asked again after a day, as `-C -` does with what it keeps; one that refuses a
    /// creation made on what was found is asked again at once. `nil` for a URL without an origin.
    static func forProcess(of url: URL?) -> DiscoveryGate? {
        guard let origin = Origin(url) else { return nil }
        return processGates.withLock { gates in
            if let gate = gates[origin] { return gate }
            // A process that uploads to ever more origins keeps the gates in use, not one for each origin it met.
            if gates.count >= mostProcessGates { gates = gates.filter { $0.value.isAsked } }
            let gate = DiscoveryGate(speaksNoneFor: 24 * 3_600)
            gates[origin] = gate
            return gate
        }
    }

    /// Forgets what this process found of `url`'s server: for trials whose every upload starts from no knowledge of
    /// it, as another process does. Only its origin's, as the trials beside it keep theirs.
    package static func forgetProcessFindings(of url: URL) {
        guard let origin = Origin(url) else { return }
        _ = processGates.withLock { $0.removeValue(forKey: origin) }
    }

    private static let processGates = LockedValue<[Origin: DiscoveryGate]>([:])
    private static let mostProcessGates = 1_024
}
