import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where the body of an upload's answer goes: into memory up to a bound (the default: 16 MiB), or, as it arrives, to
/// a file or to a closure, so that an answer of any size takes no more memory than its pieces.
///
/// An answer past its bound fails the upload with ``MultipartError/Reason/responseTooLarge(statusCode:limit:)``, and
/// the rest of it is not waited for. Whatever the destination, the body of a status that
/// `acceptableStatusCodes` refuses goes into the error, its first ``refusedBodyLimit`` bytes at most; and the body of
/// an answer that another may follow (a 3xx, 401 or 407) is held in memory, up to the same bound as the answer's or
/// 1 MiB, until it is known to be the answer.
///
/// ```swift
/// // A large answer to a file, written as it arrives:
/// let (_, response) = try await URLSession.shared.upload(
///     form, with: request, acceptableStatusCodes: 200..<300, responseBody: .file(downloadURL))
/// ```
public struct MultipartResponseBody: Sendable {
    enum Destination: Sendable {
        case memory(limit: Int)
        case file(URL)
        case chunks(@Sendable (HTTPURLResponse, Data) throws -> Void)
    }

    let destination: Destination

    /// The bound of ``inMemory``: 16 MiB, which no answer to an upload that is a status, a JSON document or a
    /// small file comes near, and which a process can hold.
    public static let defaultLimit = 16 << 20

    /// The most of a refused answer's body that ``MultipartError/Reason/unacceptableStatus(statusCode:body:)``
    /// carries: 64 KiB, enough for any error page or problem document to explain itself.
    public static let refusedBodyLimit = 64 << 10

    /// What an answer that another may follow (a 3xx, 401 or 407) is held to when the body goes to a file or a
    /// closure: such answers are short.
    static let heldAnswerLimit = 1 << 20

    /// The whole body in memory, returned as the upload's `Data`, up to ``defaultLimit`` bytes.
    public static var inMemory: Self { .inMemory(upTo: defaultLimit) }

    /// The whole body in memory, returned as the upload's `Data`, up to `limit` bytes; a longer one fails the
    /// upload with ``MultipartError/Reason/responseTooLarge(statusCode:limit:)`` as soon as it passes `limit`.
    ///
    /// - Parameter limit: The most bytes kept; `Int.max` for no bound, at the cost of memory a server decides.
    public static func inMemory(upTo limit: Int) -> Self {
        Self(destination: .memory(limit: max(0, limit)))
    }

    /// The body written to `url` as it arrives; the upload returns empty `Data`.
    ///
    /// It is written to a new file beside `url`, which replaces whatever is at `url` once the upload has succeeded,
    /// and is removed if it fails: `url` never holds part of a body, nor the body of a refused status. An upload
    /// whose answer has no body leaves an empty file. A write that fails fails the upload with
    /// ``MultipartError/Reason/outputWriteFailed(_:errno:)``.
    public static func file(_ url: URL) -> Self {
        Self(destination: .file(url))
    }

    /// Each piece of the body handed to `receive`, with its response, as it arrives; the upload returns empty
    /// `Data`.
    ///
    /// `receive` is called in order, on URLSession's delegate queue, and only for the answer that counts: not for an
    /// answer another may follow until it is known to be the answer, and not for a status `acceptableStatusCodes`
    /// refuses. An error it throws stops the upload, which throws that error. Keep it quick: URLSession does not
    /// wait for it before it reads more.
    public static func chunks(_ receive: @escaping @Sendable (HTTPURLResponse, Data) throws -> Void) -> Self {
        Self(destination: .chunks(receive))
    }
}
