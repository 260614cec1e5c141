import Foundation

extension MultipartResumption {
    /// `$XDG_STATE_HOME/name`, else `~/.local/state/name`: where a program keeps state that outlives it.
    public static func standardStateDirectory(named name: String) -> URL {
        let environment = ProcessInfo.processInfo.environment
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return URL(fileURLWithPath: state, isDirectory: true).appendingPathComponent(name, isDirectory: true)
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: home, isDirectory: true).appendingPathComponent(".local/state/\(name)")
    }
}
