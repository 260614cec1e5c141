import Foundation

extension MultipartFormData {
    /// One part of a form as it was appended, as OkHttp's `MultipartBody.part(i)` shows it.
    public struct Part: Sendable {
        /// The field name as you gave it, or the `name` parameter of the `Content-Disposition` you wrote; `nil` when
        /// there is none.
        public let name: String?
        /// The file name as you gave it (the header carries it escaped), or the `filename` parameter of your
        /// `Content-Disposition`.
        public let fileName: String?
        /// The value of the part's `Content-Type` line, if it has one.
        public let contentType: String?
        /// The number of body bytes, headers and delimiters not counted; `nil` for a stream of unknown length.
        public let length: UInt64?
        /// The header lines in the order they are sent; names and values as on the wire.
        public let headers: [(name: String, value: String)]

        init(_ part: BodyPart) {
            name = part.name
            fileName = part.fileName
            headers = part.headers.lines
            contentType = headers.first { $0.name.lowercased() == "content-type" }?.value
            length = part.body.length
        }
    }

    /// The parts in the order they are sent. Reading them reads no body.
    public var parts: [Part] { bodyParts.map(Part.init) }
}
