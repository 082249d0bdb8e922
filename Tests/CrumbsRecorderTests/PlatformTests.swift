// PlatformTests.swift — the platform layer on its own: errors that say what the kernel said (or
// that nothing failed but the result was refused), the process runner, threads, clocks.

import CrumbsPlatform
import CrumbsTestSupport
import Synchronization
import SystemPackage
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct PlatformTests {
  @Test func readingARingLeavesMallocsThresholdWhereItWas() throws {
    // glibc raises its mmap threshold to the size of each mapped block it frees. A next launch
    // read a 1 MiB ring into an Array, freed it, and from then on blocks under 1 MiB came from
    // the reading thread's arena, which kept about 2 MB resident for the rest of the process
    // (PageBuffer.swift). The image now lives in pages of its own. Probed in a fresh process:
    // this one's malloc has seen every other test's blocks.
    let directory = TestDirectory()
    let ring = try RingDirectory(path: directory.path).createRing()
    for index in 0..<100 { ring.append("breadcrumb \(index)", level: .info) }
    let path = ring.path
    ring.close()
    let size = try Syscall.openRegularFileForReading(path)
    Syscall.close(size.fd)
    #expect(PageBuffer.isWorthIt(byteCount: Int(size.size)))
    // Between the image and the decoded breadcrumbs (an Array of one entry per slot, a quarter
    // of the image's size or less), so that only the image's free could have raised the
    // threshold past it.
    let probe = Int(size.size) * 3 / 4
    let child = try ChildProcess(
      ChildProcess.testChild, ["read-then-probe-malloc", "ring", path, String(probe)])
    let output = child.readRemaining()
    child.wait()
    #expect(child.exitCode == 0, "\(output)")
    #expect(output.contains("read 100\n"), "\(output)")
    #expect(
      output.contains("maps-own-block yes\n"),
      "after reading a \(size.size)-byte ring, malloc serves \(probe) bytes from an arena: \(output)")
  }

  @Test func aMeminfoFieldTooLargeForBytesIsNoneNotATrap() throws {
    let directory = TestDirectory()
    let file = directory.file("meminfo")
    try Syscall.writeFileAtomically(
      file, Array("MemTotal:       18014398509481984 kB\nMemAvailable:   16318500 kB\n".utf8))
    // 2^54 kB is 2^64 bytes: one more than UInt64 holds.
    #expect(SystemFacts.meminfo("MemTotal", file: file) == nil)
    #expect(SystemFacts.meminfo("MemAvailable", file: file) == 16_318_500 * 1024)
  }

  @Test func aMissingFileCarriesTheKernelsErrno() throws {
    let directory = TestDirectory()
    #expect {
      try Syscall.readFile(directory.file("absent"))
    } throws: { error in
      let error = error as? SystemCallError
      return error?.errno == .noSuchFileOrDirectory && error?.refusal == nil
        && error?.description == "open(\(directory.file("absent"))): \(Errno.noSuchFileOrDirectory)"
    }
  }

  @Test func refusedResultsInventNoErrno() throws {
    let directory = TestDirectory()
    let big = directory.file("big")
    try Syscall.writeFileAtomically(big, [UInt8](repeating: 7, count: 100))
    #expect {
      try Syscall.readFile(big, limit: 10)
    } throws: { error in
      let error = error as? SystemCallError
      return error?.errno == nil && error?.refusal == .tooLarge(limit: 10)
        && error?.description.hasSuffix("larger than the limit of 10 bytes") == true
    }
    let fifo = directory.file("fifo")
    #expect(mkfifo(fifo, 0o600) == 0)
    // A FIFO would block a reader forever: refused at once, without an errno.
    #expect {
      try Syscall.openRegularFileForReading(fifo)
    } throws: { error in
      let error = error as? SystemCallError
      return error?.errno == nil && error?.refusal == .notARegularFile
    }
  }

  @Test func subprocessRunCollectsBothStreamsAndTheExitCode() throws {
    let output = try Subprocess.run(
      "/bin/sh", ["-c", "echo out; echo err >&2; exit 3"], timeoutMilliseconds: 60_000)
    #expect(String(decoding: output.standardOutput, as: UTF8.self) == "out\n")
    #expect(String(decoding: output.standardError, as: UTF8.self) == "err\n")
    #expect(output.exitStatus == 3 && output.terminatingSignal == nil && !output.timedOut)
  }

  @Test func subprocessRunKillsAChildPastItsTimeAndCapsOutput() throws {
    // The child never ends by itself; its output is far beyond the cap.
    let output = try Subprocess.run(
      "/bin/sh", ["-c", "yes crumbs; sleep 1000"], timeoutMilliseconds: 2_000, outputLimit: 4096)
    #expect(output.timedOut)
    #expect(output.terminatingSignal == SIGKILL)
    #expect(output.standardOutput.count == 4096)
  }

  @Test func subprocessChildStartsWithDefaultSignalsAndGivesItsEnvironment() throws {
    // SIGTERM ignored here must not be ignored in the child: it dies by it.
    let previous = signal(SIGTERM, SIG_IGN)
    defer { signal(SIGTERM, previous) }
    let child = try Subprocess(
      "/bin/sh", ["-c", "echo $CRUMBS_TEST_VALUE; kill -TERM $$; echo survived"],
      environment: ["CRUMBS_TEST_VALUE": "given"])
    #expect(child.readLine(seconds: 60) == "given")
    child.wait(seconds: 60)
    #expect(child.terminatingSignal == SIGTERM)
    #expect(child.readLine(seconds: 5) == nil)
  }

  @Test func aSpawnThatCannotStartThrows() {
    #expect(throws: SystemCallError.self) { try Subprocess("/nonexistent/program", []) }
  }

  @Test func backgroundThreadsAreNamedAndJoinable() throws {
    let name = Mutex("")
    let thread = try BackgroundThread.startJoinable(name: "crumbs.test.thread.long") {
      let bytes = (try? Syscall.readFile("/proc/thread-self/comm", limit: 64)) ?? []
      name.withLock { $0 = String(decoding: bytes.filter { $0 != 10 }, as: UTF8.self) }
    }
    thread.join()
    #expect(name.withLock { $0 } == "crumbs.test.thr")  // Linux keeps 15 bytes
  }

  @Test func theMonotonicClockNeverGoesBack() {
    var last = SystemClock.monotonicNanoseconds()
    for _ in 0..<10_000 {
      let now = SystemClock.monotonicNanoseconds()
      #expect(now >= last)
      last = now
    }
    #expect(SystemClock.wallNanoseconds() > 1_700_000_000 * 1_000_000_000)
  }
}
