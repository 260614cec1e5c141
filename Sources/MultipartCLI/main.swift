import Foundation

// Not CommandLine.arguments, which turns bytes that are not UTF-8 into U+FFFD: paths are taken as they are.
let status = await Command.run(RawArguments.current)
exit(status.rawValue)
