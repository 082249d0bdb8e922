// The `crumbs` command line. Nothing depends on this target.

import ArgumentParser
import Crumbs

@main
struct CrumbsCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "crumbs",
    abstract: "A flight recorder for Swift processes on Linux: breadcrumbs that survive the crash.",
    discussion: CLIExit.help,
    version: CrumbsVersion.string,
    subcommands: [
      DemoCommand.self, DemoChildCommand.self, RingCommand.self, CrashRecordCommand.self, ReportsCommand.self,
      ReportCommand.self, SymbolicateCommand.self, DebugFilesCommand.self, ThreadsCommand.self,
      CollectCommand.self,
    ]
  )
}
