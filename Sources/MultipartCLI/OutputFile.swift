import Foundation
import MultipartStream

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where `-o` or `--output-body` writes, decided before a byte is sent: the command never removes anything it did
/// not create.
///
/// A directory, and a file that is one of the form's own inputs, are refused. A character device (`/dev/null`) or a
/// FIFO is written into as it is. A regular file, or a new one, is written as a temporary file beside it that is
/// renamed over it only once complete, so a failure leaves what was there as it was (through a symbolic link, the
/// file it points to is the one replaced).
enum OutputFile {
    case standardOutput
    /// A character device or FIFO, written into.
    case device(String)
    /// A regular file, or none yet, at this path with links resolved.
    case file(String)

    /// The output at `path` (`-` for standard output), refused when it is a directory, another kind of special file,
    /// or the same file as one of `inputs`.
    init(_ path: String, option: String, inputs: [String]) throws {
        if path == "-" {
            self = .standardOutput
            return
        }
        let info: stat
        do throws(POSIX.Failure) {
            info = try POSIX.status(at: cPath(path))
        } catch {
            guard error.code == ENOENT else {
                throw CommandFailure(status: .localFile, message: Self.failure(option, path, error.code))
            }
            self = .file(Self.resolvingLinks(path))
            return
        }
        switch info.st_mode & S_IFMT {
        case S_IFDIR:
            throw CommandFailure(status: .localFile, message: "\(option) \(path): is a directory; give a file name")
        case S_IFCHR, S_IFIFO:
            self = .device(path)
        case S_IFREG:
            for input in inputs {
                if let inputInfo = try? POSIX.status(at: cPath(input)), inputInfo.st_dev == info.st_dev,
                    inputInfo.st_ino == info.st_ino
                {
                    throw CommandFailure(
                        status: .localFile, message: "\(option) \(path): is \(input), an input of the form")
                }
            }
            self = .file(Self.resolvingLinks(path))
        default:
            throw CommandFailure(status: .localFile, message: "\(option) \(path): not a regular file or a device")
        }
    }

    /// Writes the form's body.
    func write(_ form: MultipartFormData, option: String) throws {
        try write(option: option) { descriptor, path in
            do throws(MultipartError) {
                try form.writeBody(to: descriptor, at: URL(fileURLWithPath: path))
            } catch {
                throw CommandFailure(status: .localFile, message: error.description)
            }
        }
    }

    /// The output opened for writing: its descriptor and, for a regular file, the temporary file beside it that
    /// replaces it once complete.
    struct Opened {
        let descriptor: Int32
        /// The path as errors name it.
        let path: String
        let temporary: String?
        /// Whether the descriptor is the output's own, to close (not standard output).
        let isOwn: Bool
    }

    /// Opens the output: standard output, the device, or a new temporary file beside the file.
    func open(option: String) throws -> Opened {
        switch self {
        case .standardOutput:
            return Opened(descriptor: FileHandle.standardOutput.fileDescriptor, path: "-", temporary: nil, isOwn: false)
        case .device(let path):
            let descriptor = try Self.open(path, O_WRONLY | O_CLOEXEC, option: option)
            return Opened(descriptor: descriptor, path: path, temporary: nil, isOwn: true)
        case .file(let path):
            let url = URL(fileURLWithPath: path)
            let temporary = url.deletingLastPathComponent()
                .appendingPathComponent(".\(url.lastPathComponent).multipart-\(UUID().uuidString)").path
            let descriptor = try Self.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, option: option)
            return Opened(descriptor: descriptor, path: path, temporary: temporary, isOwn: true)
        }
    }

    /// Closes `opened`, and puts a temporary file in place of the output.
    static func commit(_ opened: Opened, option: String) throws {
        if opened.isOwn { POSIX.close(opened.descriptor) }
        guard let temporary = opened.temporary else { return }
        do throws(POSIX.Failure) {
            try POSIX.rename(cPath(temporary), to: cPath(opened.path))
        } catch {
            try? POSIX.unlink(cPath(temporary))
            throw CommandFailure(status: .localFile, message: failure(option, opened.path, error.code))
        }
    }

    /// Closes `opened` and removes its temporary file, which it made, and nothing else.
    static func abandon(_ opened: Opened) {
        if opened.isOwn { POSIX.close(opened.descriptor) }
        if let temporary = opened.temporary { try? POSIX.unlink(cPath(temporary)) }
    }

    /// Writes `data` to `opened`, a failure named as `option`'s.
    static func write(_ data: Data, to opened: Opened, option: String) throws {
        do throws(POSIX.Failure) {
            try POSIX.writeAll(opened.descriptor, data)
        } catch {
            throw CommandFailure(status: .localFile, message: failure(option, opened.path, error.code))
        }
    }

    /// Has `fill` write to the opened output, which is put in place once `fill` is done.
    private func write(option: String, fill: (Int32, String) throws -> Void) throws {
        let opened = try open(option: option)
        do {
            try fill(opened.descriptor, opened.path)
        } catch {
            Self.abandon(opened)
            throw error
        }
        try Self.commit(opened, option: option)
    }

    /// Opens `path`, a failure named as `option`'s.
    private static func open(_ path: String, _ flags: Int32, option: String) throws -> Int32 {
        do throws(POSIX.Failure) {
            return try POSIX.open(cPath(path), flags, mode: 0o644)
        } catch {
            throw CommandFailure(status: .localFile, message: failure(option, path, error.code))
        }
    }

    /// `path` with every symbolic link along it resolved, so that a link is written through, not replaced.
    private static func resolvingLinks(_ path: String) -> String {
        guard let resolved = realpath(cPath(path), nil) else { return path }
        defer { free(resolved) }
        return RawArguments.decode(Array(UnsafeBufferPointer(start: resolved, count: strlen(resolved))))
    }

    private static func failure(_ option: String, _ path: String, _ code: Int32) -> String {
        "\(option) \(path): \(String(cString: strerror(code)))"
    }
}
/// The bytes a path argument stands for, for the C calls (see ``RawArguments``).
private func cPath(_ path: String) -> [CChar] {
    RawArguments.fileSystemRepresentation(path)
}
