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
    /// 128 and the signal's number, as a shell reports a process a signal ended.
    case interrupted = 130
    case terminated = 143
}

/// A failure that ends the command with `status`, after printing `message` on stderr.
struct CommandFailure: Error {
    var status: ExitStatus
    var message: String
}

/// Runs the command: builds the form from the options, then uploads it or writes it.
enum Command {
    static func run(_ arguments: [String]) async -> ExitStatus {
        let options: Options
        do {
            options = try Options(parsing: arguments)
        } catch {
            printUsageError(error)
            return .usage
        }
        if options.help {
            print(usage)
            return .success
        }
        if options.version {
            print(Version.description)
            return .success
        }
        if options.listsSaved { return listSavedUploads(options) }
        if let queue = options.queue { return await queueCommand(options, directory: queue) }
        do {
            // `@-` under `-C -` goes out as it is read, with no copy, where the server speaks the draft (else the
            // library copies it once); otherwise it is copied to a file that lives until the command ends.
            let readsStandardInput = options.fields.contains { $0.readsStandardInput && $0.isFile }
            let streamsStandardInput = readsStandardInput && options.resumes && options.url != nil
            let spool = readsStandardInput && !streamsStandardInput ? try StandardInputSpool() : nil
            let form = try makeForm(options, standardInput: spool)
            // Where the output goes is settled, and checked against the inputs, before a byte is sent.
            let inputs = options.fields.compactMap(\.path)
            if let url = options.url {
                let output = try options.output.map { try OutputFile($0, option: "-o", inputs: inputs) }
                try await upload(form, to: url, options: options, output: output ?? .standardOutput)
            } else {
                let option = options.outputBody != nil ? "--output-body" : "-o"
                let output = try OutputFile(options.outputBody ?? options.output!, option: option, inputs: inputs)
                try output.write(form, option: option)
                printError("Content-Type: \(form.contentType)\nContent-Length: \(form.contentLength ?? 0)")
            }
            withExtendedLifetime(spool) {}
            return .success
        } catch {
            return ended(by: error, options: options)
        }
    }

    /// Says why the command failed, and with which status: a usage error always, anything else unless `-s`.
    static func ended(by error: any Error, options: Options) -> ExitStatus {
        // curl's -s silences errors too, and -S brings them back.
        let says = !options.silent || options.showError
        switch error {
        case let error as UsageError:
            printUsageError(error)
            return .usage
        case let failure as CommandFailure:
            if says { printError("multipart: \(failure.message)") }
            return failure.status
        case let error as MultipartError:
            if says { printError("multipart: \(error.description)") }
            switch error.reason {
            case .credentialNotQueued, .streamNotQueued: return .usage
            case .stateUnwritable: return .localFile
            default: return error.category == .file ? .localFile : .network
            }
        default:
            if says { printError("multipart: \(error)") }
            return .network
        }
    }

    static func printUsageError(_ error: UsageError) {
        printError(
            "multipart: \(error.message)\nusage: multipart [-F name=value|name=@file|name=<file]... [options] [URL] "
                + "(see --help)")
    }

    /// The form the `-F` arguments describe. Every file is checked here, before a byte is sent.
    static func makeForm(_ options: Options, standardInput spool: StandardInputSpool? = nil) throws -> MultipartFormData
    {
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
        for field in options.fields {
            try checkHeaderText(of: field)
            switch field {
            case .text(let name, let value, let type, let headers):
                // The argument's bytes, which need not be UTF-8.
                try append(RawArguments.data(value), to: &form, name: name, type: type, headers: headers)
            case .file(let name, let path, let type, let fileName, let headers):
                let isStandardInput = path == FieldArgument.standardInput
                let sentName = fileName ?? (isStandardInput ? "-" : RawArguments.fileName(path))
                let lines = try partHeaders(
                    name: name, fileName: sentName,
                    type: type ?? CurlContentType.forFile(named: sentName, fromStandardInput: isStandardInput),
                    headers: headers)
                do {
                    if isStandardInput, spool == nil, let input = InputStream(fileAtPath: "/dev/stdin") {
                        // Streamed as it is read, under `-C -`: a part of unknown length.
                        try form.append(headers: lines, stream: input)
                    } else {
                        try form.append(
                            headers: lines, fileURL: RawArguments.fileURL(isStandardInput ? spool!.path : path))
                    }
                } catch let error where error.isFileProblem {
                    throw CommandFailure(
                        status: .localFile, message: "-F \(name)=@\(path): \(error.reason.description)")
                } catch {
                    throw UsageError("-F \(name): \(error.reason.description)")
                }
            case .textFromFile(let name, let path, let type, let headers):
                let contents: Data
                if path == FieldArgument.standardInput {
                    contents = try StandardInputSpool.readAll()
                } else {
                    let url = RawArguments.fileURL(path)
                    do {
                        contents = try Data(contentsOf: url)
                    } catch {
                        // Said as a file part's problem is said.
                        let reason =
                            FileManager.default.fileExists(atPath: url.path)
                            ? "cannot read \(url.path)" : "no file at \(url.path)"
                        throw CommandFailure(status: .localFile, message: "-F \(name)=<\(path): \(reason)")
                    }
                }
                try append(contents, to: &form, name: name, type: type, headers: headers)
            }
        }
        if let error = form.appendError {
            throw UsageError("-F \(error.part?.name ?? ""): \(error.reason.description)")
        }
        return form
    }

    /// Refuses a field whose name, `;type=`, `;filename=` or `;headers=` line is not UTF-8: those go into header
    /// lines, which hold text, and sending the bytes changed would be sending something else than was asked.
    private static func checkHeaderText(of field: FieldArgument) throws {
        let texts: [(what: String, text: String?)]
        switch field {
        case .text(let name, _, let type, let headers), .textFromFile(let name, _, let type, let headers):
            texts = [("name", name), (";type=", type)] + headers.map { (";headers=", $0.text) }
        case .file(let name, _, let type, let fileName, let headers):
            texts =
                [("name", name), (";type=", type), (";filename=", fileName)] + headers.map { (";headers=", $0.text) }
        }
        for (what, text) in texts {
            guard let text, !RawArguments.isUTF8(text) else { continue }
            throw UsageError("-F: the field's \(what) is not UTF-8, and a part header holds only text")
        }
    }

    /// A text field, with its `;headers=` lines when it has any.
    private static func append(
        _ value: Data, to form: inout MultipartFormData, name: String, type: String?,
        headers: [FieldArgument.PartHeader]
    ) throws {
        guard !headers.isEmpty else {
            // A field with a type is sent as curl sends it: a Content-Type line, no filename.
            return form.append(value, name: name, mimeType: type)
        }
        let lines = try partHeaders(name: name, fileName: nil, type: type, headers: headers)
        do {
            try form.append(headers: lines, body: value)
        } catch {
            throw UsageError("-F \(name): \(error.reason.description)")
        }
    }

    /// The part's header lines as curl writes them: `Content-Disposition`, `Content-Type`, then the `;headers=`
    /// lines in order, those of a `headers=@file` being its lines but blank ones and `#` comments.
    private static func partHeaders(
        name: String, fileName: String?, type: String?, headers: [FieldArgument.PartHeader]
    ) throws -> [(name: String, value: String)] {
        let disposition = PartHeaders.formDataDisposition(name: name, fileName: fileName)
        var lines = [(name: "Content-Disposition", value: String(decoding: disposition, as: UTF8.self))]
        if let type { lines.append((name: "Content-Type", value: type)) }
        for header in headers {
            let texts: [Substring]
            switch header {
            case .line(let line):
                texts = [Substring(line)]
            case .file(let path):
                guard let contents = try? String(contentsOf: RawArguments.fileURL(path), encoding: .utf8) else {
                    throw CommandFailure(
                        status: .localFile, message: "-F \(name): cannot read the headers file \(path)")
                }
                texts = contents.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
                    .map { $0.hasSuffix("\r") ? $0.dropLast() : $0 }
                    .filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty && !$0.hasPrefix("#") }
            }
            for text in texts {
                guard let line = Options.split(headerLine: text) else {
                    throw UsageError("-F \(name): header \(String(text).debugDescription) is not 'Name: value'")
                }
                lines.append(line)
            }
        }
        return lines
    }

    static func upload(_ form: MultipartFormData, to url: URL, options: Options, output: OutputFile) async throws {
        let request = request(to: url, options: options)
        if options.verbose { RequestLog.print(request, form: form, resumable: options.resumes) }
        if options.abandons { return try await abandon(form, request: request, options: options) }
        if options.resumes { Interruption.shared.install() }
        var report = TransferReport(effectiveURL: url.absoluteString)
        // Written whatever the status, as curl writes it: an error page is often what explains the error.
        let writer = AnswerWriter(output, includesHeaders: options.includeHeaders, head: statusAndHeaders)
        do {
            let answer: Transfer.Answer
            let body: (count: Int, firstBytes: Data)
            do {
                answer = try await Transfer(form: form, request: request, options: options, writer: writer)
                    .run(report: &report)
                body = try writer.finish(answer.response)
            } catch {
                writer.abandon()
                throw error
            }
            report.bytesDownloaded = body.count
            let http = answer.response
            if options.verbose {
                printError("< HTTP \(http.statusCode)")
                for (name, value) in http.allHeaderFields { printError("< \(name): \(value)") }
            }
            guard http.statusCode < 400 else {
                let firstLines = String(decoding: body.firstBytes, as: UTF8.self).split(separator: "\n").prefix(5)
                throw CommandFailure(
                    status: .network,
                    message: "\(report.effectiveURL) answered HTTP \(http.statusCode)\n"
                        + firstLines.joined(separator: "\n"))
            }
            writeOut(options, report)
        } catch let failure as CommandFailure {
            report.exitCode = failure.status.rawValue
            writeOut(options, report)
            throw failure
        }
    }

    /// The request for `url`, with the headers curl sends of its own accord (`User-Agent`, `Accept`), set here so that
    /// `-v` can show them, and none that curl does not: URLSession's `Accept-Language` and libcurl's `Accept-Encoding`
    /// are left out. Then `-u`, and each `-H`: the first of a name replaces a default, later ones add to it; `Name:`
    /// leaves the header out, and `Name;` sends it empty.
    static func request(to url: URL, options: Options) -> URLRequest {
        var request = URLRequest(url: url)
        request.httpMethod = options.method ?? "POST"
        request.setValue("multipart/\(Version.current)", forHTTPHeaderField: "User-Agent")
        request.setValue("*/*", forHTTPHeaderField: "Accept")
        for name in RequestLog.leftOut { request.setValue(RequestLog.omitted, forHTTPHeaderField: name) }
        if let user = options.user {
            // The argument's bytes: Basic carries any.
            request.setValue(
                "Basic " + RawArguments.data(user).base64EncodedString(), forHTTPHeaderField: "Authorization")
        }
        var named = Set<String>()
        for header in options.headers {
            guard let value = header.value else {
                request.setValue(RequestLog.omitted, forHTTPHeaderField: header.name)
                continue
            }
            if named.insert(header.name.lowercased()).inserted {
                request.setValue(value, forHTTPHeaderField: header.name)
            } else {
                request.addValue(value, forHTTPHeaderField: header.name)
            }
        }
        return request
    }

    /// `-C - --abandon`: deletes the saved upload of this form to this URL, on the server and here.
    private static func abandon(_ form: MultipartFormData, request: URLRequest, options: Options) async throws {
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let url = request.url?.absoluteString ?? ""
        do {
            let found = try await session.abandonUpload(
                form, with: request,
                resumption: Transfer.resumption(options, log: ResumableUploadLog(silent: options.silent)))
            if !options.silent {
                printError(
                    found
                        ? "multipart: abandoned the saved upload to \(url): deleted on the server and here"
                        : "multipart: there is no saved upload of this form to \(url)")
            }
        } catch let error as MultipartError {
            throw CommandFailure(status: .network, message: error.description)
        }
    }

    /// `-i`: a status line and the response's headers, sorted, then an empty line. URLSession tells neither the HTTP
    /// version nor the reason phrase: the line is `HTTP/1.1 CODE` and the standard phrase.
    @Sendable private static func statusAndHeaders(of response: HTTPURLResponse) -> Data {
        let capitalized = HTTPURLResponse.localizedString(forStatusCode: response.statusCode).capitalized
        let phrase = capitalized == "Ok" ? "OK" : capitalized
        var text = "HTTP/1.1 \(response.statusCode) \(phrase)\r\n"
        let fields = response.allHeaderFields.map { ("\($0.key)", "\($0.value)") }.sorted { $0.0 < $1.0 }
        for (name, value) in fields { text += "\(name): \(value)\r\n" }
        return Data((text + "\r\n").utf8)
    }

    /// `-w`: the report in the format asked, on standard output after the body.
    private static func writeOut(_ options: Options, _ report: TransferReport) {
        guard let format = writeOutFormat(options) else { return }
        writeOut(format, report)
    }

    /// `-w`'s format, read once; `nil` without `-w`, or when its file cannot be read (which is warned of).
    static func writeOutFormat(_ options: Options) -> String? {
        guard var format = options.writeOut else { return nil }
        if format.hasPrefix("@") {
            // curl's `-w @file` and `-w @-`: the format is the file's, or standard input's; one that cannot be read
            // is warned of, and nothing is written.
            let path = String(format.dropFirst())
            let data =
                path == FieldArgument.standardInput
                ? FileHandle.standardInput.readDataToEndOfFile() : try? Data(contentsOf: RawArguments.fileURL(path))
            guard let data else {
                if !options.silent { printError("multipart: warning: -w @\(path): cannot read \(path)") }
                return nil
            }
            format = String(decoding: data, as: UTF8.self)
        }
        return format
    }

    /// `report` in `format`, on standard output.
    static func writeOut(_ format: String, _ report: TransferReport) {
        var warnings: [String] = []
        let text = report.render(format, warnings: &warnings)
        for warning in warnings { printError("multipart: \(warning)") }
        write(text, to: .standardOutput)
    }

    static func printError(_ text: String) {
        write(text + "\n", to: .standardError)
    }

    /// A line for people on standard output (a listing).
    static func printOut(_ text: String) {
        write(text + "\n", to: .standardOutput)
    }

    /// Writes `text` for people to read: the one way the command does, which leaves every credential out
    /// (``Redaction``).
    static func write(_ text: String, to handle: FileHandle) {
        handle.write(Data(Redaction.text(text).utf8))
    }
}

extension MultipartError {
    /// Whether the error is about a local file, read or written (exit status 3), rather than the form or the network.
    var isFileProblem: Bool {
        switch category {
        case .file, .output: true
        default: false
        }
    }

    /// Whether the error is about the saved upload's state here (a directory that cannot be kept, another process
    /// sending the upload): a local problem (exit status 3), which says so without naming the form.
    var isLocalStateProblem: Bool {
        switch reason {
        case .stateUnwritable, .uploadInProgress: true
        default: false
        }
    }
}
