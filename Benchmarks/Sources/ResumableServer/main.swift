import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import NIOResumableUpload

// A server for resumable uploads on 127.0.0.1: SwiftNIO's NIOResumableUpload (draft-ietf-httpbis-resumable-upload,
// interop versions 3, 5 and 6) wrapped around a handler that records each request body whole, as one request,
// however many connections it took. Prints its port on the first line of stdout; exits when stdin closes.
// Usage: resumable-server DIRECTORY [--plain] [--log FILE]
//   POST or PUT   the body goes to DIRECTORY/body-N; answers 200 {"bytes": N, "path": "…"} once it has all arrived
//   GET /bodies   the bodies completed so far: [{"bytes": N, "path": "…"}]
//   --plain       the same handler without NIOResumableUpload: a server that knows nothing of the draft
//   --log FILE    a line for each request as it came, before NIOResumableUpload: its method and path, and its
//                 Content-Length, Upload-Offset, Upload-Complete and Upload-Incomplete where it has them

/// Bodies completed so far, for `GET /bodies`.
let completed = NIOLockedValueBox<[String]>([])
let counter = NIOLockedValueBox(0)

/// Records one request's body to a file of its own and answers with its length once it ends.
final class RecordingHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    let directory: URL
    private var file: FileHandle?
    private var path = ""
    private var bytes = 0
    private var answer: String?

    init(directory: URL) {
        self.directory = directory
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let request):
            bytes = 0
            switch (request.method, request.path) {
            case (.post, _), (.put, _):
                let number = counter.withLockedValue {
                    $0 += 1
                    return $0
                }
                path = directory.appendingPathComponent("body-\(number)").path
                _ = FileManager.default.createFile(atPath: path, contents: nil)
                file = FileHandle(forWritingAtPath: path)
                answer = nil
            case (.get, "/bodies"):
                answer = "[" + completed.withLockedValue { $0 }.joined(separator: ",") + "]"
            default:
                answer = ""
            }
        case .body(let buffer):
            bytes += buffer.readableBytes
            buffer.withUnsafeReadableBytes { file?.write(Data($0)) }
        case .end:
            if let file {
                try? file.close()
                self.file = nil
                let record = "{\"bytes\": \(bytes), \"path\": \"\(path)\"}"
                completed.withLockedValue { $0.append(record) }
                respond(context: context, status: .ok, body: record)
            } else if let answer, !answer.isEmpty {
                respond(context: context, status: .ok, body: answer)
            } else {
                // OPTIONS and the rest: NIOResumableUpload turns a 501 to OPTIONS into its own answer.
                respond(context: context, status: .notImplemented, body: "")
            }
        }
    }

    private func respond(context: ChannelHandlerContext, status: HTTPResponse.Status, body: String) {
        var response = HTTPResponse(status: status)
        response.headerFields[.contentType] = "application/json"
        response.headerFields[.contentLength] = String(body.utf8.count)
        context.write(wrapOutboundOut(.head(response)), promise: nil)
        context.write(wrapOutboundOut(.body(ByteBuffer(string: body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}

/// Writes a line for each request that comes in, as the client sent it: what the wire carried, which
/// NIOResumableUpload turns into one request for the handler behind it.
final class RequestLog: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    let file: FileHandle

    init(file: FileHandle) {
        self.file = file
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let request) = unwrapInboundIn(data) {
            // The fields that say what the request carries of the upload, where it has them.
            let fields = ["Content-Length", "Upload-Offset", "Upload-Complete", "Upload-Incomplete"].compactMap {
                name in HTTPField.Name(name).flatMap { request.headerFields[$0] }.map { "\(name): \($0)" }
            }
            let line = ([request.method.rawValue, request.path ?? ""] + fields).joined(separator: " ")
            file.write(Data("\(line)\n".utf8))
        }
        context.fireChannelRead(data)
    }
}

var arguments = CommandLine.arguments.dropFirst()
guard let directoryPath = arguments.popFirst() else {
    FileHandle.standardError.write(Data("usage: resumable-server DIRECTORY [--plain]\n".utf8))
    exit(2)
}
let directory = URL(fileURLWithPath: directoryPath, isDirectory: true)
let plain = arguments.contains("--plain")
let requestLog = arguments.firstIndex(of: "--log").flatMap { at -> FileHandle? in
    let path = arguments.index(after: at) < arguments.endIndex ? arguments[arguments.index(after: at)] : ""
    guard FileManager.default.createFile(atPath: path, contents: nil) else {
        FileHandle.standardError.write(Data("resumable-server: cannot write --log \(path)\n".utf8))
        exit(2)
    }
    return FileHandle(forWritingAtPath: path)
}
/// Locations relative to the request's URL (a URI reference, as the draft allows), so that a client that came
/// through a proxy comes back through it.
let uploadContext = HTTPResumableUploadContext(origin: "")

let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let channel = try ServerBootstrap(group: group)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            let sync = channel.pipeline.syncOperations
            try sync.configureHTTPServerPipeline()
            try sync.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            if let requestLog { try sync.addHandler(RequestLog(file: requestLog)) }
            if plain {
                try sync.addHandler(RecordingHandler(directory: directory))
            } else {
                // A recorder for each upload: a connection kept alive carries the creations of several uploads, whose
                // appends may be under way at once on others (`handlers:` would give them all the same recorder).
                try sync.addHandler(
                    HTTPResumableUploadHandler(context: uploadContext) { upload in
                        try? upload.pipeline.syncOperations.addHandler(RecordingHandler(directory: directory))
                    })
            }
        }
    }
    .bind(host: "127.0.0.1", port: 0)
    .wait()
let port = channel.localAddress!.port!
FileHandle.standardOutput.write(Data("\(port)\n".utf8))
// Ends when the test closes standard input.
while FileHandle.standardInput.availableData.count > 0 {}
try channel.close().wait()
try group.syncShutdownGracefully()
