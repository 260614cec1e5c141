import Foundation

#if WITH_TRANSPORT
    import MultipartStream
#else
    import MultipartForm
#endif

// A server-side program's upload body: a field and a file, streamed as chunks an HTTP client would send. Writes the
// body to the file named by its first argument and prints the Content-Type and length.
let output = URL(fileURLWithPath: CommandLine.arguments[1])
var form = MultipartFormData()
form.append("linkage", name: "check")
// Its own executable, as the file part.
let executable = URL(fileURLWithPath: CommandLine.arguments[0])
try form.append(fileURL: executable, name: "binary", fileName: executable.lastPathComponent)
FileManager.default.createFile(atPath: output.path, contents: nil)
let handle = try FileHandle(forWritingTo: output)
for try await chunk in form.bodyChunks() { try handle.write(contentsOf: chunk) }
try handle.close()
print(#"{"contentType": "\#(form.contentType)", "contentLength": \#(form.contentLength ?? 0)}"#)
