#if os(Linux)
    import Foundation
    import Glibc

    extension MultipartReader {
        /// The most one kernel copy moves: its writer can stop between two (a cancelled upload's temporary body) in
        /// the time 64 MiB takes, about 0.1 s here, where one copy of a whole 1 GiB file held it for seconds.
        static let chunk = 64 << 20

        /// Copies the next bytes of the file part the reader is in, at most ``chunk``, straight to `descriptor` with
        /// `copy_file_range(2)`, the kernel moving the bytes. The file is opened, checked and finished as
        /// ``read(into:)`` does it.
        ///
        /// - Returns: The bytes copied; `nil` when the reader is not in a file body, or when the kernel cannot copy
        ///   between these two files (a pipe, a device, another file system on an old kernel) and nothing was
        ///   copied, so that ``read(into:)`` carries on.
        /// - Throws: The part's error as ``read(into:)`` throws it, or
        ///   ``MultipartError/Reason/outputWriteFailed(_:errno:)`` naming `output` when the output is full or fails.
        func copyFileBody(to descriptor: Int32, writing output: URL) throws(MultipartError) -> Int? {
            guard failure == nil, let copyFileRange = FileBodyCopy.copyFileRange,
                case .body(let part, let offset) = position, case .file(let url, let identity) = parts[part].body
            else { return nil }
            let length = identity.length
            var copied = 0
            var outputError: Int32?
            do throws(MultipartError.Reason) {
                if openBody == nil { openBody = try OpenPartBody.open(parts[part].body, at: offset) }
                guard case .file(let file, _) = openBody else { return nil }
                var sourceOffset = Int64(offset)
                copying: while UInt64(sourceOffset) < length {
                    let wanted = Int(min(length - UInt64(sourceOffset), UInt64(Self.chunk)))
                    let count = copyFileRange(file.descriptor, &sourceOffset, descriptor, nil, wanted, 0)
                    switch count {
                    case 1...:
                        copied += count
                        break copying
                    case 0:
                        throw .fileSizeChanged(url, expected: length, actual: (try? file.currentLength()) ?? 0)
                    default:
                        let code = errno
                        if code == EINTR { continue }
                        if [ENOSPC, EDQUOT, EFBIG, EIO].contains(code) {
                            outputError = code
                            break copying
                        }
                        // Not between these files: what was copied counts, the rest goes through a buffer.
                        if copied == 0 { return nil }
                        break copying
                    }
                }
                // The rest, if any, is read from where the copy stopped.
                if UInt64(sourceOffset) < length { try file.seek(to: UInt64(sourceOffset)) }
                try advance(part, from: offset, by: copied)
            } catch {
                let failure = MultipartError(error, partIndex: part, partName: parts[part].name)
                fail(failure)
                throw failure
            }
            bytesRead += UInt64(copied)
            if let outputError {
                let failure = MultipartError(.outputWriteFailed(output, errno: outputError))
                fail(failure)
                throw failure
            }
            return copied
        }
    }

    /// glibc's `copy_file_range(2)` (2.27 and later), which Swift's Glibc module does not import: copies between two
    /// files inside the kernel, with no buffer in between. `nil` where the C library lacks it.
    enum FileBodyCopy {
        typealias Function =
            @convention(c) (Int32, UnsafeMutablePointer<Int64>?, Int32, UnsafeMutablePointer<Int64>?, Int, UInt32)
            -> Int

        static let copyFileRange: Function? = {
            guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "copy_file_range") else { return nil }
            return unsafeBitCast(symbol, to: Function.self)
        }()
    }
#endif
