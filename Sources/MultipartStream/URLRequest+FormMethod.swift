import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLRequest {
    /// The method a form goes out with: the request's own, POST where it says GET or nothing (`URLRequest(url:)`
    /// says GET), since a form is never sent with a GET. Uploads send it, and saved state is keyed on it.
    var formMethod: String {
        guard let httpMethod, httpMethod != "GET" else { return "POST" }
        return httpMethod
    }
}
