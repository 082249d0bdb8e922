// RingTailCommand.swift — `crumbs ring tail [-f] [-n N] [--json] FILE`.
//
// Without -f: prints the newest N (10) breadcrumbs and exits. With -f: prints them, then polls the
// file every 200 ms with RingReader.read(file:) and prints breadcrumbs it has not printed yet,
// until the ring is marked clean (its owner exited normally) or crashed (the crash handler ran),
// the file disappears, or SIGINT (the default action: output is flushed after every poll).
//
// What was printed is tracked by (breadcrumb id, per-thread sequence), pruned at every poll to
// what the ring still holds: a slot's id names its lane position, which only grows, so an
// overwritten breadcrumb never comes back and the set stays as small as the ring.

import ArgumentParser
import Crumbs

#if canImport(Glibc)
  import Glibc
#endif

struct RingTailCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "tail",
    abstract: "Print the newest breadcrumbs of a ring; with -f, follow a running process's ring.")

  @Argument(help: "The ring file.") var file: String
  @Flag(name: .customShort("f"), help: "Follow: print new breadcrumbs as they arrive.") var follow = false
  @Option(name: [.customShort("n"), .long], help: "How many of the newest to print first.") var lines = 10
  @Flag(help: "JSON Lines: one object per breadcrumb.") var json = false
  @Option(help: "Milliseconds between polls with -f.") var intervalMilliseconds = 200

  func validate() throws {
    if lines < 0 { throw ValidationError("-n must be 0 or more") }
    if intervalMilliseconds < 1 { throw ValidationError("--interval-milliseconds must be 1 or more") }
  }

  struct PrintedKey: Hashable {
    var id: UInt64
    var sequence: UInt32
  }

  func run() throws {
    let format: BreadcrumbFormat = json ? .json : .human
    var output = LineWriter()
    var contents = try readRingOrExit(file)
    var printed = Set<PrintedKey>()
    for breadcrumb in contents.breadcrumbs.suffix(lines) { output.write(line: format.line(breadcrumb)) }
    output.flush()
    guard follow else { return }
    for breadcrumb in contents.breadcrumbs {
      printed.insert(PrintedKey(id: breadcrumb.id, sequence: breadcrumb.threadSequence))
    }

    while contents.header.state == .running || contents.header.state == .unknown {
      usleep(UInt32(intervalMilliseconds) * 1000)
      do {
        contents = try RingReader.read(file: file)
      } catch  where error.kind == .unreadable && access(file, F_OK) != 0 {
        LineWriter.error("crumbs: \(file) is gone")
        return
      } catch {
        // Being recreated, or not a ring any more.
        LineWriter.error("crumbs: \(error)")
        throw ExitCode(1)
      }
      let breadcrumbs = contents.breadcrumbs  // made from the bytes read at each access: once
      var stillHeld = Set<PrintedKey>()
      stillHeld.reserveCapacity(breadcrumbs.count)
      for breadcrumb in breadcrumbs {
        let key = PrintedKey(id: breadcrumb.id, sequence: breadcrumb.threadSequence)
        stillHeld.insert(key)
        if !printed.contains(key) { output.write(line: format.line(breadcrumb)) }
      }
      output.flush()
      printed = stillHeld
    }
    LineWriter.error(
      "crumbs: ring is \(contents.header.state.rawValue); \(RingSummary.line(path: file, contents))")
  }
}
