import Foundation
import MultipartStream

/// A command line that cannot run: exit status 2, with the message and a usage line.
struct UsageError: Error, Equatable {
    var message: String

    init(_ message: String) {
        self.message = message
    }
}

/// What the command line asks for.
struct Options: Equatable {
    var fields: [FieldArgument] = []
    var headers: [Header] = []
    var method: String?
    var boundary: String?
    var strategy = MultipartUploadStrategy.automatic
    /// Bytes per second, from `--limit-rate`.
    var rateLimit: Int?
    /// `-o`: the response body, or without a URL the encoded body; `-` is standard output.
    var output: String?
    /// `--output-body`: the encoded body, not uploaded; `-` is standard output.
    var outputBody: String?
    var silent = false
    var verbose = false
    var help = false
    var url: URL?

    /// A request header from `-H 'Name: value'`.
    struct Header: Equatable {
        var name: String
        var value: String
    }

    init() {}

    /// Parses the arguments after the program name.
    init(parsing arguments: [String]) throws(UsageError) {
        var rest = arguments[...]
        func value(for option: String) throws(UsageError) -> String {
            guard let value = rest.popFirst() else { throw UsageError("\(option) needs a value") }
            return value
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "-F", "--form": fields.append(try FieldArgument(parsing: try value(for: argument)))
            case "-H", "--header": headers.append(try Self.header(try value(for: argument)))
            case "-X", "--request": method = try Self.method(try value(for: argument))
            case "--boundary": boundary = try value(for: argument)
            case "--strategy": strategy = try Self.strategy(try value(for: argument))
            case "--limit-rate": rateLimit = try Self.rate(try value(for: argument))
            case "-o", "--output": output = try value(for: argument)
            case "--output-body": outputBody = try value(for: argument)
            case "-s", "--silent": silent = true
            case "-v", "--verbose": verbose = true
            case "-h", "--help": help = true
            case _ where argument.hasPrefix("-F") && argument.count > 2:
                fields.append(try FieldArgument(parsing: String(argument.dropFirst(2))))
            case _ where argument.hasPrefix("-") && argument != "-":
                throw UsageError("unknown option \(argument)")
            default:
                guard url == nil else { throw UsageError("more than one URL: \(url!.absoluteString) and \(argument)") }
                guard let parsed = URL(string: argument), let scheme = parsed.scheme?.lowercased(),
                    ["http", "https"].contains(scheme), parsed.host != nil
                else { throw UsageError("not an http or https URL: \(argument)") }
                url = parsed
            }
        }
        guard !help else { return }
        if url == nil, output == nil, outputBody == nil {
            throw UsageError("give a URL to upload to, or -o FILE (- for standard output) to write the body")
        }
        if url != nil, outputBody != nil {
            throw UsageError("--output-body writes the body instead of uploading it: leave out the URL")
        }
    }

    /// `-H 'Name: value'`: a name that is an HTTP token, a value without CR, LF or other controls, so that no
    /// argument can add a header line of its own.
    private static func header(_ line: String) throws(UsageError) -> Header {
        guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
            throw UsageError("-H \(line.debugDescription): expected 'Name: value'")
        }
        let name = String(line[..<colon])
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        guard isToken(name) else {
            throw UsageError("-H \(line.debugDescription): the name must be letters, digits and !#$%&'*+-.^_`|~")
        }
        guard PartHeaders.isValidValue(value) else {
            throw UsageError("-H \(line.debugDescription): the value holds CR, LF or another control character")
        }
        return Header(name: name, value: value)
    }

    /// `-X METHOD`: an HTTP token, so that it cannot end the request line, and one that may carry a body.
    private static func method(_ method: String) throws(UsageError) -> String {
        guard isToken(method) else {
            throw UsageError("-X \(method.debugDescription): a method must be letters, digits and !#$%&'*+-.^_`|~")
        }
        // curl sends a body with any method; URLSession refuses one with GET or HEAD, and the form must not turn
        // into a POST the caller did not ask for.
        guard !["GET", "HEAD"].contains(method.uppercased()) else {
            throw UsageError(
                "-X \(method): URLSession sends no body with \(method.uppercased()); use POST, PUT or PATCH")
        }
        return method
    }

    /// RFC 9110 `token`.
    private static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy(Boundary.isTokenCharacter)
    }

    private static func strategy(_ name: String) throws(UsageError) -> MultipartUploadStrategy {
        switch name {
        case "automatic": .automatic
        case "stream": .stream
        case "file": .file
        default: throw UsageError("--strategy \(name): expected stream, file or automatic")
        }
    }

    /// curl's `--limit-rate`: bytes per second, with an optional K, M or G suffix (powers of 1024).
    private static func rate(_ text: String) throws(UsageError) -> Int {
        let multipliers: [Character: Int] = ["k": 1 << 10, "m": 1 << 20, "g": 1 << 30]
        var digits = Substring(text)
        var multiplier = 1
        if let last = text.last?.lowercased().first, let value = multipliers[last] {
            multiplier = value
            digits = digits.dropLast()
        }
        guard let number = Int(digits), number > 0 else {
            throw UsageError("--limit-rate \(text): expected a positive number of bytes per second, like 500K")
        }
        let (rate, overflow) = number.multipliedReportingOverflow(by: multiplier)
        guard !overflow else { throw UsageError("--limit-rate \(text): more bytes per second than can be counted") }
        return rate
    }
}
