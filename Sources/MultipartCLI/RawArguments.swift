import Foundation
import MultipartStream

/// The command's arguments as strings that keep every byte, so that a file whose name is not UTF-8 is still found:
/// a byte that is not part of valid UTF-8 becomes one of the 256 private-use code points U+10FF00–U+10FFFF, and
/// ``fileSystemRepresentation(_:)`` turns them back into the bytes they were.
enum RawArguments {
    private static let escapeBase: UInt32 = 0x10_FF00

    /// The arguments after the program name.
    static var current: [String] {
        (1..<Int(CommandLine.argc)).compactMap { index in
            CommandLine.unsafeArgv[index].map { decode(Array(UnsafeBufferPointer(start: $0, count: strlen($0)))) }
        }
    }

    /// `bytes` as UTF-8, each byte that is not valid UTF-8 escaped.
    static func decode(_ bytes: [CChar]) -> String {
        let bytes = bytes.map { UInt8(bitPattern: $0) }
        if let valid = String(validUTF8: bytes) { return valid }
        var scalars = String.UnicodeScalarView()
        var index = 0
        while index < bytes.count {
            let length =
                switch bytes[index] {
                case 0xC2...0xDF: 2
                case 0xE0...0xEF: 3
                case 0xF0...0xF4: 4
                default: 1
                }
            if index + length <= bytes.count,
                let sequence = String(validUTF8: bytes[index..<index + length]),
                sequence.unicodeScalars.count == 1
            {
                scalars.append(sequence.unicodeScalars.first!)
                index += length
            } else {
                scalars.append(Unicode.Scalar(escapeBase + UInt32(bytes[index]))!)
                index += 1
            }
        }
        return String(scalars)
    }

    /// The bytes `string` stands for, escapes turned back, NUL-terminated for the C calls that take a path.
    static func fileSystemRepresentation(_ string: String) -> [CChar] {
        bytes(of: string).map { CChar(bitPattern: $0) } + [0]
    }

    /// The bytes `string` stands for, as a field's value carries them.
    static func data(_ string: String) -> Data {
        Data(bytes(of: string))
    }

    /// Whether `string` is an argument's bytes as they were: valid UTF-8, with nothing escaped.
    static func isUTF8(_ string: String) -> Bool {
        !string.unicodeScalars.contains { (escapeBase...escapeBase + 0xFF).contains($0.value) }
    }

    /// The bytes `string` stands for, escapes turned back.
    private static func bytes(of string: String) -> [UInt8] {
        var bytes: [UInt8] = []
        for scalar in string.unicodeScalars {
            if (escapeBase...escapeBase + 0xFF).contains(scalar.value) {
                bytes.append(UInt8(scalar.value - escapeBase))
            } else {
                bytes += String(scalar).utf8
            }
        }
        return bytes
    }

    /// A file URL for the path `string` stands for.
    ///
    /// Foundation's URL holds only UTF-8 paths: a path that is not is opened here, by its bytes, and reached
    /// through its descriptor's `/dev/fd` entry, which stays open while the command runs. One that cannot be opened
    /// gets its lossy path, which the error then names.
    static func fileURL(_ string: String) -> URL {
        let pathBytes = bytes(of: string)
        guard String(validUTF8: pathBytes) == nil else { return URL(fileURLWithPath: string) }
        guard let descriptor = try? POSIX.open(fileSystemRepresentation(string), O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        else {
            return URL(fileURLWithPath: String(decoding: pathBytes, as: UTF8.self))
        }
        return URL(fileURLWithPath: "/dev/fd/\(descriptor)")
    }

    /// The file name to send for the path `string`: its last component, with bytes that are not UTF-8 as U+FFFD.
    static func fileName(_ string: String) -> String {
        let last = bytes(of: string).split(separator: UInt8(ascii: "/")).last ?? []
        return String(decoding: last, as: UTF8.self)
    }
}
