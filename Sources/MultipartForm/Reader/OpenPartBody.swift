import Foundation

/// The file or stream behind the part the reader is in, opened when the reader reaches the part and closed when it
/// leaves it, so a form holds at most one descriptor at a time. In-memory bodies need no opening.
enum OpenPartBody {
    case file(RegularFile, expected: FileIdentity)
    /// A caller's stream; of unknown length when `expectedLength` is `nil`, ending where the stream ends.
    case stream(InputStream, expectedLength: UInt64?)

    /// Opens the body's source at byte `offset` of the body, checking what can be checked before the first byte;
    /// `nil` for in-memory bodies. A file seeks to the offset; a stream factory's stream is read and its bytes
    /// before the offset dropped; a one-shot stream can start only at 0.
    static func open(_ body: BodyPart.Body, at offset: UInt64 = 0) throws(MultipartError.Reason) -> OpenPartBody? {
        let opened = try openAtStart(body)
        guard offset > 0, let opened else { return opened }
        do {
            try opened.skip(offset)
        } catch {
            opened.close()
            throw error
        }
        return opened
    }

    /// Moves past the first `count` bytes of a body just opened.
    private func skip(_ count: UInt64) throws(MultipartError.Reason) {
        switch self {
        case .file(let file, _):
            try file.seek(to: count)
        case .stream:
            // Read and dropped: a stream has no way to seek. The reader never asks past the part's length.
            let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: BufferSize.read, alignment: 1)
            defer { scratch.deallocate() }
            var dropped: UInt64 = 0
            while dropped < count {
                let wanted = Int(min(UInt64(scratch.count), count - dropped))
                dropped += UInt64(
                    try read(into: UnsafeMutableRawBufferPointer(rebasing: scratch[..<wanted]), alreadyRead: dropped))
            }
        }
    }

    /// Opens the body's source at its first byte.
    private static func openAtStart(_ body: BodyPart.Body) throws(MultipartError.Reason) -> OpenPartBody? {
        switch body {
        case .bytes:
            return nil
        case .file(let url, let appended):
            let file: RegularFile
            do {
                file = try RegularFile(opening: url)
            } catch .fileNotFound {
                throw .fileVanished(url)
            }
            do {
                try file.check(file.identity, against: appended)
            } catch {
                file.close()
                throw error
            }
            return .file(file, expected: appended)
        case .stream(let oneShot, let length, _):
            guard let stream = oneShot.claim() else { throw .streamAlreadyConsumed }
            return try openStream(stream, length: length)
        case .streamFactory(let makeStream, let length):
            let stream: InputStream
            do {
                stream = try makeStream()
            } catch {
                throw .streamFactoryFailed(error)
            }
            return try openStream(stream, length: length)
        }
    }

    private static func openStream(_ stream: InputStream, length: UInt64?) throws(MultipartError.Reason) -> OpenPartBody
    {
        stream.open()
        // Foundation traps when `streamError` is read on a stream without one: only after `.error`.
        guard stream.streamStatus != .error else {
            let error = stream.streamError
            stream.close()
            throw .streamFailed(error)
        }
        return .stream(stream, expectedLength: length)
    }

    /// The stream's error, read only when its status is `.error`: Foundation traps on reading it otherwise (a stream
    /// that returned -1 without one, or a closed one).
    private static func failure(of stream: InputStream) -> MultipartError.Reason {
        .streamFailed(stream.streamStatus == .error ? stream.streamError : nil)
    }

    /// Reads up to `buffer.count` bytes, `read` having been read already; the caller never asks past the length. 0
    /// only at the end of a stream of unknown length.
    func read(into buffer: UnsafeMutableRawBufferPointer, alreadyRead: UInt64) throws(MultipartError.Reason) -> Int {
        switch self {
        case .file(let file, let expected):
            let count = try file.read(into: buffer)
            guard count > 0 else {
                let actual = (try? file.currentLength()) ?? alreadyRead
                throw .fileSizeChanged(file.url, expected: expected.length, actual: actual)
            }
            return count
        case .stream(let stream, let expected):
            let count = stream.read(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), maxLength: buffer.count)
            if count > 0 { return count }
            if count == 0 {
                guard let expected else { return 0 }
                throw .streamEndedEarly(expected: expected, received: alreadyRead)
            }
            throw Self.failure(of: stream)
        }
    }

    /// Checks, once every expected byte has been read, that the source has no more: a file that grew while it was
    /// read, or a stream longer than declared, fails rather than be cut short silently.
    func finish() throws(MultipartError.Reason) {
        switch self {
        case .file(let file, let expected):
            // Written to while it was read (its length or modification time moved), or replaced at its path.
            try file.check(try file.currentIdentity(), against: expected)
            guard file.isStillAtItsPath() else { throw .fileChanged(file.url) }
        case .stream(_, nil):
            // Ended where the stream said so.
            return
        case .stream(let stream, let expected?):
            // A stream at its end, or one that says it has nothing more (URLSession takes that for the end, and a
            // blocking stream would block on another read), is done. But a stream still `.notOpen` after we opened
            // it keeps no state of its own (a subclass that overrides only open, close and read): its
            // `hasBytesAvailable` is the base class's false and says nothing, so read one byte more.
            let status = stream.streamStatus
            guard status != .atEnd, stream.hasBytesAvailable || status == .notOpen else { return }
            var probe: UInt8 = 0
            let count = stream.read(&probe, maxLength: 1)
            if count > 0 { throw .streamLongerThanDeclared(length: expected) }
            if count < 0 { throw Self.failure(of: stream) }
        }
    }

    package func close() {
        switch self {
        case .file(let file, _): file.close()
        case .stream(let stream, _): stream.close()
        }
    }
}

extension RegularFile {
    /// Throws unless `current` (the file's identity when opened, or now) is `expected`, the one appended: a length
    /// that differs says by how much, anything else that the file was replaced or modified.
    fileprivate func check(_ current: FileIdentity, against expected: FileIdentity) throws(MultipartError.Reason) {
        guard current.length == expected.length else {
            throw .fileSizeChanged(url, expected: expected.length, actual: current.length)
        }
        guard current == expected else { throw .fileChanged(url) }
    }
}

extension MultipartFormData {
    /// Throws, naming the part, unless every file part is still the file that was appended: there, the same length,
    /// unmodified. What a reader finds at the part's first byte, found before anything is sent (a queued upload whose
    /// file went while it waited fails before it asks a server for anything).
    package func checkFiles() throws(MultipartError) {
        for (index, part) in bodyParts.enumerated() {
            guard case .file = part.body else { continue }
            do throws(MultipartError.Reason) {
                try OpenPartBody.open(part.body)?.close()
            } catch {
                throw MultipartError(error, partIndex: index, partName: part.name)
            }
        }
    }
}
