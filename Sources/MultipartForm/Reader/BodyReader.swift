/// What ``MultipartBodyStream`` pulls bytes from: the form's engine (``MultipartReader``), or an encoded body read
/// back from its file (``EncodedFileReader``).
protocol BodyReader: AnyObject {
    /// Fills `buffer` with the next bytes; 0 only at the end. Throws the error naming the part at fault.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(MultipartError) -> Int
    /// Stops reading and closes what is open; later reads throw `failure`.
    func fail(_ failure: MultipartError)
    /// Whether the last byte has been read.
    var isAtEnd: Bool { get }
    /// Bytes produced so far.
    var bytesRead: UInt64 { get }
}

extension MultipartReader: BodyReader {}
