// ThreadsCommand.swift — `crumbs threads PID [--json] [--timeout S]`: every thread of a running
// Crumbs process, named and symbolicated, the way `jstack` prints a JVM's; the process runs on.
//
// Entry points, in call order:
//   ThreadDumpAsker.findRing → ask   the request (a real-time signal) and the answer file
//   ThreadDumpAnswer.decode          the answer, read as untrusted bytes, then deleted
//   answer.threads(options:)         symbolicated here, with the modules the answer lists (the
//                                    one symbolication path: Symbolicator, llvm-symbolizer for
//                                    file and line when on PATH)
//   asker.openOperations             the operations open in its ledger, read from its ring file
//   ThreadDumpPrinter                "name" tid=… state, then `at function (file:line)` per
//                                    frame, then the open operations with their ages; --json:
//                                    one object through the JSON writer
// Not signal-safe (an ordinary command-line program).

import ArgumentParser
import Crumbs
import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

struct ThreadsCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "threads",
    abstract: "Print every thread of a running Crumbs process, with symbolicated stacks (like jstack).",
    discussion: """
      The process must run a Crumbs client (it names its thread-dump signal in its ring's \
      header). Only a user who may signal the process (its own user, or root) can dump it. The \
      process pauses each thread for a moment and runs on.
      """)

  @Argument(help: "The process id.")
  var pid: Int32

  @Flag(help: "One JSON object: the process, the capture's figures, and its threads as reports hold them.")
  var json = false

  @Option(help: "Seconds to wait for the answer.")
  var timeout: Double = 10

  @Option(help: "Where llvm-symbolizer is (default: the first on PATH); file and line need it.")
  var llvmSymbolizer: String?

  func validate() throws {
    guard pid > 0 else { throw ValidationError("PID is a process id above 0 (got \(pid))") }
    try validateTimeout(timeout)
  }

  func run() throws {
    let answer: ThreadDumpAnswer
    let asker: ThreadDumpAsker
    // Names this request's answer: 0 is what a plain `kill` asks with.
    let cookie = UInt32.random(in: 1...UInt32.max)
    do throws(ThreadDumpFailure) {
      asker = try ThreadDumpAsker.findRing(pid: pid)
      try asker.ask(cookie: cookie, timeout: timeout)
      answer = try Self.decode(try asker.readAnswer(cookie: cookie), name: asker.answerName(cookie: cookie))
      guard answer.pid == asker.header.pid, answer.sessionID == asker.header.sessionID.description,
        answer.cookie == cookie
      else {
        throw ThreadDumpFailure(
          "the answer names process \(answer.pid), session \(answer.sessionID), request \(answer.cookie): not the one asked"
        )
      }
      if let error = answer.error, answer.snapshot == nil {
        throw ThreadDumpFailure("process \(pid) answered without a dump: \(error)")
      }
    } catch {
      throw fail("threads", error.description)
    }
    var options = PostMortemProcessor.defaultSymbolication
    options.useLLVMSymbolizer = true
    options.readsInstalledDebugFiles = true
    options.llvmSymbolizerPath = llvmSymbolizer
    let threads = answer.threads(options: options)
    // The ledger is read from the ring file as the answer arrives: the operations open at about
    // the capture's moment, aged at it. A ledger that cannot be read costs the dump nothing.
    var operations: CrashReport.OpenOperations?
    var operationsProblem: String?
    do throws(ThreadDumpFailure) {
      operations = try asker.openOperations(now: answer.wallNanoseconds)
    } catch {
      operationsProblem = error.description
    }
    let census = PoolCensus.take(
      threads: threads, waits: answer.snapshot?.waits, seats: DispatchPools.seats(process: String(pid)))
    let printer = ThreadDumpPrinter(
      pid: pid, header: asker.header, answer: answer, threads: threads, openOperations: operations,
      openOperationsProblem: operationsProblem, poolCensus: census)
    print(json ? printer.json() : printer.text())
  }

  /// Decodes an answer's bytes (untrusted: the process asked wrote them).
  static func decode(_ bytes: [UInt8], name: String) throws(ThreadDumpFailure) -> ThreadDumpAnswer {
    do {
      return try ThreadDumpAnswer.decode(bytes)
    } catch {
      throw ThreadDumpFailure("the answer \(name) is not a thread dump: \(error)")
    }
  }
}

/// A dump as text or JSON.
struct ThreadDumpPrinter {
  var pid: Int32
  var header: RingHeaderInfo
  var answer: ThreadDumpAnswer
  var threads: [CrashReport.Thread]
  /// The operations open in its ledger, aged at the capture; nil without a ledger.
  var openOperations: CrashReport.OpenOperations? = nil
  /// Why the ledger could not be read, when it could not.
  var openOperationsProblem: String? = nil
  /// The cooperative pool's seats in the dump (printed first); nil without a pool thread.
  var poolCensus: PoolCensus? = nil

  /// The wait-for graph's verdict, its chain's end named by the last thread's first frame in
  /// the executable.
  var verdict: WaitVerdict? {
    answer.snapshot?.waits?.verdict().map {
      HangFacts.namingEnd($0, threads: threads, executable: header.executable)
    }
  }

  /// jstack's shape: a heading (and the wait-for verdict, when there is one), then per thread
  /// `"name" tid=… state`, what it waits on (`- in clock_nanosleep`) and its frames.
  func text() -> String {
    var lines: [String] = []
    let app = header.appName.isEmpty ? Syscall.baseName(of: header.executable) : header.appName
    lines.append(
      "Thread dump of pid \(pid) (\(app)), session \(header.sessionID), "
        + "\(ISO8601.string(nanoseconds: answer.wallNanoseconds)): \(threads.count) threads, "
        + "each paused at most \(Self.milliseconds(answer.longestPauseNanoseconds))")
    // The pool's seats first, when one is occupied (an idle pool is no news).
    if let poolCensus, poolCensus.occupied > 0 { lines.append("Pool: " + poolCensus.text) }
    let waits = answer.snapshot?.waits
    if let verdict {
      let names = Dictionary(
        threads.compactMap { thread in thread.name.map { (UInt32(clamping: thread.id), $0) } },
        uniquingKeysWith: { first, _ in first })
      lines.append(ThreadWaits.describe(verdict, names: names))
    }
    let activities = Dictionary(
      (waits?.threads ?? []).map { (Int($0.threadID), $0.activity) }, uniquingKeysWith: { first, _ in first })
    for thread in threads {
      lines.append("")
      var heading = "\(jsonQuoted(thread.name ?? "")) tid=\(thread.id) \(thread.state.description)"
      if let reasons = thread.notSignalled, !reasons.isEmpty {
        heading +=
          " (not signalled: \(reasons.map(ReportPrinter.notSignalledPhrase).joined(separator: ", ")))"
      }
      lines.append(heading)
      // jstack's place for what a thread waits on: under its heading.
      if let activity = activities[thread.id] { lines.append("    - \(activity)") }
      if thread.frames.isEmpty { lines.append("    (no frames)") }
      for frame in thread.frames { lines.append("    at " + Self.line(frame)) }
    }
    if let openOperations {
      lines.append("")
      lines.append(
        contentsOf: ReportPrinter(style: TerminalStyle(enabled: false)).openOperationLines(
          openOperations, when: "at the dump"))
    }
    if let openOperationsProblem { lines += ["", "Open operations: \(openOperationsProblem)"] }
    return lines.joined(separator: "\n")
  }

  /// `function (file:line)` (`function [inlined] (file:line)` for a call inlined into the next
  /// frame), or what is known of an unnamed frame; how it was found when not
  /// from a frame record, marked as report stack texts mark it (`{async}` for an async caller).
  static func line(_ frame: CrashReport.Frame) -> String {
    var text = frame.function ?? frame.address
    if frame.isInlined { text += " [inlined]" }
    if let file = frame.file {
      text += " (\(file)" + (frame.line.map { ":\($0)" } ?? "") + ")"
    } else if let module = frame.module {
      text += " (\(Syscall.baseName(of: module))" + (frame.moduleOffset.map { "+\($0)" } ?? "") + ")"
    }
    if let note = frame.note { text += " [\(note)]" }
    if let origin = frame.foundBy { text += " {\(origin.rawValue)}" }
    return text
  }

  static func milliseconds(_ nanoseconds: UInt64) -> String {
    let tenths = (nanoseconds + 5_000) / 10_000
    return "\(tenths / 100).\(tenths % 100 < 10 ? "0" : "")\(tenths % 100) ms"
  }

  /// One object: the process and the capture's figures, then `threads`, each as a report's
  /// `threads` entry holds it (the same keys: `CrashReport.Thread`'s coding keys).
  func json() -> String {
    var json = JSONWriter()
    json.object { object in
      object.field("pid", pid)
      object.field("session.id", header.sessionID.description)
      object.field("service.name", header.appName)
      object.field("process.executable.path", header.executable)
      object.field("time_unix_nano", answer.wallNanoseconds)
      object.field("crumbs.longest_pause_ns", answer.longestPauseNanoseconds)
      // The pool's seats first, as the text prints them.
      if let poolCensus {
        object.object("crumbs.pool_census") { census in
          census.field("text", poolCensus.text)
          census.field("seats_per_pool", poolCensus.seatsPerPool)
          census.field("occupied", poolCensus.occupied)
          census.field("blocked", poolCensus.blocked)
          census.array("threads") { array in
            for seat in poolCensus.seats {
              array.object { entry in
                entry.field("thread.id", UInt64(seat.threadID))
                if let name = seat.threadName { entry.field("thread.name", name) }
                entry.field("pool", seat.pool)
                entry.field("state", seat.state.rawValue)
                if let call = seat.systemCall { entry.field("system_call.name", call) }
                if let call = seat.call { entry.field("call", call) }
                if let frame = seat.appFrame { entry.field("app_frame", frame) }
              }
            }
          }
        }
      }
      object.array("threads") { array in
        for thread in threads { array.object { ThreadJSON.write(thread, into: &$0) } }
      }
      // As a report's `crumbs.open_operations`, each aged at the capture.
      if let openOperations { object.object("crumbs.open_operations") { openOperations.write(into: &$0) } }
      if let openOperationsProblem { object.field("crumbs.open_operations_problem", openOperationsProblem) }
      // What each thread waited on just after the capture, and the wait-for graph's verdict.
      if let waits = answer.snapshot?.waits {
        object.array("crumbs.waits") { array in
          for wait in waits.threads {
            array.object { entry in
              entry.field("thread.id", UInt64(wait.threadID))
              if let state = wait.state { entry.field("state", state) }
              if let call = wait.systemCall { entry.field("system_call", call) }
              if let name = wait.systemCallName { entry.field("system_call.name", name) }
              if let address = wait.lockAddress {
                entry.field("lock.address", "0x" + String(address, radix: 16))
              }
              if let kind = wait.lockKind { entry.field("lock.kind", kind.rawValue) }
              if let object = wait.lockObject { entry.field("lock.object", "0x" + String(object, radix: 16)) }
              if let wantsToWrite = wait.wantsToWrite {
                entry.field("lock.wants", wantsToWrite ? "write" : "read")
              }
              if let readers = wait.readers { entry.field("lock.readers", UInt64(readers)) }
              if let owner = wait.owner { entry.field("lock.owner", UInt64(owner)) }
              if let unknown = wait.ownerUnknown { entry.field("lock.owner_unknown", unknown) }
              entry.field("activity", wait.activity)
            }
          }
        }
        if let verdict {
          object.object("crumbs.verdict") { entry in
            entry.field("kind", verdict.kind.rawValue)
            entry.array("threads") { array in for tid in verdict.threads { array.append(UInt64(tid)) } }
            entry.array("locks") { array in
              for lock in verdict.locks { array.append("0x" + String(lock, radix: 16)) }
            }
            if !verdict.lockKinds.isEmpty {
              entry.array("lock_kinds") { array in
                for kind in verdict.lockKinds { array.append(kind.rawValue) }
              }
            }
            if let end = verdict.end { entry.field("end", end) }
            if let frame = verdict.endFrame { entry.field("end.frame", frame) }
          }
        }
      }
    }
    return String(decoding: json.bytes, as: UTF8.self)
  }
}
