import Foundation

/// A `multipart/form-data` body (or another `multipart/` subtype) described once and produced lazily, part by part,
/// from memory, files and streams.
///
/// Appending records where each body comes from and encodes the part's headers; no body byte is read until the
/// form is streamed (``makeBodyStream()``), encoded (``encode()``) or written (``writeEncodedData(to:)``).
/// ``contentLength`` is exact from the start, unless the form holds a stream of unknown length
/// (``append(_:name:fileName:mimeType:whenLengthIsNeeded:)``).
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
    /// The `multipart/` subtype of ``contentType``: `form-data` unless the form was made with
    /// ``init(subtype:boundary:)``.
    public let subtype: String
    package var bodyParts: [BodyPart] = []
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
        self.init(validBoundary: Boundary.random(), chosen: false, subtype: "form-data")
    }

    /// Creates an empty form with `boundary`, which must be 1 to 70 characters of RFC 2046 `bchars`
    /// (letters, digits and `'()+_,-./:=?` and space) and must not end in a space.
    ///
    /// - Throws: ``MultipartError/Reason/invalidBoundary(_:)``.
    public init(boundary: String) throws(MultipartError) {
        try self.init(subtype: "form-data", boundary: boundary)
    }

    /// Creates an empty `multipart/<subtype>` body (`mixed`, `related`, `alternative`, …) with `boundary`, or with a
    /// random boundary when it is `nil`.
    ///
    /// The named appends write `Content-Disposition: form-data` lines, which only `form-data` expects; parts of other
    /// subtypes are usually appended with their own header lines, ``append(headers:body:)`` and its siblings.
    ///
    /// - Parameters:
    ///   - subtype: An RFC 9110 token, such as `mixed`; it goes into ``contentType`` as given.
    ///   - boundary: 1 to 70 RFC 2046 `bchars` not ending in a space, or `nil` for 128 random bits.
    /// - Throws: ``MultipartError/Reason/invalidSubtype(_:)`` or ``MultipartError/Reason/invalidBoundary(_:)``.
    public init(subtype: String, boundary: String? = nil) throws(MultipartError) {
        guard !subtype.isEmpty, subtype.utf8.allSatisfy(Boundary.isTokenCharacter) else {
            throw MultipartError(.invalidSubtype(subtype))
        }
        guard let boundary else {
            self.init(validBoundary: Boundary.random(), chosen: false, subtype: subtype)
            return
        }
        guard Boundary.isValid(boundary) else { throw MultipartError(.invalidBoundary(boundary)) }
        self.init(validBoundary: boundary, chosen: true, subtype: subtype)
    }

    private init(validBoundary boundary: String, chosen: Bool, subtype: String) {
        self.boundary = boundary
        isBoundaryChosen = chosen
        self.subtype = subtype
    }

    /// This form with `boundary` instead, as a saved upload's bytes went out; `nil` when it is not a valid boundary or
    /// a part's headers or in-memory body hold it.
    package func replacingBoundary(with boundary: String) -> MultipartFormData? {
        guard Boundary.isValid(boundary), !bodyParts.contains(where: { $0.contains(boundary) }) else { return nil }
        var form = self
        form.boundary = boundary
        return form
    }

    /// The request's `Content-Type`: `multipart/form-data; boundary=…` (or the form's ``subtype``), the boundary
    /// quoted only when it must be.
    public var contentType: String { Boundary.contentType(for: boundary, subtype: subtype) }

    /// The exact number of bytes in the body: delimiters, headers and bodies; `nil` while the form holds a stream of
    /// unknown length, whose bytes are counted only as they are sent.
    ///
    /// An empty form is the close delimiter alone, `--boundary--\r\n`, which multipart parsers accept as a form
    /// with no fields (an empty body is not a valid multipart body).
    public var contentLength: UInt64? {
        guard partOfUnknownLength == nil else { return nil }
        return framingLength + partBytes
    }

    /// The index of the first part whose length is unknown until it is read (a stream appended without one), if any.
    package var partOfUnknownLength: Int? { bodyParts.firstIndex { $0.body.length == nil } }

    /// What sending the form a second time meets, where it cannot be sent again: its first one-shot `InputStream`
    /// part, named, as the error a second read of it gives.
    package var resendFailure: MultipartError? {
        bodyParts.firstIndex { !$0.body.isReplayable }.map { index in
            MultipartError(.streamAlreadyConsumed, partIndex: index, partName: bodyParts[index].name)
        }
    }

    /// The delimiters' bytes: `\r\n--boundary\r\n` before each part and `\r\n--boundary--\r\n` at the end, less
    /// the first CRLF.
    private var framingLength: UInt64 {
        let boundaryLength = UInt64(boundary.utf8.count)
        return UInt64(bodyParts.count) * (boundaryLength + 6) + boundaryLength + 8 - 2
    }

    /// The number of parts.
    public var count: Int { bodyParts.count }

    /// The MIME type that file parts named `fileName` get by default: the type of its extension (case-insensitive)
    /// from the package's table of common types, else `application/octet-stream`.
    public static func mimeType(forFileName fileName: String) -> String {
        MIMEType.forFileName(fileName)
    }

    /// Whether the form can be read more than once: false once it holds a one-shot `InputStream` part.
    public var isReplayable: Bool { bodyParts.allSatisfy(\.body.isReplayable) }

    // MARK: Appending

    /// Appends a text field: its value as UTF-8, with no `Content-Type`.
    ///
    /// - Parameters:
    ///   - value: The field's text.
    ///   - name: The field name; `"`, CR and LF are escaped as browsers escape them.
    public mutating func append(_ value: String, name: String) {
        addRecordingError(name: name, fileName: nil, mimeType: nil, body: .bytes(Data(value.utf8)))
    }

    /// Appends `data` as a field, or as a file when `fileName` is given.
    ///
    /// The `Content-Type` is `mimeType`, else the type of `fileName`'s extension, else none for a plain field.
    /// An invalid `mimeType` leaves the part out and sets ``appendError``.
    ///
    /// - Parameters:
    ///   - data: The part's body.
    ///   - name: The field name.
    ///   - fileName: The file name to send, making the part a file; `nil` for a plain field.
    ///   - mimeType: The part's `Content-Type`; `nil` to take it from `fileName`.
    public mutating func append(_ data: Data, name: String, fileName: String? = nil, mimeType: String? = nil) {
        addRecordingError(name: name, fileName: fileName, mimeType: mimeType, body: .bytes(data))
    }

    /// Appends the file at `fileURL`, read only when the form is streamed and never held in memory.
    ///
    /// The file name defaults to the URL's last path component and the MIME type to the one of its extension. The
    /// file must exist, be a regular file and be readable now. Its identity is recorded (which file, its length and
    /// modification time), and the body fails at this part if the file was replaced, resized or modified when it is
    /// opened or by the time its last byte is read.
    ///
    /// - Parameters:
    ///   - fileURL: A `file:` URL of a regular file.
    ///   - name: The field name.
    ///   - fileName: The file name to send; `nil` for the URL's last path component.
    ///   - mimeType: The part's `Content-Type`; `nil` for the type of the file name's extension.
    /// - Throws: ``MultipartError`` naming the part: not a file URL, no such file, a directory, not a regular file,
    ///   unreadable, an invalid MIME type, or a chosen boundary in its headers.
    public mutating func append(
        fileURL: URL,
        name: String,
        fileName: String? = nil,
        mimeType: String? = nil
    ) throws(MultipartError) {
        let index = bodyParts.count
        let body = try Self.fileBody(fileURL, partIndex: index, partName: name)
        let fileName = fileName ?? fileURL.lastPathComponent
        let mimeType = mimeType ?? MIMEType.forFileName(fileName)
        guard MIMEType.isValid(mimeType) else {
            throw MultipartError(.invalidMIMEType(mimeType), partIndex: index, partName: name)
        }
        do {
            try add(name: name, fileName: fileName, mimeType: mimeType, body: body)
        } catch {
            throw MultipartError(error, partIndex: index, partName: name)
        }
    }

    /// Appends a caller's stream that yields exactly `length` bytes. It can be read once: the form is then not
    /// replayable (a second stream, encode or reopen fails at this part). Prefer the factory form when you can.
    ///
    /// The stream is opened when the body reaches the part and closed when it leaves it; fewer or more bytes than
    /// `length`, or a read error, fail the body instead of sending it.
    ///
    /// - Parameters:
    ///   - stream: A stream that is not open yet; the form opens and closes it.
    ///   - length: The exact number of bytes the stream yields.
    ///   - name: The field name.
    ///   - fileName: The file name to send, making the part a file; `nil` for a plain field.
    ///   - mimeType: The part's `Content-Type`; `nil` to take it from `fileName`.
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

    /// Appends a caller's stream of unknown length, such as a pipe: its part ends where the stream does. It can be
    /// read once, as ``append(_:length:name:fileName:mimeType:)``'s stream, and the form has no ``contentLength``
    /// until it is sent.
    ///
    /// How it is sent depends on what the upload needs. A `.resumable` upload to a server that speaks the
    /// resumable-upload draft sends it as the stream yields it, in appends of a bounded size, holding in memory only
    /// what the server has not acknowledged yet (``MultipartResumption/bufferedAppendSize``): no copy on disk, and
    /// the first byte goes out with the stream's first bytes. Every other upload needs an exact `Content-Length`
    /// before the first byte: the stream is copied once to a private temporary file, which is removed when the upload
    /// ends, however it ends; or, with `whenLengthIsNeeded: .fail`, the upload fails with
    /// ``MultipartError/Reason/lengthUnknown`` instead. ``bodyChunks(maximumSize:)``, ``makeBodyStream()``,
    /// ``encode()`` and ``writeEncodedData(to:)`` read the stream as they go.
    ///
    /// - Parameters:
    ///   - stream: A stream that is not open yet; the form opens it, reads it to its end, and closes it.
    ///   - name: The field name.
    ///   - fileName: The file name to send, making the part a file; `nil` for a plain field.
    ///   - mimeType: The part's `Content-Type`; `nil` to take it from `fileName`.
    ///   - whenLengthIsNeeded: `.spool` (the default) to copy the stream to a temporary file when an upload needs
    ///     the form's length, `.fail` to fail such an upload instead.
    public mutating func append(
        _ stream: InputStream,
        name: String,
        fileName: String? = nil,
        mimeType: String? = nil,
        whenLengthIsNeeded: UnknownLength = .spool
    ) {
        let body = BodyPart.Body.stream(OneShotStream(stream), length: nil, spools: whenLengthIsNeeded == .spool)
        addRecordingError(name: name, fileName: fileName, mimeType: mimeType, body: body)
    }

    /// What an upload that needs the exact length of a form holding a stream of unknown length does.
    public enum UnknownLength: Sendable, Equatable {
        /// Copies the stream to a private temporary file first, removed when the upload ends.
        case spool
        /// Fails the upload with ``MultipartError/Reason/lengthUnknown``, having read none of the stream.
        case fail
    }

    /// Appends a part whose `length` bytes come from a new stream that `makeStream` returns each time the body
    /// reaches the part, so the form can be streamed, retried and encoded any number of times.
    ///
    /// - Parameters:
    ///   - length: The exact number of bytes each stream yields.
    ///   - name: The field name.
    ///   - fileName: The file name to send, making the part a file; `nil` for a plain field.
    ///   - mimeType: The part's `Content-Type`; `nil` to take it from `fileName`.
    ///   - makeStream: Makes a new, unopened stream; what it throws fails the body at this part.
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

    /// Appends `value` encoded by `encoder` as a field with `Content-Type: application/json`. The value is encoded
    /// now, once; the part is in memory from then on.
    ///
    /// - Parameters:
    ///   - value: The value to encode.
    ///   - name: The field name.
    ///   - encoder: The encoder, with your date and key strategies.
    /// - Throws: ``MultipartError/Reason/jsonEncodingFailed(_:)`` with the encoder's error.
    public mutating func append<T: Encodable>(
        json value: T,
        name: String,
        encoder: JSONEncoder = JSONEncoder()
    ) throws(MultipartError) {
        let index = bodyParts.count
        let data: Data
        do {
            data = try encoder.encode(value)
        } catch {
            throw MultipartError(.jsonEncodingFailed(error), partIndex: index, partName: name)
        }
        do {
            try add(name: name, fileName: nil, mimeType: "application/json", body: .bytes(data))
        } catch {
            throw MultipartError(error, partIndex: index, partName: name)
        }
    }

    /// Appends a part with exactly the given header lines (in order) and `body`.
    ///
    /// Header names must be HTTP tokens and values must hold no CR, LF or other control character, so no input
    /// can add a header line or a part. Nothing is added for you: include `Content-Disposition` yourself. Its `name`
    /// and `filename` parameters, when present, name the part in ``parts`` and in errors.
    ///
    /// - Throws: ``MultipartError/Reason/invalidHeaderName(_:)``,
    ///   ``MultipartError/Reason/invalidHeaderValue(name:value:)`` or ``MultipartError/Reason/boundaryInPart(_:)``.
    public mutating func append(headers: [(name: String, value: String)], body: Data) throws(MultipartError) {
        try add(headers: headers, body: .bytes(body))
    }

    /// Appends the file at `fileURL` under exactly the given header lines (in order), read only when the form is
    /// streamed, with the checks of ``append(fileURL:name:fileName:mimeType:)`` and of ``append(headers:body:)``.
    ///
    /// - Throws: the file's reason (``MultipartError/Reason/fileNotFound(_:)`` and the like), or a header's.
    public mutating func append(headers: [(name: String, value: String)], fileURL: URL) throws(MultipartError) {
        let body = try Self.fileBody(fileURL, partIndex: bodyParts.count, partName: nil)
        try add(headers: headers, body: body)
    }

    /// Appends a part under exactly the given header lines (in order), whose `length` bytes come from a new stream
    /// that `makeStream` returns each time the body reaches the part, as in
    /// ``append(length:name:fileName:mimeType:stream:)``.
    ///
    /// - Throws: a header's reason, or ``MultipartError/Reason/bodyTooLong(partLength:)``.
    public mutating func append(
        headers: [(name: String, value: String)],
        length: UInt64,
        stream makeStream: @escaping @Sendable () throws -> InputStream
    ) throws(MultipartError) {
        try add(headers: headers, body: .streamFactory(makeStream, length: length))
    }

    /// Appends a caller's stream of unknown length under exactly the given header lines (in order), as
    /// ``append(_:name:fileName:mimeType:whenLengthIsNeeded:)`` appends one under lines of its own making.
    ///
    /// - Throws: a header's reason, as ``append(headers:body:)`` throws it.
    public mutating func append(
        headers: [(name: String, value: String)],
        stream: InputStream,
        whenLengthIsNeeded: UnknownLength = .spool
    ) throws(MultipartError) {
        try add(
            headers: headers,
            body: .stream(OneShotStream(stream), length: nil, spools: whenLengthIsNeeded == .spool))
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
            if appendError == nil { appendError = MultipartError(error, partIndex: bodyParts.count, partName: name) }
        }
    }

    /// Records `fileURL`'s identity (which file, its length and times) after checking that it is a readable
    /// regular file.
    private static func fileBody(_ fileURL: URL, partIndex: Int, partName: String?) throws(MultipartError)
        -> BodyPart.Body
    {
        do {
            let file = try RegularFile(opening: fileURL)
            file.close()
            return .file(fileURL, file.identity)
        } catch {
            throw MultipartError(error, partIndex: partIndex, partName: partName)
        }
    }

    /// Adds a part with caller-supplied header lines, named by its `Content-Disposition` if it has one.
    private mutating func add(headers: [(name: String, value: String)], body: BodyPart.Body) throws(MultipartError) {
        let disposition = PartHeaders.disposition(in: headers)
        do {
            try add(
                BodyPart(
                    name: disposition.name, fileName: disposition.fileName,
                    headers: try PartHeaders(validating: headers), body: body))
        } catch {
            throw MultipartError(error, partIndex: bodyParts.count, partName: disposition.name)
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
            BodyPart(
                name: name, fileName: fileName,
                headers: PartHeaders(name: name, fileName: fileName, mimeType: mimeType), body: body))
    }

    /// Gives a stream part of unknown length the body it was copied to, which has a length: the spool's.
    mutating func replaceBody(ofPart index: Int, with body: BodyPart.Body) {
        partBytes += body.length ?? 0
        bodyParts[index].body = body
    }

    /// A form made again from what a record kept of one: its `subtype`, `boundary` (taken as chosen, so that it is
    /// never drawn again) and parts, each checked as an append checks it.
    package init(rebuilding subtype: String, boundary: String, parts: [BodyPart]) throws(MultipartError) {
        try self.init(subtype: subtype, boundary: boundary)
        for (index, part) in parts.enumerated() {
            do throws(MultipartError.Reason) {
                try add(part)
            } catch {
                throw MultipartError(error, partIndex: index, partName: part.name)
            }
        }
    }

    private mutating func add(_ part: BodyPart) throws(MultipartError.Reason) {
        // A Content-Length is an Int64 to URLSession: the whole body, with a longer boundary drawn, must fit one.
        // A stream of unknown length counts its headers only: its bytes are counted as they are read.
        let bodyLength = part.body.length ?? 0
        let (length, partOverflow) = UInt64(part.headers.bytes.count).addingReportingOverflow(bodyLength)
        let (sum, formOverflow) = partBytes.addingReportingOverflow(length)
        guard !partOverflow, !formOverflow, sum <= UInt64(Int64.max) - UInt64(count + 1) * 200 else {
            throw .bodyTooLong(partLength: bodyLength)
        }
        if part.contains(boundary) {
            guard !isBoundaryChosen else { throw .boundaryInPart(boundary) }
            // Node's parser rejects a form whose boundary text appears anywhere, even where it is no delimiter.
            repeat {
                boundary = Boundary.random()
            } while part.contains(boundary) || bodyParts.contains { $0.contains(boundary) }
        }
        partBytes = sum
        bodyParts.append(part)
    }
}
