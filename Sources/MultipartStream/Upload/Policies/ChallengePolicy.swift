import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Which of the caller delegate's methods answers an authentication challenge, and what an upload answers when the
/// caller's delegate leaves it to the default.
enum ChallengePolicy {
    /// Challenges about the connection rather than one request. URLSession asks the session-level
    /// `urlSession(_:didReceive:completionHandler:)` for these when the delegate has no task-level method, which is
    /// how certificate pinning is usually written.
    /// Named by their values: swift-corelibs-foundation marks the server-trust and client-certificate constants
    /// unavailable, since Linux never sends those challenges.
    static let sessionWideMethods: Set<String> = [
        "NSURLAuthenticationMethodServerTrust", "NSURLAuthenticationMethodClientCertificate",
        NSURLAuthenticationMethodNTLM, NSURLAuthenticationMethodNegotiate,
    ]

    /// A method of the caller's delegate that may answer a challenge.
    enum Method: Equatable {
        case taskLevel
        case sessionLevel
    }

    /// The methods to ask, in order, until one answers other than `.performDefaultHandling`: the task-level one, and
    /// for a session-wide challenge the session-level one after it.
    ///
    /// Where the platform says which methods a delegate implements (Objective-C's optional methods), the task-level
    /// one, when present, is the only one asked, as URLSession does. swift-corelibs-foundation gives every delegate
    /// default methods that answer `.performDefaultHandling`, so there that answer is taken for "not implemented".
    static func methods(
        for authenticationMethod: String,
        implementsTaskLevel: Bool?,
        implementsSessionLevel: Bool?
    ) -> [Method] {
        let sessionWide = sessionWideMethods.contains(authenticationMethod)
        switch (implementsTaskLevel, implementsSessionLevel) {
        case (true?, _): return [.taskLevel]
        case (false?, let session): return sessionWide && session != false ? [.sessionLevel] : []
        case (nil, let session): return sessionWide && session != false ? [.taskLevel, .sessionLevel] : [.taskLevel]
        }
    }

    /// The answer when the caller's delegate left a challenge to the default.
    ///
    /// Apple's URLSession handles it. Linux URLSession crashes on `.performDefaultHandling` and hangs without a
    /// credential: answer with the stored credential once, else cancel the challenge, which ends the task with the
    /// 401 or 407 as the answer.
    static func defaultAnswer(
        to challenge: URLAuthenticationChallenge,
        storage: URLCredentialStorage?
    ) -> (URLSession.AuthChallengeDisposition, URLCredential?) {
        #if canImport(Darwin)
            return (.performDefaultHandling, nil)
        #else
            if challenge.previousFailureCount == 0,
                let stored = storage.flatMap({ storedCredential(for: challenge.protectionSpace, in: $0) })
            {
                return (.useCredential, stored)
            }
            return (.cancelAuthenticationChallenge, nil)
        #endif
    }

    #if !canImport(Darwin)
        /// The stored default credential for `space`. swift-corelibs-foundation compares protection spaces by
        /// identity, so a space equal in every field but made elsewhere finds nothing; match the fields instead.
        /// URLSession stores a second space with the same fields after the first use, so several spaces may match:
        /// their credentials count as one when they name the same user and password.
        private static func storedCredential(
            for space: URLProtectionSpace,
            in storage: URLCredentialStorage
        ) -> URLCredential? {
            if let credential = storage.defaultCredential(for: space) { return credential }
            let matching = storage.allCredentials.filter { stored, _ in
                stored.host == space.host && stored.port == space.port && stored.protocol == space.protocol
                    && stored.realm == space.realm && stored.authenticationMethod == space.authenticationMethod
                    && stored.isProxy() == space.isProxy()
            }
            let credentials = matching.values.flatMap(\.values)
            guard let first = credentials.first,
                credentials.allSatisfy({ $0.user == first.user && $0.password == first.password })
            else { return nil }
            return first
        }
    #endif
}
