/// The sizes of the buffers bytes pass through, named once.
@usableFromInline package enum BufferSize {
    /// 64 KiB: what Linux URLSession asks a body stream for at once, so chunks, pacing packets and the reads that
    /// skip to an offset move the same amounts.
    @usableFromInline package static let read = 64 << 10

    /// 1 MiB: a copy from file to file, or into another client's buffer, where fewer, larger reads cost less.
    @usableFromInline package static let copy = 1 << 20
}
