extension ResumableUpload {
    /// What an upload queue tells one of its uploads, apart from the caller's ``MultipartResumption``: the queue's
    /// knowledge of its server and its own bookkeeping, which a caller of `upload(_:with:strategy:...)` has no say in.
    package struct Membership: Sendable {
        /// Whether the saved state outlives the answer: the queue removes it only once its own record says the upload
        /// completed, so that a kill in between finds the server's upload again rather than sending the form twice.
        var keepsStateAfterAnswer = false
        /// Whether the server is known to speak no version of the draft (found out from an earlier upload of the
        /// queue to the same origin): a new upload sends the whole form without asking again.
        var knownNotResumable = false
        /// The upload's place among the queue's uploads to its server that wait out an outage together, so that one
        /// probes the server rather than each; `nil` for an upload that waits on its own.
        var outage: OutageGate.Pass?

        package init(
            keepsStateAfterAnswer: Bool = false, knownNotResumable: Bool = false, outage: OutageGate.Pass? = nil
        ) {
            (self.keepsStateAfterAnswer, self.knownNotResumable, self.outage) =
                (keepsStateAfterAnswer, knownNotResumable, outage)
        }

        /// An upload on its own, as every upload but a queue's.
        static let alone = Membership()
    }
}
