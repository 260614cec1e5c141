import Foundation
import MultipartStream

// Builds a form with a text field and a file and writes its encoded body to a file.
// Usage: swift run multipart-example [FILE] [OUTPUT]
let arguments = CommandLine.arguments.dropFirst()
let fileURL: URL
if let path = arguments.first {
    fileURL = URL(fileURLWithPath: path)
} else {
    fileURL = FileManager.default.temporaryDirectory.appendingPathComponent("multipart-example-note.txt")
    try Data("Hello from MultipartStream.\n".utf8).write(to: fileURL)
}
let outputURL = URL(fileURLWithPath: arguments.dropFirst().first ?? "form.multipart")

do {
    var form = MultipartFormData()
    form.append("MultipartStream example", name: "title")
    try form.append(fileURL: fileURL, name: "file")
    try? FileManager.default.removeItem(at: outputURL)
    try form.writeEncodedData(to: outputURL)
    print("Content-Type: \(form.contentType)")
    print("Content-Length: \(form.contentLength)")
    print("Wrote \(outputURL.path)")
} catch {
    FileHandle.standardError.write(Data("multipart-example: \(error)\n".utf8))
    exit(1)
}
