// swift-tools-version: 6.1
import PackageDescription

// Benchmarks and peer interop for MultipartStream. A separate package, so that the library itself depends on
// nothing: this one brings the benchmark harness, vapor/multipart-kit as a peer parser and encoder, and the HTTP
// clients that upload-check sends through (AsyncHTTPClient, swift-openapi-runtime's HTTPBody).
let package = Package(
    name: "MultipartStreamBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "MultipartStream", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/vapor/multipart-kit", exact: "4.7.1"),
        // Other HTTP clients that take a form's bodyChunks(): AsyncHTTPClient, and OpenAPI's HTTPBody.
        .package(url: "https://github.com/swift-server/async-http-client", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", exact: "1.13.4"),
        // A server for resumable uploads: SwiftNIO's NIOResumableUpload around a body-recording handler.
        .package(url: "https://github.com/apple/swift-nio", exact: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-extras", exact: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types", exact: "1.8.0"),
    ],
    targets: [
        .executableTarget(
            name: "MultipartBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "MultipartKit", package: "multipart-kit"),
                .product(name: "MultipartStream", package: "MultipartStream"),
                "MultipartStreamTestSupport",
            ],
            path: "Benchmarks/MultipartBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "multipart-interop",
            dependencies: [
                .product(name: "MultipartKit", package: "multipart-kit"),
                .product(name: "MultipartStream", package: "MultipartStream"),
                "MultipartStreamTestSupport",
            ],
            path: "Sources/MultipartInterop"
        ),
        .executableTarget(
            name: "upload-check",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "MultipartStream", package: "MultipartStream"),
                "MultipartStreamTestSupport",
            ],
            path: "Sources/UploadCheck"
        ),
        .executableTarget(
            name: "answer-check",
            dependencies: [
                .product(name: "MultipartStream", package: "MultipartStream"),
                "MultipartStreamTestSupport",
            ],
            path: "Sources/AnswerCheck"
        ),
        .executableTarget(
            name: "upload-cost",
            dependencies: [
                .product(name: "MultipartStream", package: "MultipartStream"),
                "MultipartStreamTestSupport",
            ],
            path: "Sources/UploadCost"
        ),
        .executableTarget(
            name: "queue-cost",
            dependencies: [
                .product(name: "MultipartQueue", package: "MultipartStream"),
                .product(name: "MultipartStream", package: "MultipartStream"),
                "MultipartStreamTestSupport",
            ],
            path: "Sources/QueueCost"
        ),
        .executableTarget(
            name: "round-trips",
            dependencies: [
                .product(name: "MultipartQueue", package: "MultipartStream"),
                .product(name: "MultipartStream", package: "MultipartStream"),
                "MultipartStreamTestSupport",
            ],
            path: "Sources/RoundTrips"
        ),
        // The library's test support, which is no product of it (its users never see it): the same sources, through
        // the link Sources/MultipartStreamTestSupport.
        .target(
            name: "MultipartStreamTestSupport",
            dependencies: [.product(name: "MultipartStream", package: "MultipartStream")],
            path: "Sources/MultipartStreamTestSupport"
        ),
        // The README's and the DocC articles' Swift blocks, written here by doc-snippets.py: compiled, never run.
        .target(
            name: "DocSnippets",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "MultipartForm", package: "MultipartStream"),
                .product(name: "MultipartQueue", package: "MultipartStream"),
                .product(name: "MultipartStream", package: "MultipartStream"),
            ],
            path: "Sources/DocSnippets",
            // A block need not use every name it is given, nor every result it gets.
            swiftSettings: [.unsafeFlags(["-suppress-warnings"])]
        ),
        .executableTarget(
            name: "resumable-server",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOResumableUpload", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/ResumableServer"
        ),
    ],
    swiftLanguageModes: [.v6]
)
