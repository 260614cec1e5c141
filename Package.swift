// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "MultipartStream",
    // Swift concurrency's own floor. APIs newer than it are behind `@available` where they are used.
    platforms: [.macOS(.v10_15), .iOS(.v13), .tvOS(.v13), .watchOS(.v6), .visionOS(.v1)],
    products: [
        // The form, its reader and `MultipartBodyStream`, the encoders and chunks: Foundation only, no URLSession,
        // so a server-side program that streams a form through another HTTP client links no libcurl.
        .library(name: "MultipartForm", targets: ["MultipartForm"]),
        // URLSession uploads (async, tasks, resumable, saved state) on top of the form, which it re-exports.
        .library(name: "MultipartStream", targets: ["MultipartStream"]),
        // `MultipartUploadQueue`: uploads kept on disk and sent through kills and outages, on top of URLSession's.
        .library(name: "MultipartQueue", targets: ["MultipartQueue"]),
        // `swift run multipart -F name=value -F 'file=@photo.jpg' URL`: curl's -F, streaming from disk.
        .executable(name: "multipart", targets: ["MultipartCLI"]),
    ],
    targets: [
        .target(name: "MultipartForm"),
        .target(name: "MultipartStream", dependencies: ["MultipartForm"]),
        .target(
            name: "MultipartQueue",
            dependencies: ["MultipartStream", .target(name: "CSQLite", condition: .when(platforms: [.linux]))]
        ),
        // The system's SQLite on Linux (Apple platforms have the SQLite3 module): the queue's one store.
        .systemLibrary(
            name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        // Random forms, peer parsers and loopback servers for the tests: no product, so no user of the package sees
        // it. The Benchmarks package builds the same sources as a target of its own (a link to this directory), where
        // the package's own symbols are not seen: `IN_PACKAGE` says they are.
        .target(
            name: "MultipartStreamTestSupport", dependencies: ["MultipartStream"],
            swiftSettings: [.define("IN_PACKAGE")]),
        .executableTarget(name: "MultipartCLI", dependencies: ["MultipartStream", "MultipartQueue"]),
        // The form alone: no network, no server.
        .testTarget(name: "MultipartFormTests", dependencies: ["MultipartForm", "MultipartStreamTestSupport"]),
        .testTarget(
            name: "MultipartStreamTests",
            dependencies: ["MultipartForm", "MultipartStream", "MultipartQueue", "MultipartStreamTestSupport"]
        ),
        // The `multipart` command, run as a process.
        .testTarget(
            name: "MultipartCommandTests",
            dependencies: [
                "MultipartForm", "MultipartStream", "MultipartQueue", "MultipartStreamTestSupport", "MultipartCLI",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
