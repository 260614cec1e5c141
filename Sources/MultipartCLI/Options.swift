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
    var strategy: Strategy?
    /// Bytes per second, from `--limit-rate`.
    var rateLimit: Int?
    /// `-o`: the response body, or without a URL the encoded body; `-` is standard output.
    var output: String?
    /// `--output-body`: the encoded body, not uploaded; `-` is standard output.
    var outputBody: String?
    /// `-u user:password`, sent as `Authorization: Basic`.
    var user: String?
    /// `-i`: the status line and response headers before the body.
    var includeHeaders = false
    /// `-w`: printed on standard output once the transfer ends.
    var writeOut: String?
    /// `-L`: follow redirects.
    var followRedirects = false
    /// `--location-trusted`: follow redirects, and send the credentials (`-u`, and `-H` Authorization, Cookie and
    /// Proxy-Authorization) to other hosts too.
    var trustsRedirects = false
    /// `--max-time`, seconds for each attempt.
    var maxTime: Double?
    /// `--connect-timeout`, seconds until the server takes the first body byte.
    var connectTimeout: Double?
    /// `--retry`: attempts after the first; `nil` when not given.
    var retryOption: Int?
    /// Attempts after the first: `--retry`, else none as in curl, but for `-C -`, whose upload is kept when they are
    /// spent, so that trying first loses nothing, ``resumableRetries`` failures in a row, or as many as
    /// `--retry-max-time` takes.
    var retries: Int {
        retryOption ?? (resumes ? (retryMaxTime == nil ? Self.resumableRetries : 1_000) : 0)
    }
    /// The retries of `-C -` without `--retry`: the library's, which wait out an outage of 3 minutes at least.
    static let resumableRetries = MultipartResumption().maximumAttempts
    /// `--retry-max-time`, seconds: with `-C -` the longest wait without progress; else, as in curl, no retry starts
    /// past it since the first attempt. `nil` (or 0) for no bound.
    var retryMaxTime: Double?
    /// `-C -`: a resumable upload, which sends only what the server lacks after a drop (`--retry` times).
    var resumes = false
    /// `--retry-delay`, seconds; `nil` (or 0) for curl's doubling backoff from 1 s.
    var retryDelay: Double?
    /// `--single-request-limit`: with `-C -` or a queue's run, the largest form sent in one request; `nil` for the
    /// library's.
    var singleRequestLimit: UInt64?
    /// `--state-dir`: where `-C -` keeps its uploads' state; `nil` for `$XDG_STATE_HOME/multipart`.
    var stateDirectory: String?
    /// `--abandon`: with `-C -`, give up the saved upload of this form (server and state) instead of sending it.
    var abandons = false
    /// `--list-saved`: list the saved uploads instead of sending anything.
    var listsSaved = false
    /// `--queue DIR`: add the form to the upload queue kept in DIR (with a URL), or send that queue (`--run`).
    var queue: String?
    /// `--run`: with `--queue DIR`, send the queue's uploads.
    var runsQueue = false
    /// `--parallel N`: with `--queue DIR --run`, how many uploads go at once.
    var parallel: Int?
    /// `--key K`: with `--queue DIR`, add the form only if no upload of the queue has this key.
    var queueKey: String?
    /// `--again`: with `--queue DIR --key K`, add the form even though K's last upload completed or was removed.
    var addsAgain = false
    /// `--list`, `--retry ID`, `--remove ID`, `--remove-completed`, `--pause ID`, `--resume ID`, `--prioritize ID`:
    /// with `--queue DIR`, look at or steer the queue.
    var queueChange: QueueChange?
    /// `--retry`'s value as given: a number of retries, or with `--queue DIR` the upload to retry.
    private var retryArgument: String?
    /// Every option given, by its long name, and as it was typed (`-v` or `--verbose`), in order: a queue's modes
    /// take some and refuse the rest by name.
    var given: [GivenOption] = []

    /// An option as it was typed, and its long name.
    struct GivenOption: Equatable {
        var name: String
        var typed: String
    }

    private static let oneQueueChange = UsageError(
        "one of --list, --retry ID, --remove ID, --remove-completed, --pause ID, --resume ID, --prioritize ID at a time"
    )

    /// What `--queue DIR` does besides adding and running.
    enum QueueChange: Equatable {
        /// `--list`: a line an upload.
        case list
        /// `--retry ID`: a failed upload goes again at the next run.
        case retry(String)
        /// `--remove ID`: the upload leaves the queue (given up on the server where it has not completed).
        case remove(String)
        /// `--remove-completed`: every completed upload leaves the queue.
        case removeCompleted
        /// `--pause ID`: the upload stays as it is until resumed.
        case pause(String)
        /// `--resume ID`: a paused upload goes again at the next run.
        case resume(String)
        /// `--prioritize ID`: the upload is the next to start, in this run and the next.
        case prioritize(String)
    }

    /// Where `-C -` keeps its state: `--state-dir`, else `$XDG_STATE_HOME/multipart` or `~/.local/state/multipart`.
    var stateDirectoryURL: URL {
        stateDirectory.map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? MultipartResumption.standardStateDirectory(named: "multipart")
    }
    /// `--speed-limit` and `--speed-time`: an attempt slower than this many bytes a second for that many seconds
    /// stalled.
    var speedLimit: UInt64?
    var speedTime: Double?
    var silent = false
    /// `-S`: error messages even with `-s`.
    var showError = false
    var verbose = false
    var help = false
    /// `-V`, `--version`: print the version and exit.
    var version = false
    var url: URL?

    /// A request header from `-H`, as curl reads it: `Name: value` sends it, `Name:` leaves it out (one URLSession
    /// or libcurl would add too), `Name;` sends it empty.
    struct Header: Equatable {
        var name: String
        /// The value; `nil` to leave the header out.
        var value: String?
    }

    init() {}

    /// Options that take a value, by their long names; short ones are mapped to these.
    private static let valueOptions: Set<String> = [
        "--form", "--form-string", "--header", "--request", "--boundary", "--strategy", "--limit-rate", "--output",
        "--output-body", "--user", "--user-agent", "--write-out", "--max-time", "--connect-timeout", "--retry",
        "--retry-delay", "--retry-max-time", "--continue-at", "--state-dir", "--speed-limit", "--speed-time",
        "--queue", "--parallel", "--key", "--remove", "--pause", "--resume", "--prioritize", "--single-request-limit",
    ]
    private static let shortOptions: [Character: String] = [
        "F": "--form", "H": "--header", "X": "--request", "o": "--output", "u": "--user", "A": "--user-agent",
        "w": "--write-out", "m": "--max-time", "s": "--silent", "S": "--show-error", "v": "--verbose", "h": "--help",
        "i": "--include", "L": "--location", "k": "--insecure", "C": "--continue-at", "Y": "--speed-limit",
        "y": "--speed-time", "V": "--version", "f": "--fail",
    ]

    /// Parses the arguments after the program name, as curl does: short flags combine (`-sSL`), the last one may
    /// take its value attached or from the next argument (`-Fa=1`, `-so out`), long options take theirs after `=` or
    /// as the next argument, and `--` ends the options.
    init(parsing arguments: [String]) throws(UsageError) {
        var rest = arguments[...]
        var optionsEnded = false
        while let argument = rest.popFirst() {
            if optionsEnded || argument == "-" || !argument.hasPrefix("-") {
                try setURL(argument)
            } else if argument == "--" {
                optionsEnded = true
            } else if argument.hasPrefix("--") {
                let equals = argument.firstIndex(of: "=")
                let name = String(argument[..<(equals ?? argument.endIndex)])
                let attached = equals.map { String(argument[argument.index(after: $0)...]) }
                if Self.valueOptions.contains(name) {
                    guard let value = attached ?? rest.popFirst() else { throw UsageError("\(name) needs a value") }
                    try apply(name, value: value)
                } else {
                    guard attached == nil else { throw UsageError("\(name) takes no value") }
                    try apply(name)
                }
                given.append(GivenOption(name: name, typed: name))
            } else {
                var letters = argument.dropFirst()
                while let letter = letters.popFirst() {
                    guard let name = Self.shortOptions[letter] else {
                        throw UsageError("unknown option -\(letter)\(argument.count > 2 ? " in \(argument)" : "")")
                    }
                    given.append(GivenOption(name: name, typed: "-\(letter)"))
                    if Self.valueOptions.contains(name) {
                        let value = letters.isEmpty ? rest.popFirst() : String(letters)
                        guard let value else { throw UsageError("-\(letter) needs a value") }
                        try apply(name, value: value)
                        break
                    }
                    try apply(name)
                }
            }
        }
        guard !help, !version else { return }
        if let retryArgument {
            if queue != nil {
                guard queueChange == nil else { throw Self.oneQueueChange }
                (queueChange, retryOption) = (.retry(retryArgument), nil)
            } else if retryOption == nil {
                throw UsageError("--retry \(retryArgument): expected a number of retries from 0 to 1000")
            }
            self.retryArgument = nil
        }
        if queue != nil || runsQueue || parallel != nil || queueKey != nil || addsAgain || queueChange != nil {
            try validateQueue()
            return
        }
        if listsSaved {
            guard url == nil, fields.isEmpty else {
                throw UsageError("--list-saved lists the saved uploads and sends nothing: leave out the URL and -F")
            }
            return
        }
        if url == nil, output == nil, outputBody == nil {
            throw UsageError("give a URL to upload to, or -o FILE (- for standard output) to write the body")
        }
        if url != nil, outputBody != nil {
            throw UsageError("--output-body writes the body instead of uploading it: leave out the URL")
        }
        if url != nil, fields.isEmpty {
            // curl would send a GET; a form with no field is rarely what was meant, and sends nothing useful.
            throw UsageError("no -F: nothing to upload (this command sends forms; curl without -F sends a GET)")
        }
        if rateLimit != nil, strategy == .file {
            throw UsageError(
                "--limit-rate paces the streamed body; --strategy file sends a file URLSession reads itself")
        }
        if strategy != nil, resumes {
            throw UsageError("--strategy chooses how a plain upload sends its body; -C - streams it, resuming")
        }
        if singleRequestLimit != nil, !resumes, queue == nil {
            throw UsageError(
                "--single-request-limit is about resumable uploads: give it with -C - or --queue DIR --run")
        }
        if (stateDirectory != nil || abandons) && !resumes {
            throw UsageError("\(abandons ? "--abandon" : "--state-dir") is about saved uploads, which only -C - makes")
        }
        if abandons, url == nil {
            throw UsageError("--abandon gives up the saved upload to a URL: give the URL")
        }
        if fields.filter(\.readsStandardInput).count + (writeOut == "@-" ? 1 : 0) > 1 {
            throw UsageError("standard input can be read once: only one -F may use @- or <-, or -w @-")
        }
    }

    /// Sets the option `name` (long form) that takes `value`.
    private mutating func apply(_ name: String, value: String) throws(UsageError) {
        switch name {
        case "--form": fields.append(try FieldArgument(parsing: value))
        case "--form-string": fields.append(try FieldArgument(literal: value))
        case "--header": headers.append(try Self.header(value))
        case "--request": method = try Self.method(value)
        case "--boundary": boundary = value
        case "--strategy": strategy = try Self.strategy(value)
        case "--limit-rate": rateLimit = try Self.rate(value)
        case "--single-request-limit": singleRequestLimit = try Self.bytes(value, option: name)
        case "--output": output = value
        case "--output-body": outputBody = value
        case "--user":
            guard value.contains(":") else {
                throw UsageError("-u \(value): give user:password (there is no password prompt)")
            }
            user = value
        case "--user-agent": headers.append(try Self.header("User-Agent: \(value)"))
        case "--write-out": writeOut = value
        case "--max-time": maxTime = try Self.seconds(value, option: name)
        case "--connect-timeout": connectTimeout = try Self.seconds(value, option: name)
        case "--continue-at":
            guard value == "-" else {
                throw UsageError(
                    "-C \(value): only -C - (find the offset yourself): the server says how much of the form it has")
            }
            resumes = true
        case "--retry":
            // With --queue, the upload to retry: known once every option is read.
            retryArgument = value
            retryOption = Int(value).flatMap { (0...1_000).contains($0) ? $0 : nil }
        case "--state-dir":
            guard !value.isEmpty else { throw UsageError("--state-dir needs a directory") }
            stateDirectory = value
        case "--speed-limit":
            guard let rate = UInt64(value), rate > 0 else {
                throw UsageError("--speed-limit \(value): expected a positive number of bytes per second")
            }
            speedLimit = rate
        case "--speed-time":
            speedTime = try Self.seconds(value, option: name)
        case "--queue":
            guard !value.isEmpty else { throw UsageError("--queue needs a directory") }
            queue = value
        case "--key":
            guard !value.isEmpty else { throw UsageError("--key needs a key") }
            queueKey = value
        case "--remove", "--pause", "--resume", "--prioritize":
            guard queueChange == nil else { throw Self.oneQueueChange }
            queueChange =
                switch name {
                case "--remove": .remove(value)
                case "--pause": .pause(value)
                case "--resume": .resume(value)
                default: .prioritize(value)
                }
        case "--parallel":
            guard let count = Int(value), (1...64).contains(count) else {
                throw UsageError("--parallel \(value): expected a number of uploads at once from 1 to 64")
            }
            parallel = count
        case "--retry-max-time":
            let seconds = try Self.seconds(value, option: name, allowingZero: true)
            retryMaxTime = seconds > 0 ? seconds : nil
        default:  // --retry-delay
            retryDelay = try Self.seconds(value, option: name, allowingZero: true)
        }
    }

    /// Sets the flag `name` (long form).
    private mutating func apply(_ name: String) throws(UsageError) {
        switch name {
        case "--silent": silent = true
        case "--show-error": showError = true
        case "--verbose": verbose = true
        case "--help": help = true
        case "--version": version = true
        case "--include": includeHeaders = true
        case "--abandon": abandons = true
        case "--list-saved": listsSaved = true
        case "--run": runsQueue = true
        case "--again": addsAgain = true
        case "--list", "--remove-completed":
            guard queueChange == nil else { throw Self.oneQueueChange }
            queueChange = name == "--list" ? .list : .removeCompleted
        case "--location": followRedirects = true
        case "--location-trusted":
            followRedirects = true
            trustsRedirects = true
        // curl's way to fail on HTTP 400 and above, which the command always does (exit 4, the body still written to
        // -o): a curl user's script that says so is taken at its word.
        case "--fail", "--fail-with-body": break
        case "--insecure":
            throw UsageError(
                "-k, --insecure: URLSession on Linux checks certificates inside libcurl and never asks its delegate, "
                    + "so it cannot skip the check; trust the server's certificate authority instead (SSL_CERT_FILE)")
        default: throw UsageError("unknown option \(name)")
        }
    }

    /// The one URL.
    private mutating func setURL(_ argument: String) throws(UsageError) {
        guard url == nil else { throw UsageError("more than one URL: \(url!.absoluteString) and \(argument)") }
        guard let parsed = URL(string: argument), let scheme = parsed.scheme?.lowercased(),
            ["http", "https"].contains(scheme), parsed.host != nil
        else { throw UsageError("not an http or https URL: \(argument)") }
        url = parsed
    }

    /// A number of seconds: positive (or zero, where it means "the default"), finite, at most a year.
    private static func seconds(_ text: String, option: String, allowingZero: Bool = false) throws(UsageError) -> Double
    {
        guard let seconds = Double(text), seconds.isFinite, seconds <= 31_536_000,
            allowingZero ? seconds >= 0 : seconds > 0
        else { throw UsageError("\(option) \(text): expected a number of seconds, like 2.5") }
        return seconds
    }

    /// `-H 'Name: value'`: a name that is an HTTP token, a value without CR, LF or other controls, so that no
    /// argument can add a header line of its own. As in curl, `Name:` with nothing after the colon removes the
    /// header, and `Name;` sends it with an empty value.
    private static func header(_ line: String) throws(UsageError) -> Header {
        guard RawArguments.isUTF8(line) else {
            throw UsageError("-H: the header is not UTF-8, and URLSession sends header values as text")
        }
        if !line.contains(":"), line.hasSuffix(";"), isToken(String(line.dropLast())) {
            return Header(name: String(line.dropLast()), value: "")
        }
        guard let (name, value) = split(headerLine: line[...]) else {
            throw UsageError("-H \(line.debugDescription): expected 'Name: value', 'Name:' or 'Name;'")
        }
        guard isToken(name) else {
            throw UsageError("-H \(line.debugDescription): the name must be letters, digits and !#$%&'*+-.^_`|~")
        }
        guard PartHeaders.isValidValue(value) else {
            throw UsageError("-H \(line.debugDescription): the value holds CR, LF or another control character")
        }
        return Header(name: name, value: value.isEmpty ? nil : value)
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

    /// `Name: value` split at the first colon, the value's surrounding blanks dropped; `nil` without a name. Also how
    /// `-F …;headers=` lines are read.
    static func split(headerLine line: Substring) -> (name: String, value: String)? {
        guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { return nil }
        return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
    }

    /// RFC 9110 `token`.
    private static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy(Boundary.isTokenCharacter)
    }

    /// The stall rule of `--speed-limit` and `--speed-time`, with curl's defaults for the one not given (1 byte a
    /// second, 30 s); `nil` when neither is.
    var stall: MultipartResumption.Stall? {
        guard speedLimit != nil || speedTime != nil else { return nil }
        return MultipartResumption.Stall(bytesPerSecond: speedLimit ?? 1, seconds: speedTime ?? 30)
    }

    /// `--strategy`'s names; `--limit-rate` and `-C -` make the library's strategy of it.
    enum Strategy: Equatable {
        case automatic, stream, file
    }

    private static func strategy(_ name: String) throws(UsageError) -> Strategy {
        switch name {
        case "automatic": .automatic
        case "stream": .stream
        case "file": .file
        default: throw UsageError("--strategy \(name): expected stream, file or automatic")
        }
    }

    /// A count of bytes, 0 or more, with an optional K, M or G suffix (powers of 1024).
    private static func bytes(_ text: String, option: String) throws(UsageError) -> UInt64 {
        let multipliers: [Character: UInt64] = ["k": 1 << 10, "m": 1 << 20, "g": 1 << 30]
        var digits = Substring(text)
        var multiplier: UInt64 = 1
        if let last = text.last?.lowercased().first, let value = multipliers[last] {
            multiplier = value
            digits = digits.dropLast()
        }
        guard let number = UInt64(digits) else {
            throw UsageError("\(option) \(text): expected a number of bytes, like 256K")
        }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: multiplier)
        guard !overflow else { throw UsageError("\(option) \(text): more bytes than can be counted") }
        return bytes
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
