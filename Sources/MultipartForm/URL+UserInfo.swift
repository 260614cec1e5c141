import Foundation

extension URL {
    /// This URL without its user and password.
    package var removingUserInfo: URL {
        guard user != nil || password != nil,
            var components = URLComponents(url: self, resolvingAgainstBaseURL: true)
        else { return self }
        components.user = nil
        components.password = nil
        return components.url ?? self
    }

    /// This URL without user and password, as a state file keeps it and an error names it.
    package var withoutUserInfo: String { removingUserInfo.absoluteString }
}

extension String {
    /// This text, a URL, without its user and password; as it is where it is none.
    package var withoutUserInfo: String { URL(string: self)?.withoutUserInfo ?? self }
}
