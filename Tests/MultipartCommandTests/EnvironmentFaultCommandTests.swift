import Foundation
import MultipartStreamTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension CommandLineTests {
    @Test(.enabled(if: isLinux)) func anUnreadableFileIsRefusedWhenAppended() async throws {
        // Root reads any file, so the check runs as nobody: the command exits 3 naming the file and the reason.
        let file = try directory.file("secret.bin", contents: Data("secret".utf8))
        #expect(chmod(file.path, 0) == 0)
        #expect(chmod(directory.url.path, 0o755) == 0)
        let output = directory.path("out")
        let command =
            "runuser -u nobody -- \(CommandLineTests.executable.path) -F 'f=@\(file.path)' -o - > /dev/null "
            + "2> '\(output.path)'"
        #expect(try await run([], shell: command).status == 3)
        let message = try String(contentsOf: output, encoding: .utf8)
        #expect(message.contains("secret.bin"), "\(message)")
        #expect(message.contains("Permission denied"), "\(message)")
    }
}
