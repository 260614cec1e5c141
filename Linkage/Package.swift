// swift-tools-version: 6.1
import PackageDescription

// The linkage check (`Linkage/check.sh`, in CI): the same program, a form with a file part written through
// `bodyChunks()`, built once against the `MultipartForm` product alone and once against `MultipartStream`. The first
// must link neither FoundationNetworking nor libcurl.
let package = Package(
    name: "Linkage",
    products: [
        .executable(name: "form-only", targets: ["FormOnly"]),
        .executable(name: "form-with-transport", targets: ["FormWithTransport"]),
    ],
    dependencies: [.package(name: "MultipartStream", path: "..")],
    targets: [
        .executableTarget(
            name: "FormOnly", dependencies: [.product(name: "MultipartForm", package: "MultipartStream")]),
        // The same source (a link to FormOnly's), importing the whole library.
        .executableTarget(
            name: "FormWithTransport", dependencies: [.product(name: "MultipartStream", package: "MultipartStream")],
            swiftSettings: [.define("WITH_TRANSPORT")]),
    ],
    swiftLanguageModes: [.v6]
)
