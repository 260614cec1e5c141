import Foundation

// Not CommandLine.arguments, which turns bytes that are not UTF-8 into U+FFFD: paths are taken as they are.
let directories = FoundationDirectories()
let status = await Command.run(RawArguments.current)
directories.removeEmpty()
exit(status.rawValue)
