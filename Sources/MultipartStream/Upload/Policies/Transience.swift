import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Which failures a later try may not meet: written once, for the resumable protocol's retries, the queue's waits and
/// the command's `--retry`, which had each a list of their own, and three different ones.
package enum Transience {
    /// The network's failures: a connection dropped, refused or never made, a timeout, a name not found yet, an answer
    /// garbled on the way, the radio off or not allowed now (Apple's cellular rules), and libcurl's failures that
    /// URLSession on Linux leaves unnamed (`unknown`). Not TLS's: a certificate or a protocol the client refuses is
    /// no better a minute later, so it ends the try (a saved upload is kept, a queued one fails, naming it, for a
    /// retry).
    package static let networkCodes: Set<URLError.Code> = [
        .networkConnectionLost, .timedOut, .cannotConnectToHost, .notConnectedToInternet, .cannotFindHost,
        .dnsLookupFailed, .badServerResponse, .resourceUnavailable, .internationalRoamingOff, .dataNotAllowed, .unknown,
    ]

    /// Whether `error` is the network's, which a later try may not meet.
    package static func isTransient(_ error: URLError) -> Bool {
        networkCodes.contains(error.code)
    }

    /// Whether a server that answered `statusCode` asks to be tried later: 408, 429, and any 5xx.
    package static func isBusy(statusCode: Int) -> Bool {
        statusCode == 408 || statusCode == 429 || (500..<600).contains(statusCode)
    }
}
