import Foundation

#if IN_PACKAGE
    import MultipartStream
#endif

/// A test server started at `url`'s origin is another server than any that listened there before in this process: what
/// the process found that one to speak (``MultipartStream/DiscoveryGate/forProcess(of:)``) is forgotten, so that each
/// trial's uploads ask what they would ask of a server they never met, whatever port an earlier trial's server had.
/// In the Benchmarks package, which sees none of the library's package symbols, nothing is known to forget: its
/// servers live as long as its process.
func startedAnew(at url: URL) {
    #if IN_PACKAGE
        DiscoveryGate.forgetProcessFindings(of: url)
    #endif
}
