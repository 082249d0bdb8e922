// The `crumbs` command line. Nothing depends on this target.

import ArgumentParser

@main
struct CrumbsCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "crumbs",
    abstract: "A flight recorder for Swift processes on Linux: breadcrumbs that survive the crash.",
    subcommands: [
      DemoCommand.self, DemoChildCommand.self, RingCommand.self, CrashRecordCommand.self, ReportsCommand.self,
      ReportCommand.self, SymbolicateCommand.self,
    ]
  )
}
