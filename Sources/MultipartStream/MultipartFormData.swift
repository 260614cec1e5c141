import Foundation

/// A `multipart/form-data` body described once and produced lazily, part by part, from memory, files and streams.
///
/// Appending records where each body comes from and encodes the part's headers; no body byte is read until the
/// form is streamed (``makeBodyStream()``), encoded (``encode()``) or written (``writeEncodedData(to:)``).
/// ``contentLength`` is exact from the start.
///
/// ```swift
/// var form = MultipartFormData()
/// form.append("Ada", name: "author")
/// try form.append(fileURL: videoURL, name: "video")
/// let request = URLRequest(url: uploadURL, multipartFormData: form)
/// ```
public struct MultipartFormData: Sendable {
    /// The delimiter between parts, without the leading `--`.
    ///
    /// A random boundary is drawn again in the rare case that an in-memory part or a header holds its text; a
    /// boundary you chose is never changed: such a part is refused instead.
    public private(set) var boundary: String
    /// Whether the caller chose the boundary, which is then never drawn again.
    private let isBoundaryChosen: Bool
    var parts: [BodyPart] = []
    var throttle: Throttle?
    /// Header and body bytes of all parts; delimiters are added in ``contentLength``.
    private var partBytes: UInt64 = 0

    /// The first problem found by an `append` that cannot throw: a MIME type holding control characters, or a part
    /// holding the text of a boundary you chose.
    ///
    /// Such a part is not added. While this is set, ``encode()`` and ``writeEncodedData(to:)`` throw it and every
    /// body stream fails on `open()`, so the form can never be sent without the part.
    public internal(set) var appendError: MultipartError?

    /// Creates an empty form with a boundary of 128 random bits from the system's cryptographic source.
    public init() {
        self.init(validBoundary: Boundary.random(), chosen: false)
    }

    /// Creates an empty form with `boundary`, which must be 1 to 70 characters of RFC 2046 `bchars`
    /// (letters, digits and `'()+_,-./:=?` and space) and must not end in a space.
    public init(boundary: String) throws(MultipartError) {
        guard Boundary.isValid(boundary) else { throw MultipartError(.invalidBoundary(boundary)) }
        self.init(validBoundary: boundary, chosen: true)
    }

    private init(validBoundary boundary: String, chosen: Bool) {
        self.boundary = boundary
        isBoundaryChosen = chosen
    }

    /// The request's `Content-Type`: `multipart/form-data; boundary=…`, quoted only when it must be.
    public var contentType: String { Boundary.contentType(for: boundary) }

    /// The exact number of bytes in the body: delimiters, headers and bodies.
    ///
    /// An empty form is the close delimiter alone, `--boundary--\r\n`, which multipart parsers accept as a form
    /// with no fields (an empty body is not a valid multipart body).
    public var contentLength: UInt64 {
        // `\r\n--boundary\r\n` before each part and `\r\n--boundary--\r\n` at the end, less the first CRLF.
        let boundaryLength = UInt64(boundary.utf8.count)
        return partBytes + UInt64(parts.count) * (boundaryLength + 6) + boundaryLength + 8 - 2
    }

    /// The number of parts.
    public var count: Int { parts.count }

    /// The MIME type that file parts named `fileName` get by default: the type of its extension (case-insensitive)
    /// from the package's table of common types, else `application/octet-stream`.
    public static func mimeType(forFileName fileName: String) -> String {
        MIMEType.forFileName(fileName)
    }

    /// Whether the form can be read more than once: false once it holds a one-shot `InputStream` part.
    public var isReplayable: Bool { parts.allSatisfy(\.body.isReplayable) }

    // MARK: Appending

    /// Appends a text field: its value as UTF-8, with no `Content-Type`.
    public mutating func append(_ value: String, name: String) {
        addRecordingError(name: name, fileName: nil, mimeType: nil, body: .bytes(Data(value.utf8)))
    }

    /// Appends `data` as a field, or as a file when `fileName` is given.
    ///
    /// The `Content-Type` is `mimeType`, else the type of `fileName`'s extension, else none for a plain field.
    public mutating func append(_ data: Data, name: String, fileName: String? = nil, mimeType: String? = nil) {
        addRecordingError(name: name, fileName: fileName, mimeType: mimeType, body: .bytes(data))
    }

    /// Appends the file at `fileURL`, read only when the form is streamed and never held in memory.
    ///
    /// The file name defaults to the URL's last path component and the MIME type to the one of its extension. The
    /// file must exist, be a regular file and be readable now. Its identity is recorded (which file, its length and
    /// modification time), and the body fails at this part if the file was replaced, resized or modified when it is
    /// opened or by the time its last byte is read.
    public mutating func append(
        fileURL: URL,
        name: String,
        fileName: String? = nil,
        mimeType: String? = nil
    ) throws(MultipartError) {
        let index = parts.count
        let identity: FileIdentity
        do {
            let file = try RegularFile(opening: fileURL)
            file.close()
            identity = file.identity
        } catch {
            throw MultipartError(error, partIndex: index, partName: name)
        }
        let fileName = fileName ?? fileURL.lastPathComponent
        let mimeType = mimeType ?? MIMEType.forFileName(fileName)
        guard MIMEType.isValid(mimeType) else {
            throw MultipartError(.invalidMIMEType(mimeType), partIndex: index, partName: name)
        }
        do {
            try add(name: name, fileName: fileName, mimeType: mimeType, body: .file(fileURL, identity))
        } catch {
            throw MultipartError(error, partIndex: index, partName: name)
        }
    }

    /// Appends a caller's stream that yields exactly `length` bytes. It can be read once: the form is then not
    /// replayable (a second stream, encode or reopen fails at this part). Prefer the factory form when you can.
    ///
    /// The stream is opened when the body reaches the part and closed when it leaves it; fewer or more bytes than
    /// `length`, or a read error, fail the body instead of sending it.
    public mutating func append(
        _ stream: InputStream,
        length: UInt64,
        name: String,
        fileName: String? = nil,
        mimeType: String? = nil
    ) {
        let body = BodyPart.Body.stream(OneShotStream(stream), length: length)
        addRecordingError(name: name, fileName: fileName, mimeType: mimeType, body: body)
    }

    /// Appends a part whose `length` bytes come from a new stream that `makeStream` returns each time the body
    /// reaches the part, so the form can be streamed, retried and encoded any number of times.
    public mutating func append(
        length: UInt64,
        name: String,
        fileName: String? = nil,
        mimeType: String? = nil,
        stream makeStream: @escaping @Sendable () throws -> InputStream
    ) {
        let body = BodyPart.Body.streamFactory(makeStream, length: length)
        addRecordingError(name: name, fileName: fileName, mimeType: mimeType, body: body)
    }

    /// Appends a part with exactly the given header lines (in order) and `body`.
    ///
    /// Header names must be HTTP tokens and values must hold no CR, LF or other control character, so no input
    /// can add a header line or a part. Nothing is added for you: include `Content-Disposition` yourself.
    public mutating func append(headers: [(name: String, value: String)], body: Data) throws(MultipartError) {
        do {
            try add(BodyPart(name: nil, headers: try PartHeaders(validating: headers), body: .bytes(body)))
        } catch {
            throw MultipartError(error, partIndex: parts.count)
        }
    }

    // MARK: Throttling

    /// Limits each `read` of the body stream to `packetSize` bytes and pauses for `delay` seconds after each, as
    /// AFNetworking did for slow cellular links. No throttling by default.
    ///
    /// The pause blocks the thread that reads the stream; on Linux that is URLSession's one serial queue for the
    /// whole process, so other transfers wait too. ``encode()`` and ``writeEncodedData(to:)`` are never throttled.
    public mutating func throttleBandwidth(packetSize: Int, delay: TimeInterval) {
        precondition(packetSize > 0, "packetSize must be positive")
        precondition(delay >= 0, "delay must not be negative")
        throttle = Throttle(packetSize: packetSize, delay: delay)
    }

    // MARK: Helpers

    /// For the appends that cannot throw: a part whose MIME type is invalid, or that holds a chosen boundary, is
    /// left out and recorded in ``appendError``, which fails every later encode and stream.
    private mutating func addRecordingError(name: String, fileName: String?, mimeType: String?, body: BodyPart.Body) {
        let mimeType = mimeType ?? fileName.map(MIMEType.forFileName)
        do throws(MultipartError.Reason) {
            if let mimeType, !MIMEType.isValid(mimeType) { throw MultipartError.Reason.invalidMIMEType(mimeType) }
            try add(name: name, fileName: fileName, mimeType: mimeType, body: body)
        } catch {
            if appendError == nil { appendError = MultipartError(error, partIndex: parts.count, partName: name) }
        }
    }

    /// Adds a form-data part; `mimeType` must be valid.
    private mutating func add(
        name: String,
        fileName: String?,
        mimeType: String?,
        body: BodyPart.Body
    ) throws(MultipartError.Reason) {
        try add(
            BodyPart(name: name, headers: PartHeaders(name: name, fileName: fileName, mimeType: mimeType), body: body))
    }

    private mutating func add(_ part: BodyPart) throws(MultipartError.Reason) {
        // A Content-Length is an Int64 to URLSession: the whole body, with a longer boundary drawn, must fit one.
        let (length, partOverflow) = UInt64(part.headers.bytes.count).addingReportingOverflow(part.body.length)
        let (sum, formOverflow) = partBytes.addingReportingOverflow(length)
        guard !partOverflow, !formOverflow, sum <= UInt64(Int64.max) - UInt64(count + 1) * 200 else {
            throw .bodyTooLong(partLength: part.body.length)
        }
        if part.contains(boundary) {
            guard !isBoundaryChosen else { throw .boundaryInPart(boundary) }
            // Node's parser rejects a form whose boundary text appears anywhere, even where it is no delimiter.
            repeat {
                boundary = Boundary.random()
            } while part.contains(boundary) || parts.contains { $0.contains(boundary) }
        }
        partBytes = sum
        parts.append(part)
    }
}

/// At most `packetSize` bytes per read, then a pause of `delay`.
struct Throttle: Sendable {
    var packetSize: Int
    var delay: TimeInterval
}
