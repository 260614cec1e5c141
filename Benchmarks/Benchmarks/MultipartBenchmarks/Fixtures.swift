import Foundation
import MultipartKit
import MultipartStream
import MultipartStreamTestSupport
import NIOCore
import NIOHTTP1

#if canImport(Glibc)
    import Glibc
#endif

/// The files and forms the benchmarks read, made once per run in a directory of their own.
enum Fixtures {
    static let directory: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("MultipartStreamBenchmarks")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }()

    /// 1 GiB of pseudo-random bytes (incompressible, so no filesystem can shortcut it).
    static let file1GiB = randomFile("random-1GiB.bin", size: 1 << 30)

    static let fileForm1GiB: MultipartFormData = {
        var form = MultipartFormData()
        try! form.append(fileURL: file1GiB, name: "file")
        return form
    }()

    /// 100,000 text fields of 10 to 100 bytes.
    static let manySmallFields: MultipartFormData = {
        var form = MultipartFormData()
        for (index, length) in smallFieldLengths.enumerated() {
            form.append(String(repeating: "v", count: length), name: "field\(index)")
        }
        return form
    }()

    private static let smallFieldLengths: [Int] = {
        var generator = SeededGenerator(seed: 2)
        return (0..<100_000).map { _ in Int.random(in: 10...100, using: &generator) }
    }()

    /// The same body as `manySmallFields`, as the 300,001 byte arrays it is made of (each part's delimiter,
    /// headers and value, then the close delimiter): what the reader copies, without the reader.
    static let manySmallFieldSegments: [[UInt8]] = {
        let boundary = manySmallFields.boundary
        var segments: [[UInt8]] = []
        for (index, length) in smallFieldLengths.enumerated() {
            segments.append(Array("\(index == 0 ? "" : "\r\n")--\(boundary)\r\n".utf8))
            segments.append(Array("Content-Disposition: form-data; name=\"field\(index)\"\r\n\r\n".utf8))
            segments.append([UInt8](repeating: UInt8(ascii: "v"), count: length))
        }
        segments.append(Array("\r\n--\(boundary)--\r\n".utf8))
        precondition(Data(segments.joined()) == (try! manySmallFields.encode()), "the segments are not the body")
        return segments
    }()

    /// 1,000 parts of 1 KiB to 1 MiB, a third each in memory, in files and from stream factories.
    static let mixed: MultipartFormData = {
        var generator = SeededGenerator(seed: 3)
        var form = MultipartFormData()
        for index in 0..<1_000 {
            let length = Int.random(in: 1 << 10...1 << 20, using: &generator)
            switch index % 3 {
            case 0:
                form.append(Data(repeating: UInt8(truncatingIfNeeded: index), count: length), name: "data\(index)")
            case 1:
                let url = randomFile("mixed-\(index).bin", size: length)
                try! form.append(fileURL: url, name: "file\(index)")
            default:
                let bytes = Data(repeating: UInt8(truncatingIfNeeded: index), count: length)
                form.append(length: UInt64(length), name: "stream\(index)", fileName: "s\(index).bin") {
                    InputStream(data: bytes)
                }
            }
        }
        return form
    }()

    /// 100 parts of 1 MiB in memory, for `encode()` and for multipart-kit's serializer.
    static let inMemoryParts: [(name: String, fileName: String, body: Data)] = (0..<100).map { index in
        ("part\(index)", "part\(index).bin", Data(repeating: UInt8(index), count: 1 << 20))
    }

    static let inMemoryForm: MultipartFormData = {
        var form = MultipartFormData()
        for part in inMemoryParts {
            form.append(part.body, name: part.name, fileName: part.fileName, mimeType: "application/octet-stream")
        }
        return form
    }()

    static let multipartKitParts: [MultipartPart] = inMemoryParts.map { part in
        var headers = HTTPHeaders()
        headers.add(
            name: "Content-Disposition", value: "form-data; name=\"\(part.name)\"; filename=\"\(part.fileName)\"")
        headers.add(name: "Content-Type", value: "application/octet-stream")
        return MultipartPart(headers: headers, body: ByteBuffer(bytes: part.body))
    }

    /// A sparse file: its length costs no disk, and reading it costs only the copy.
    static func sparseFile(_ name: String, size: Int) -> URL {
        let url = directory.appendingPathComponent(name)
        if (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) != size {
            _ = FileManager.default.createFile(atPath: url.path, contents: nil)
            precondition(truncate(url.path, off_t(size)) == 0)
        }
        return url
    }

    static func randomFile(_ name: String, size: Int) -> URL {
        let url = directory.appendingPathComponent(name)
        if (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) == size { return url }
        var generator = SeededGenerator(seed: UInt64(size))
        try! generator.writeFile(at: url, size: UInt64(size))
        return url
    }
}
