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

    /// The library's defaults, which wait out an outage of 3 minutes at least, unless told.
    @Test func dashCDashRetriesAsTheLibraryDoesUnlessTold() throws {
        let options = try Options(parsing: ["-C", "-", "-F", "a=1", "http://a.example/"])
        #expect(options.retries == 30)
        let policy = Transfer.resumption(options, log: nil)
        #expect(policy.maximumAttempts == 30 && policy.initialDelay == 1 && policy.maximumDelay == 15)
        #expect(policy.maximumWaitWithoutProgress == nil)
        #expect(try Options(parsing: ["-C", "-", "--retry", "0", "-F", "a=1", "http://a.example/"]).retries == 0)
        #expect(try Options(parsing: ["-F", "a=1", "http://a.example/"]).retries == 0, "curl's default otherwise")
    }

    /// `--retry-max-time S`: with `-C -` the longest wait without progress, however many retries it takes unless
    /// `--retry` says; 0 for none, as in curl.
    @Test func retryMaxTimeBoundsTheWaitWithoutProgress() throws {
        let options = try Options(parsing: ["-C", "-", "--retry-max-time", "10", "-F", "a=1", "http://a.example/"])
        #expect(options.retryMaxTime == 10 && options.retries == 1_000)
        #expect(Transfer.resumption(options, log: nil).maximumWaitWithoutProgress == 10)
        let counted = try Options(
            parsing: ["-C", "-", "--retry-max-time", "10", "--retry", "4", "-F", "a=1", "http://a.example/"])
        #expect(counted.retries == 4)
        #expect(try Options(parsing: ["--retry-max-time", "0", "-F", "a=1", "http://a.example/"]).retryMaxTime == nil)
        for bad in ["-1", "ten", "nan", ""] {
            #expect(throws: UsageError.self, "\(bad)") {
                try Options(parsing: ["--retry-max-time", bad, "-F", "a=1", "http://a.example/"])
            }
        }
    }

    @Test(arguments: [["-C", "100"], ["-C", "0"], ["--continue-at=5"]])
    func anythingButDashIsAUsageError(arguments: [String]) throws {
        let error = try #require(throws: UsageError.self) {
            try Options(parsing: arguments + ["-F", "a=1", "http://a.example/"])
        }
        #expect(error.message.contains("only -C -"), "\(error.message)")
    }
}
