import Testing

@testable import MultipartCLI

/// `-C -` as the options read it: a resumable upload, with its own default for retries.
@Suite struct ContinueAtOptionTests {
    @Test func dashCDashMakesAResumableUpload() throws {
        let options = try Options(parsing: ["-C", "-", "--retry", "8", "-F", "a=1", "http://a.example/"])
        #expect(options.resumes && options.retries == 8)
        #expect(try Options(parsing: ["--continue-at", "-", "-F", "a=1", "http://a.example/"]).resumes)
        #expect(try !Options(parsing: ["--retry", "3", "-F", "a=1", "http://a.example/"]).resumes)
    }

    @Test func dashCDashRetriesThreeTimesUnlessTold() throws {
        #expect(try Options(parsing: ["-C", "-", "-F", "a=1", "http://a.example/"]).retries == 3)
        #expect(try Options(parsing: ["-C", "-", "--retry", "0", "-F", "a=1", "http://a.example/"]).retries == 0)
        #expect(try Options(parsing: ["-F", "a=1", "http://a.example/"]).retries == 0, "curl's default otherwise")
    }

    @Test(arguments: [["-C", "100"], ["-C", "0"], ["--continue-at=5"]])
    func anythingButDashIsAUsageError(arguments: [String]) throws {
        let error = try #require(throws: UsageError.self) {
            try Options(parsing: arguments + ["-F", "a=1", "http://a.example/"])
        }
        #expect(error.message.contains("only -C -"), "\(error.message)")
    }
}
