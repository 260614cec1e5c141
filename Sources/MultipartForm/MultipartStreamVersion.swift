/// The package's version, one constant for every product: what a bug report names, what the `multipart` command's
/// `--version` prints and its `User-Agent` carries, and what CHANGELOG.md and the release tag say.
public enum MultipartStreamVersion {
    /// The version of this release, `major.minor.patch` by Semantic Versioning: a change to the public API that
    /// breaks a caller's code moves the major number (the minor one while it is 0).
    public static let string = "0.1.0"
}
