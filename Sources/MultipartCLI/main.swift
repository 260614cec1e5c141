import Foundation

let status = await Command.run(Array(CommandLine.arguments.dropFirst()))
exit(status.rawValue)
