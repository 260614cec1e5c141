// `import MultipartStream` brings the form with it, as SwiftNIO's `NIO` brings `NIOCore`: every program written
// against one module keeps compiling.
@_exported import MultipartForm
