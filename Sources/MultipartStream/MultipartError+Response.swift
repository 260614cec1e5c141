import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension MultipartError {
    /// The response, for ``MultipartError/Reason/unacceptableStatus(statusCode:body:)``: its status, headers and URL.
    public var response: HTTPURLResponse? {
        get { serverResponse as? HTTPURLResponse }
        set { serverResponse = newValue }
    }

    /// Whether this is an answer the caller refused: its status is not among `acceptableStatusCodes`.
    var isRefusedAnswer: Bool {
        if case .unacceptableStatus = reason { true } else { false }
    }

    /// Creates an error about the server's `response`.
    init(_ reason: Reason, response: HTTPURLResponse) {
        self.init(reason)
        self.response = response
    }
}
