// RingCommand.swift — `crumbs ring …`: read and exercise breadcrumb ring files.
//
// Subcommands (one file each):
//   ring dump FILE [--json] [--last N]       RingDumpCommand.swift
//   ring tail [-f] [-n N] FILE               RingTailCommand.swift
//   ring stress --file F --threads T --seconds S   RingStressCommand.swift
//
// This file holds what they share: how one breadcrumb is printed (a human line, or one JSON
// object per line), the summary line that goes to stderr, and buffered writes to stdout/stderr.
// Not signal-safe (an ordinary command-line program).

import ArgumentParser
import Crumbs
import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

struct RingCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "ring", abstract: "Read and exercise breadcrumb ring files.",
    subcommands: [RingDumpCommand.self, RingTailCommand.self, RingStressCommand.self])
}

/// How breadcrumbs are printed on stdout.
enum BreadcrumbFormat {
  /// One line per breadcrumb:
  /// `2026-11-22T04:12:01.123Z WARNING http  tid=4242 #7  GET /x  {status=500}  [truncated: message]`
  case human
  /// JSON Lines in the trail attachment's schema (`Breadcrumb.jsonLine()`, docs/formats.md
  /// "Breadcrumb trail schema"): what a report carries and what the CLI prints are read the same way.
  case json

  func line(_ breadcrumb: Breadcrumb) -> String {
    switch self {
    case .human: Self.humanLine(breadcrumb)
    case .json: breadcrumb.jsonLine()
    }
  }

  static func humanLine(_ breadcrumb: Breadcrumb) -> String {
    var line = ISO8601.string(nanoseconds: breadcrumb.wallTimeNanoseconds, fractionDigits: 3)
    line += " " + padded(breadcrumb.level.name.uppercased(), 7)
    line += " " + padded(breadcrumb.type.name, 13)
    line += " " + padded("tid=\(breadcrumb.threadID)", 11)
    line += " " + padded("#\(breadcrumb.threadSequence)", 6)
    line += " " + visible(breadcrumb.message)
    if !breadcrumb.attributes.isEmpty {
      let pairs = breadcrumb.attributes.map { visible($0.key) + "=" + visible($0.value) }
      line += "  {" + pairs.joined(separator: ", ") + "}"
    }
    if breadcrumb.truncated {
      line += "  [truncated: " + breadcrumb.truncatedParts.joined(separator: ", ") + "]"
    }
    if breadcrumb.fromSignalHandler { line += "  [signal handler]" }
    return line
  }

  private static func padded(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
  }

  /// Control characters (a newline in a message would split the line) shown escaped.
  private static func visible(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return text }
    var result = ""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\n": result += "\\n"
      case "\t": result += "\\t"
      case "\r": result += "\\r"
      default:
        if scalar.value < 0x20 || scalar.value == 0x7F {
          result += "\\x" + (scalar.value < 16 ? "0" : "") + String(scalar.value, radix: 16)
        } else {
          result.unicodeScalars.append(scalar)
        }
      }
    }
    return result
  }
}

/// The one-line summary of a ring, for stderr.
enum RingSummary {
  static func line(path: String, _ contents: RingContents) -> String {
    let header = contents.header
    let counts = contents.counts
    var line = "\(path): \(counts.valid) valid, \(counts.torn) torn, \(counts.overwritten) overwritten, "
    line +=
      "\(counts.empty) empty; pid \(header.pid), session \(header.sessionID), state \(header.state.rawValue)"
    if !header.appName.isEmpty { line += ", app \(header.appName)" }
    line += "; \(header.slotCount) slots of \(header.slotSize) bytes in \(header.laneCount) lanes"
    if !contents.timesAreCalibrated { line += "; times approximate (clock not calibrated)" }
    if let hang = header.ongoingHang {
      line +=
        "; during \(hang.summary) (silent since \(ISO8601.string(nanoseconds: hang.sinceWallNanoseconds)), "
        + "still stalled at \(ISO8601.string(nanoseconds: hang.seenWallNanoseconds)))"
    }
    if let damage = header.hangDamage { line += "; hang record damaged: \(damage)" }
    let signs = header.uncleanEndSigns
    if let stop = signs.stopRequest {
      line +=
        "; stop request \(SignalNames.name(stop.signal)) at \(ISO8601.string(nanoseconds: stop.wallNanoseconds))"
    }
    if let limit = signs.limitSignal {
      line +=
        "; outlived \(SignalNames.name(limit.signal)) at \(ISO8601.string(nanoseconds: limit.wallNanoseconds))"
    }
    return line
  }
}

/// Buffered writes to a file descriptor (stdout by default). Lines are collected and written in
/// large chunks; `flush` writes what is pending.
struct LineWriter {
  private let descriptor: Int32
  private var pending: [UInt8] = []

  init(descriptor: Int32 = 1) {
    self.descriptor = descriptor
    pending.reserveCapacity(1 << 16)
  }

  mutating func write(line: String) {
    pending.append(contentsOf: line.utf8)
    pending.append(UInt8(ascii: "\n"))
    if pending.count >= 1 << 16 { flush() }
  }

  mutating func flush() {
    // A failed write means stdout closed (e.g. `| head`): nothing useful left to do with it.
    pending.withUnsafeBytes { bytes in _ = try? Syscall.writeAll(descriptor, bytes, path: "stdout") }
    pending.removeAll(keepingCapacity: true)
  }

  /// Writes one line to stderr at once.
  static func error(_ line: String) {
    var writer = LineWriter(descriptor: 2)
    writer.write(line: line)
    writer.flush()
  }
}

/// Reads a ring file, or prints the one-line reason it is not a ring and exits 1.
func readRingOrExit(_ path: String) throws -> RingContents {
  do {
    return try RingReader.read(file: path)
  } catch {
    LineWriter.error("crumbs: \(error)")
    throw ExitCode(1)
  }
}
