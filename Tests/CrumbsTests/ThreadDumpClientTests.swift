// ThreadDumpClientTests.swift — thread dumps from the process's side, in real children:
// `client.captureThreads()` returns every thread named, with its own function; a flood of
// requests is read in bounded takes (a full pipe drops the rest) and a tgkill from inside is no
// request; and a damaged header field never names a signal outside the real-time range.

import CrumbsPlatform
import CrumbsSignalPath
import CrumbsTestSupport
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite("Thread dumps, the process's side", .serialized)
struct ThreadDumpClientTests {
  @Test("captureThreads(): every thread, the parked ones with their names and functions")
  func captureThreadsNamesParkedThreads() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["dump-capture", directory.file("crumbs")])
    let lines = child.readLines(until: "done", seconds: 120)
    child.wait(seconds: 120)
    let context = lines.joined(separator: "\n")
    #expect(child.exitCode == 0, "\(context)")
    let threads = lines.filter { $0.hasPrefix("thread ") }.map { $0.split(separator: " ").map(String.init) }
    // The calling thread first, as the one that asked.
    #expect(threads.first?[3] == "requesting", "\(context)")
    for (name, function) in [
      ("parked-reader", "crumbs_test_parked_reader"), ("parked-waiter", "crumbs_test_parked_waiter"),
    ] {
      let thread = threads.first { $0.count >= 5 && $0[2] == name }
      #expect(thread?[3] == "captured", "\(name): \(context)")
      #expect(thread?[4].split(separator: "|").contains(Substring(function)) == true, "\(name): \(context)")
    }
    let pause = lines.first { $0.hasPrefix("pause ") }.flatMap { UInt64($0.dropFirst(6)) }
    // The parked threads block in system calls: walked where they block, never paused (a
    // runtime thread that happened to run may have been).
    #expect(pause != nil, "\(context)")
    // The operation open during the capture, begun on the capturing thread, with its age.
    let capturing = try #require(lines.first { $0.hasPrefix("capturing-thread ") }, "\(context)").dropFirst(
      17)
    let open = lines.filter { $0.hasPrefix("open ") }.map {
      $0.split(separator: " ", maxSplits: 4).map(String.init)
    }
    #expect(open.count == 1, "\(context)")
    #expect(open.first?[1] == String(capturing), "\(context)")
    #expect(open.first.flatMap { UInt64($0[2]) } != nil, "\(context)")
    #expect(open.first?[3] == "job" && open.first?[4] == "orders.export", "\(context)")
  }

  @Test("a flood of requests: bounded takes, the rest dropped; a tgkill from inside is no request")
  func floodOfRequests() throws {
    let directory = TestDirectory()
    let child = try ChildProcess(ChildProcess.testChild, ["dump-flood", directory.file("crumbs")])
    let output = child.readRemaining(seconds: 120)
    child.wait(seconds: 120)
    #expect(child.exitCode == 0, "\(output)")
    let lines = output.split(separator: "\n").map(String.init)
    #expect(lines.first?.hasPrefix("queued ") == true, "\(output)")
    // 16 distinct cookies, the first request's first; the rest of the pipe read and dropped.
    #expect(lines.dropFirst() == ["taken 16 first 1", "left 0", "tkill 0"], "\(output)")
  }

  @Test("the header's signal: real-time or 0, whatever the file says")
  func headerFieldIsARealTimeSignalOrNothing() throws {
    let directory = TestDirectory()
    let ring = try RingDirectory(path: directory.path).createRing()
    let path = ring.path
    ring.close(clean: false)
    for (written, read) in [(Int32(0), Int32(0)), (40, 40), (64, 64), (9, 0), (65, 0), (-1, 0)] {
      var bytes = try Syscall.readFile(path)
      withUnsafeBytes(of: written.littleEndian) { field in
        let offset = MemoryLayout<crumbs_ring_header>.offset(of: \.thread_dump_signal)!
        bytes.replaceSubrange(offset..<offset + 4, with: field)
      }
      try Syscall.writeFileAtomically(path, bytes, durable: false)
      #expect(try RingReader.readHeader(file: path).header.threadDumpSignal == read, "written \(written)")
    }
  }
}
