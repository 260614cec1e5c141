import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The exit statuses, as `--help` documents them.
enum ExitStatus: Int32 {
    case success = 0
    case usage = 2
    case localFile = 3
    case network = 4
}

/// A failure that ends the command with `status`, after printing `message` on stderr.
struct CommandFailure: Error {
    var status: ExitStatus
    var message: String
}

/// Runs the command: builds the form from the options, then uploads it or writes it.
enum Command {
    static func run(_ arguments: [String]) async -> ExitStatus {
        do {
            let options = try Options(parsing: arguments)
            if options.help {
                print(usage)
                return .success
            }
            let form = try makeForm(options)
            // Where the output goes is settled, and checked against the inputs, before a byte is sent.
            let inputs = options.fields.compactMap(\.path)
            if let url = options.url {
                let output = try options.output.map { try OutputFile($0, option: "-o", inputs: inputs) }
                try await upload(form, to: url, options: options, output: output ?? .standardOutput)
            } else {
                let option = options.outputBody != nil ? "--output-body" : "-o"
                let output = try OutputFile(options.outputBody ?? options.output!, option: option, inputs: inputs)
                try output.write(form, option: option)
                printError("Content-Type: \(form.contentType)\nContent-Length: \(form.contentLength)")
            }
            return .success
        } catch let error as UsageError {
            printError(
                "multipart: \(error.message)\nusage: multipart [-F name=value|name=@file|name=<file]... [options] [URL] (see --help)"
            )
            return .usage
        } catch let failure as CommandFailure {
            printError("multipart: \(failure.message)")
            return failure.status
        } catch {
            printError("multipart: \(error)")
            return .network
        }
    }

    /// The form the `-F` arguments describe. Every file is checked here, before a byte is sent.
    static func makeForm(_ options: Options) throws -> MultipartFormData {
        var form: MultipartFormData
        if let boundary = options.boundary {
            do {
                form = try MultipartFormData(boundary: boundary)
            } catch {
                throw UsageError("--boundary: \(error.reason.description)")
            }
        } else {
            form = MultipartFormData()
        }
        if let rate = options.rateLimit {
            // Packets of a tenth of a second, at most 64 KiB, each followed by the pause that keeps the rate.
            let packet = max(1, min(64 << 10, rate / 10))
            form.throttleBandwidth(packetSize: packet, delay: Double(packet) / Double(rate))
        }
        for field in options.fields {
            switch field {
            case .text(let name, let value, nil):
                form.append(value, name: name)
            case .text(let name, let value, let type?):
                form.append(Data(value.utf8), name: name, mimeType: type)
            case .file(let name, let path, let type, let fileName):
                do {
                    try form.append(
                        fileURL: RawArguments.fileURL(path), name: name,
                        fileName: fileName ?? RawArguments.fileName(path), mimeType: type)
                } catch let error where error.reason.isFileProblem {
                    throw CommandFailure(
                        status: .localFile, message: "-F \(name)=@\(path): \(error.reason.description)")
                } catch {
                    throw UsageError("-F \(name): \(error.reason.description)")
                }
            case .textFromFile(let name, let path, let type):
                guard let contents = try? Data(contentsOf: RawArguments.fileURL(path)) else {
                    throw CommandFailure(status: .localFile, message: "-F \(name)=<\(path): cannot read \(path)")
                }
                form.append(contents, name: name, mimeType: type)
            }
        }
        if let error = form.appendError { throw UsageError("-F \(error.partName ?? ""): \(error.reason.description)") }
        return form
    }

    static func upload(_ form: MultipartFormData, to url: URL, options: Options, output: OutputFile) async throws {
        var request = URLRequest(url: url)
        request.httpMethod = options.method ?? "POST"
        for header in options.headers {
            request.addValue(header.value, forHTTPHeaderField: header.name)
        }
        if options.verbose {
            printError("> \(request.httpMethod!) \(url.absoluteString)")
            for (name, value) in (request.allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key }) {
                printError("> \(name): \(value)")
            }
            printError(
                "> Content-Type: \(form.contentType)\n> (body: \(form.count) parts, \(form.contentLength) bytes)")
        }
        let progress = ProgressReporter(silent: options.silent)
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await URLSession.shared.upload(
                form, with: request, strategy: options.strategy, progress: progress.report)
        } catch let error as MultipartError {
            progress.finish(outcome: "failed")
            throw CommandFailure(status: error.reason.isFileProblem ? .localFile : .network, message: error.description)
        } catch {
            progress.finish(outcome: "failed")
            throw CommandFailure(status: .network, message: "\(url.absoluteString): \(error.localizedDescription)")
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        progress.finish(outcome: "HTTP \(status)")
        if options.verbose, let http = response as? HTTPURLResponse {
            printError("< HTTP \(status)")
            for (name, value) in http.allHeaderFields { printError("< \(name): \(value)") }
        }
        guard status < 400 else {
            let firstLines = String(decoding: data.prefix(2_000), as: UTF8.self).split(separator: "\n").prefix(5)
            throw CommandFailure(
                status: .network,
                message: "\(url.absoluteString) answered HTTP \(status)\n" + firstLines.joined(separator: "\n"))
        }
        try output.write(data, option: "-o")
    }

    static func printError(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}

extension MultipartError.Reason {
    /// Whether the reason is about a local file (exit status 3) rather than the form or the network.
    var isFileProblem: Bool {
        switch self {
        case .notAFileURL, .fileNotFound, .isDirectory, .fileSizeUnavailable, .fileUnreadable, .fileVanished,
            .fileSizeChanged, .fileChanged, .fileReadFailed, .outputFileExists, .outputWriteFailed:
            true
        default:
            false
        }
    }

}
