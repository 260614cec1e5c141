// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "MultipartStream",
    platforms: [.macOS(.v10_15), .iOS(.v13), .tvOS(.v13), .watchOS(.v6), .visionOS(.v1)],
    products: [
        .library(name: "MultipartStream", targets: ["MultipartStream"])
    ],
    targets: [
        .target(name: "MultipartStream"),
        .executableTarget(
            name: "multipart-example",
            dependencies: ["MultipartStream"],
            path: "Examples/WriteForm"
        ),
        .testTarget(
            name: "MultipartStreamTests",
            dependencies: ["MultipartStream"],
            exclude: ["Peers"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
