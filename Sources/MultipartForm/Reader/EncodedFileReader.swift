import Foundation

/// Reads back a body that `writeEncodedData(to:)` wrote, for the `.file` upload strategy: the file is the upload's
/// own, but it is still checked as a file part is, so that a body file changed under the upload fails it instead of
/// sending other bytes behind the same `Content-Length`.
final class EncodedFileReader {
    private let url: URL
    private let length: UInt64
    private var file: RegularFile?
    private var failure: MultipartError?
    private(set) var bytesRead: UInt64 = 0

    init(url: URL, length: UInt64) {
        self.url = url
        self.length = length
    }

    deinit {
        file?.close()
    }

    var isAtEnd: Bool { bytesRead == length && failure == nil }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(MultipartError) -> Int {
        if let failure { throw failure }
        let wanted = Int(min(UInt64(buffer.count), length - bytesRead))
        guard wanted > 0 else { return 0 }
        do throws(MultipartError.Reason) {
            if file == nil {
                let opened = try RegularFile(opening: url)
                file = opened
                guard opened.length == length else {
                    throw .fileSizeChanged(url, expected: length, actual: opened.length)
                }
            }
            var filled = 0
            while filled < wanted {
                let count = try file!.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<wanted]))
                guard count > 0 else {
                    throw .fileSizeChanged(url, expected: length, actual: bytesRead + UInt64(filled))
                }
                filled += count
            }
            bytesRead += UInt64(filled)
            if bytesRead == length {
                file?.close()
                file = nil
            }
            return filled
        } catch {
            let failure = MultipartError(error)
            fail(failure)
            throw failure
        }
    }

    func fail(_ failure: MultipartError) {
        self.failure = failure
        file?.close()
        file = nil
    }
}

extension EncodedFileReader: BodyReader {}
