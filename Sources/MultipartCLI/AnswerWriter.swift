import Foundation
import MultipartStream

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Writes the answer's body to `-o`'s output as it arrives, as curl does, so that an answer of any size takes no
/// more memory than its pieces: `-i`'s head before each answer's body, the first bytes kept for an error status's
/// message, the rest counted.
final class AnswerWriter: @unchecked Sendable {
    // @unchecked: `state` is guarded by `lock`; URLSession's delegate queue writes, the command begins and ends.
    private struct State {
        var opened: OutputFile.Opened?
        /// The answer whose head is written.
        var headed: HTTPURLResponse?
        var count = 0
        var firstBytes = Data()
        /// Called before the first write to an output that is a terminal: the progress bar's line ends there.
        var beforeTerminalWrite: (@Sendable () -> Void)?
    }

    /// How many bytes of the body an error's message may quote from.
    static let quoted = 2_000

    private let output: OutputFile
    private let includesHeaders: Bool
    private let head: @Sendable (HTTPURLResponse) -> Data
    private let lock = Lock()
    private var state = State()

    init(_ output: OutputFile, includesHeaders: Bool, head: @escaping @Sendable (HTTPURLResponse) -> Data) {
        self.output = output
        self.includesHeaders = includesHeaders
        self.head = head
    }

    /// An attempt begins: a file output starts again empty, as curl's `--retry` does.
    func begin() throws {
        try lock.withLock {
            if let opened = state.opened, opened.temporary != nil {
                OutputFile.abandon(opened)
                state.opened = nil
            }
            if state.opened == nil { state.opened = try output.open(option: "-o") }
            (state.headed, state.count, state.firstBytes) = (nil, 0, Data())
        }
    }

    /// `ending` is called once before anything is written to an output that is a terminal, where the progress bar
    /// may be drawn on the line the answer would start on.
    func beforeWritingToATerminal(_ ending: @escaping @Sendable () -> Void) {
        lock.withLock { state.beforeTerminalWrite = ending }
    }

    /// A piece of `response`'s body.
    @Sendable func write(_ response: HTTPURLResponse, _ data: Data) throws {
        try lock.withLock {
            endTerminalLine()
            try writeHead(of: response)
            guard let opened = state.opened else { return }
            try OutputFile.write(data, to: opened, option: "-o")
            state.count += data.count
            if state.firstBytes.count < Self.quoted {
                state.firstBytes.append(data.prefix(Self.quoted - state.firstBytes.count))
            }
        }
    }

    /// The answer is `response`: its head is written if its body did not bring it, and the output put in place.
    /// Returns the body's length and first bytes.
    func finish(_ response: HTTPURLResponse) throws -> (count: Int, firstBytes: Data) {
        try lock.withLock {
            try writeHead(of: response)
            let written = (state.count, state.firstBytes)
            if let opened = state.opened { try OutputFile.commit(opened, option: "-o") }
            state.opened = nil
            return written
        }
    }

    /// The command failed: a file output is left as it was.
    func abandon() {
        lock.withLock {
            if let opened = state.opened { OutputFile.abandon(opened) }
            state.opened = nil
        }
    }

    private func endTerminalLine() {
        guard let ending = state.beforeTerminalWrite, let opened = state.opened, isatty(opened.descriptor) == 1 else {
            return
        }
        state.beforeTerminalWrite = nil
        ending()
    }

    private func writeHead(of response: HTTPURLResponse) throws {
        guard includesHeaders, state.headed !== response, let opened = state.opened else { return }
        endTerminalLine()
        state.headed = response
        try OutputFile.write(head(response), to: opened, option: "-o")
    }
}
