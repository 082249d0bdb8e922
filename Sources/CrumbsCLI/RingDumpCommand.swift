// RingDumpCommand.swift — `crumbs ring dump FILE [--json] [--last N]`.
//
// Reads a ring file left by a live, crashed or killed process (RingReader.read(file:)), prints
// its breadcrumbs oldest first on stdout and a summary line on stderr. A file that is not a
// readable ring exits 1 with a one-line reason on stderr.

import ArgumentParser
import Crumbs

struct RingDumpCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "dump",
    abstract: "Print the breadcrumbs of a ring file (live, crashed or killed process).",
    discussion: """
      Breadcrumbs go to stdout oldest first, one per line; a summary (valid/torn/overwritten/empty \
      slot counts, pid, session, state) goes to stderr.
      """)

  @Argument(help: "The ring file.") var file: String
  @Flag(help: "JSON Lines: one object per breadcrumb.") var json = false
  @Option(help: "Only the newest N breadcrumbs.") var last: Int?

  func validate() throws {
    if let last, last < 0 { throw ValidationError("--last must be 0 or more") }
  }

  func run() throws {
    let contents = try readRingOrExit(file)
    let format: BreadcrumbFormat = json ? .json : .human
    var output = LineWriter()
    let shown = last.map { contents.breadcrumbs.suffix($0) } ?? contents.breadcrumbs[...]
    for breadcrumb in shown { output.write(line: format.line(breadcrumb)) }
    output.flush()
    LineWriter.error(RingSummary.line(path: file, contents))
  }
}
