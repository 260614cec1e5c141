import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What `-w FORMAT` can print, once the transfer has ended: curl's variables that an upload has.
struct TransferReport {
    /// The HTTP status, or 0 when no response came.
    var statusCode = 0
    /// Seconds from the start of the first attempt to the end of the last.
    var seconds = 0.0
    /// Body bytes handed to the connection in the last attempt.
    var bytesUploaded: UInt64 = 0
    /// Bytes of the response body.
    var bytesDownloaded = 0
    /// The last URL asked, after redirects.
    var effectiveURL: String
    var contentType: String?
    var exitCode: Int32 = 0

    /// `FORMAT` with `%{variable}`, `%%` and curl's `\n`, `\r`, `\t` and `\\` replaced. Unknown variables print
    /// nothing and are named in `warnings`, as curl does.
    func render(_ format: String, warnings: inout [String]) -> String {
        var output = ""
        var rest = Substring(format)
        while let character = rest.popFirst() {
            switch character {
            case "%" where rest.first == "%":
                rest = rest.dropFirst()
                output.append("%")
            case "%" where rest.first == "{":
                guard let close = rest.firstIndex(of: "}") else {
                    output.append("%")
                    continue
                }
                let name = String(rest[rest.index(after: rest.startIndex)..<close])
                rest = rest[rest.index(after: close)...]
                if let value = value(of: name) {
                    output += value
                } else {
                    warnings.append("unknown --write-out variable: '\(name)'")
                }
            case "\\":
                switch rest.first {
                case "n": output.append("\n")
                case "r": output.append("\r")
                case "t": output.append("\t")
                case "\\": output.append("\\")
                default:
                    output.append("\\")
                    continue
                }
                rest = rest.dropFirst()
            default:
                output.append(character)
            }
        }
        return output
    }

    private func value(of variable: String) -> String? {
        switch variable {
        case "http_code", "response_code": String(format: "%03d", statusCode)
        case "time_total": String(format: "%.6f", seconds)
        case "size_upload": String(bytesUploaded)
        case "size_download": String(bytesDownloaded)
        case "speed_upload": String(seconds > 0 ? UInt64(Double(bytesUploaded) / seconds) : 0)
        case "url_effective": effectiveURL
        case "content_type": contentType ?? ""
        case "exitcode": String(exitCode)
        default: nil
        }
    }
}
