/// One `-F` argument, in curl's grammar: `name=value`, `name=@file` (a file part) or `name=<file` (a text field
/// read from a file), `-` being standard input, each optionally followed by `;type=MIME`, for files
/// `;filename=NAME`, and any number of `;headers="Name: value"` or `;headers=@file`. A value or parameter may be
/// double-quoted, with `\"` and `\\` inside, to hold `;` or start with `@` or `<`.
enum FieldArgument: Equatable {
    case text(name: String, value: String, type: String?, headers: [PartHeader] = [])
    case file(name: String, path: String, type: String?, fileName: String?, headers: [PartHeader] = [])
    case textFromFile(name: String, path: String, type: String?, headers: [PartHeader] = [])

    /// A header line of the part's own, from `;headers=`.
    enum PartHeader: Equatable {
        /// `headers="Name: value"`.
        case line(String)
        /// `headers=@file`: the file's lines, blank lines and `#` comments left out.
        case file(String)

        /// The line, or the file's path, as given.
        var text: String {
            switch self {
            case .line(let text), .file(let text): text
            }
        }
    }

    /// The path curl's grammar gives standard input.
    static let standardInput = "-"

    /// The local file the field reads, if any, standard input aside.
    var path: String? {
        switch self {
        case .file(_, let path, _, _, _), .textFromFile(_, let path, _, _):
            path == Self.standardInput ? nil : path
        case .text: nil
        }
    }

    /// Whether the field is a file part (`@`).
    var isFile: Bool {
        if case .file = self { return true }
        return false
    }

    /// Whether the field reads standard input (`@-` or `<-`), which can be read once.
    var readsStandardInput: Bool {
        switch self {
        case .file(_, let path, _, _, _), .textFromFile(_, let path, _, _): path == Self.standardInput
        case .text: false
        }
    }

    /// `--form-string name=value`: the value as it is, with no `@`, `<`, quote or `;` meaning.
    init(literal argument: String) throws(UsageError) {
        guard let equals = argument.firstIndex(of: "="), equals != argument.startIndex else {
            throw UsageError("--form-string \(argument): expected name=value")
        }
        self = .text(
            name: String(argument[..<equals]), value: String(argument[argument.index(after: equals)...]), type: nil)
    }

    init(parsing argument: String) throws(UsageError) {
        guard let equals = argument.firstIndex(of: "=") else {
            throw UsageError("-F \(argument): expected name=value, name=@file or name=<file")
        }
        let name = String(argument[..<equals])
        guard !name.isEmpty else { throw UsageError("-F \(argument): the field has no name") }
        var scanner = Scanner(argument[argument.index(after: equals)...])
        switch scanner.peek {
        case "@":
            scanner.advance()
            let path = try scanner.value(in: argument)
            let parameters = try scanner.parameters(in: argument, allowed: ["type", "filename", "headers"])
            guard !path.isEmpty else { throw UsageError("-F \(argument): no file after @") }
            self = .file(
                name: name, path: path, type: parameters.last("type"), fileName: parameters.last("filename"),
                headers: parameters.headers)
        case "<":
            scanner.advance()
            let path = try scanner.value(in: argument)
            let parameters = try scanner.parameters(in: argument, allowed: ["type", "headers"])
            guard !path.isEmpty else { throw UsageError("-F \(argument): no file after <") }
            self = .textFromFile(name: name, path: path, type: parameters.last("type"), headers: parameters.headers)
        default:
            let value = try scanner.value(in: argument)
            let parameters = try scanner.parameters(in: argument, allowed: ["type", "headers"])
            self = .text(name: name, value: value, type: parameters.last("type"), headers: parameters.headers)
        }
    }
}

/// Reads a value and `;key=value` parameters, as curl does: an unquoted value ends at the first `;` that starts a
/// parameter curl knows, so `a;b` stays one value.
private struct Scanner {
    private var rest: Substring

    init(_ text: Substring) {
        rest = text
    }

    var peek: Character? { rest.first }

    mutating func advance() {
        rest = rest.dropFirst()
    }

    /// A quoted string, or the text up to the next parameter.
    mutating func value(in argument: String) throws(UsageError) -> String {
        if rest.first == "\"" { return try quoted(in: argument) }
        var end = rest.endIndex
        var search = rest.startIndex
        while let semicolon = rest[search...].firstIndex(of: ";") {
            let after = rest[rest.index(after: semicolon)...].lowercased()
            if ["type=", "filename=", "headers=", "encoder="].contains(where: after.hasPrefix) {
                end = semicolon
                break
            }
            search = rest.index(after: semicolon)
        }
        defer { rest = rest[end...] }
        return String(rest[..<end])
    }

    private mutating func quoted(in argument: String) throws(UsageError) -> String {
        var value = ""
        var index = rest.index(after: rest.startIndex)
        while index < rest.endIndex {
            let character = rest[index]
            if character == "\"" {
                rest = rest[rest.index(after: index)...]
                return value
            }
            if character == "\\", rest.index(after: index) < rest.endIndex {
                index = rest.index(after: index)
            }
            value.append(rest[index])
            index = rest.index(after: index)
        }
        throw UsageError("-F \(argument): a quote is not closed")
    }

    /// Whether curl 7.88 takes `type` as a content type: a major and a minor type around a `/`, the major without a
    /// space (its `sscanf("%[^/ ]/%[^;,\n]")`), so that an empty or half type is refused rather than sent.
    private static func isCurlContentType(_ type: String) -> Bool {
        guard let slash = type.firstIndex(of: "/") else { return false }
        let major = type[..<slash]
        let minor = type[type.index(after: slash)...]
        return !major.isEmpty && !major.contains(" ") && minor.first.map { !";,\n".contains($0) } == true
    }

    /// `;key=value` pairs up to the end, in order.
    mutating func parameters(in argument: String, allowed: Set<String>) throws(UsageError) -> [(String, String)] {
        var parameters: [(String, String)] = []
        while !rest.isEmpty {
            guard rest.first == ";", let equals = rest.firstIndex(of: "=") else {
                throw UsageError("-F \(argument): unexpected text \"\(rest)\"")
            }
            let key = rest[rest.index(after: rest.startIndex)..<equals].lowercased()
            guard allowed.contains(key) else {
                throw UsageError(
                    "-F \(argument): ;\(key)= is not supported here (only ;\(allowed.sorted().joined(separator: "=, ;"))=)"
                )
            }
            rest = rest[rest.index(after: equals)...]
            let quoted = rest.first == "\""
            let value = try value(in: argument)
            if key == "type", !Self.isCurlContentType(value) {
                throw UsageError("-F \(argument): Illegally formatted content-type field! (type= takes major/minor)")
            }
            // `headers=@file` names a file unless the value was quoted.
            parameters.append((key == "headers" && !quoted && value.hasPrefix("@") ? "headers@" : key, value))
        }
        return parameters
    }
}

extension [(String, String)] {
    /// The last value given for `key`, as curl keeps the last.
    fileprivate func last(_ key: String) -> String? {
        last { $0.0 == key }?.1
    }

    /// The `headers=` values, in order.
    fileprivate var headers: [FieldArgument.PartHeader] {
        compactMap { key, value in
            switch key {
            case "headers": .line(value)
            case "headers@": .file(String(value.dropFirst()))
            default: nil
            }
        }
    }
}
