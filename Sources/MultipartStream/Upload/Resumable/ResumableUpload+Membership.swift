extension ResumableUpload {
    /// What an upload queue tells one of its uploads, apart from the caller's ``MultipartResumption``: the queue's
    /// knowledge of its server and its own bookkeeping, which a caller of `upload(_:with:strategy:...)` has no say in.
    package struct Membership: Sendable {
        /// Whether the saved state outlives the answer: the queue removes it only once its own record says the upload
        /// completed, so that a kill in between finds the server's upload again rather than sending the form twice.
        var keepsStateAfterAnswer = false
        /// Whether the server is known to speak no version of the draft (found out from an earlier upload of the
        /// queue to the same origin): a new upload sends the whole form without asking again.
        var speaksNone = false
        /// The upload's place among the queue's uploads to its server that wait out an outage together, so that one
        /// probes the server rather than each; `nil` for an upload that waits on its own.
        var outage: OutageGate.Pass?
        /// What an earlier upload of the queue to the same origin found the server to speak: a new upload creates
        /// its upload resource at once, without the `OPTIONS` of each version (see ``KnownServer``).
        var knownServer: KnownServer?
        /// Told what this upload's `OPTIONS` found, once the server said it speaks the draft.
        var learned: (@Sendable (KnownServer) -> Void)?
        /// Where the queue's uploads to the server wait for the one that asks what it speaks, when nothing is known
        /// of it yet; `nil` for an upload that asks on its own.
        var discovery: DiscoveryGate?
        /// The queue's clock, which every upload in flight shares so that their sum keeps to the queue's rate, in
        /// place of the strategy's pacing.
        var pacer: MultipartPacer?

        package init(
            keepsStateAfterAnswer: Bool = false, speaksNone: Bool = false, outage: OutageGate.Pass? = nil,
            knownServer: KnownServer? = nil, learned: (@Sendable (KnownServer) -> Void)? = nil,
            discovery: DiscoveryGate? = nil, pacer: MultipartPacer? = nil
        ) {
            (self.keepsStateAfterAnswer, self.speaksNone, self.outage) =
                (keepsStateAfterAnswer, speaksNone, outage)
            (self.knownServer, self.learned, self.discovery, self.pacer) = (knownServer, learned, discovery, pacer)
        }

        /// An upload on its own, as every upload but a queue's.
        static let alone = Membership()
    }

    /// What a server was found to speak: the interop version its `OPTIONS` answered in and the limits it announced
    /// there (without a lifetime, which is each upload's own). A queue keeps it for each origin, in its database, so
    /// that only its first upload to a server asks; a server that refuses a creation made on it is asked again.
    package struct KnownServer: Equatable, Sendable, Codable {
        var version: InteropVersion
        var limits: Limits
    }
}
