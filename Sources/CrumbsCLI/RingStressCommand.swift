// RingStressCommand.swift — `crumbs ring stress --file F --threads T --seconds S`.
//
// Creates a ring (BreadcrumbRing.create), installs it, and has T threads append through the
// public addBreadcrumb as fast as they can for S seconds. Each message names its thread and a
// per-thread counter ("stress t=3 n=12345", attributes thread=3 n=12345), so a dump of the file
// can be checked: within one thread, counters must strictly increase in ring order. Prints the
// total and the rate, and leaves the file closed clean.
//
// The clock is read every 1024 appends so the deadline check does not dominate the loop. The
// measured cost includes building the message and attribute strings (what a caller pays too).

import ArgumentParser
import Crumbs
import CrumbsPlatform
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

struct RingStressCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "stress",
    abstract: "Append from many threads at once as fast as possible, then report the rate.")

  @Option(help: "The ring file to create (must not exist).") var file: String
  @Option(help: "Appending threads.") var threads = 4
  @Option(help: "How long to append.") var seconds: Double = 2
  @Option(help: "Bytes per slot (power of two, 64...4096).") var slotSize = 256
  @Option(help: "About how many slots.") var slots = 4096

  func validate() throws {
    guard threads >= 1, threads <= 1024 else { throw ValidationError("--threads must be in 1...1024") }
    guard seconds > 0, seconds <= 86_400 else { throw ValidationError("--seconds must be in (0, 86400]") }
  }

  /// One appending thread's tally. Written only by its thread until `done` is signalled.
  final class Worker: @unchecked Sendable {
    let number: Int
    var appends = 0
    var elapsedNanoseconds: UInt64 = 0
    /// CPU time this thread spent appending: unlike wall time, not inflated when other processes
    /// take the cores.
    var cpuNanoseconds: UInt64 = 0
    init(number: Int) { self.number = number }
  }

  func run() throws {
    var options = RingOptions()
    options.slotSize = slotSize
    options.slotCount = slots
    options.appName = "crumbs-stress"
    let ring: BreadcrumbRing
    do {
      ring = try BreadcrumbRing.create(at: file, options: options)
    } catch {
      LineWriter.error("crumbs: \(error)")
      throw ExitCode(1)
    }
    ring.install()

    let workers = (0..<threads).map { Worker(number: $0) }
    let ready = DispatchSemaphore(value: 0)
    let go = DispatchSemaphore(value: 0)
    let done = DispatchSemaphore(value: 0)
    let duration = UInt64(seconds * 1e9)
    for worker in workers {
      let thread = Thread {
        ready.signal()
        go.wait()
        Self.append(worker, for: duration)
        done.signal()
      }
      thread.stackSize = 1 << 20
      thread.start()
    }
    for _ in workers { ready.wait() }
    let started = Self.monotonicNanoseconds()
    for _ in workers { go.signal() }
    for _ in workers { done.wait() }
    let wall = Double(Self.monotonicNanoseconds() - started) / 1e9
    ring.close(clean: true)

    let total = workers.reduce(0) { $0 + $1.appends }
    let busy = workers.reduce(0.0) { $0 + Double($1.elapsedNanoseconds) }
    let cpu = workers.reduce(0.0) { $0 + Double($1.cpuNanoseconds) }
    var output = LineWriter()
    output.write(line: "\(file): \(total) appends in \(format(wall, 2)) s from \(threads) thread(s)")
    output.write(
      line: "rate: \(format(Double(total) / wall / 1e6, 2)) M appends/s, "
        + "\(format(busy / Double(max(total, 1)), 1)) ns/append per thread "
        + "(\(format(cpu / Double(max(total, 1)), 1)) ns of CPU)")
    for worker in workers {
      let perAppend = Double(worker.elapsedNanoseconds) / Double(max(worker.appends, 1))
      let cpuPerAppend = Double(worker.cpuNanoseconds) / Double(max(worker.appends, 1))
      output.write(
        line: "  t=\(worker.number): \(worker.appends) appends, \(format(perAppend, 1)) ns/append "
          + "(\(format(cpuPerAppend, 1)) ns of CPU)")
    }
    output.flush()
  }

  /// The appending loop of one thread.
  static func append(_ worker: Worker, for duration: UInt64) {
    let thread = String(worker.number)
    let prefix = "stress t=\(thread) n="
    let cpuStart = SystemClock.threadCPUNanoseconds()
    let start = monotonicNanoseconds()
    var count = 0
    var now = start
    while now - start < duration {
      for _ in 0..<1024 {
        let counter = String(count)
        addBreadcrumb(
          prefix + counter, level: .info, type: .manual, attributes: ["thread": thread, "n": counter])
        count += 1
      }
      now = monotonicNanoseconds()
    }
    worker.appends = count
    worker.elapsedNanoseconds = now - start
    worker.cpuNanoseconds = SystemClock.threadCPUNanoseconds() - cpuStart
  }

  static func monotonicNanoseconds() -> UInt64 { SystemClock.monotonicNanoseconds() }
}

private func format(_ value: Double, _ decimals: Int) -> String {
  String(format: "%.\(decimals)f", value)
}
