import Testing

/// Every chunk of one iteration of `chunks`, and the error it ended with; records an issue when the iteration goes on
/// after that error, which must end it.
func collectIteration<Chunks: AsyncSequence>(
    _ chunks: Chunks
) async -> (chunks: [Chunks.Element], error: Chunks.Failure?) {
    var collected: [Chunks.Element] = []
    var iterator = chunks.makeAsyncIterator()
    do throws(Chunks.Failure) {
        while let chunk = try await iterator.next(isolation: nil) { collected.append(chunk) }
    } catch {
        do throws(Chunks.Failure) {
            let after = try await iterator.next(isolation: nil)
            #expect(after == nil, "an iteration ends at its first error")
        } catch {
            Issue.record("threw again after its first error: \(error)")
        }
        return (collected, error)
    }
    return (collected, nil)
}
