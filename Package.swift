// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "MultipartStream",
    // Swift concurrency's own floor. APIs newer than it are behind `@available` where they are used.
    platforms: [.macOS(.v10_15), .iOS(.v13), .tvOS(.v13), .watchOS(.v6), .visionOS(.v1)],
    products: [
        .library(name: "MultipartStream", targets: ["MultipartStream"]),
        // `swift run multipart -F name=value -F 'file=@photo.jpg' URL`: curl's -F, streaming from disk.
        .executable(name: "multipart", targets: ["MultipartCLI"]),
        // Random forms, peer parsers and loopback servers, shared by the tests and the Benchmarks package.
        .library(name: "MultipartStreamTestSupport", targets: ["MultipartStreamTestSupport"]),
    ],
    targets: [
        .target(name: "MultipartStream"),
        .target(name: "MultipartStreamTestSupport", dependencies: ["MultipartStream"]),
        .executableTarget(name: "MultipartCLI", dependencies: ["MultipartStream"]),
        .testTarget(
            name: "MultipartStreamTests",
            dependencies: ["MultipartStream", "MultipartStreamTestSupport", "MultipartCLI"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
