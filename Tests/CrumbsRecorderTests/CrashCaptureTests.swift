// CrashCaptureTests.swift — real crashing children, and what they leave behind.
//
// Each test starts CrumbsTestChild with a crash scenario (Tests/CrumbsTestChild/
// CrashScenarios.swift), reads the facts it prints (ring and record paths, crashing thread, the
// faulting function's address), waits (bounded) for it to die, then checks the exit status and
// reads back the crash record and the ring. The matrix runs the debug child and, when
// CRUMBS_RELEASE_CHILD names a release build of it (`make test` does), the release child; each
// with the Swift runtime backtracer on (chained to: its output must still appear and its
// `swift-backtrace` helper must not be left behind) and off (SWIFT_BACKTRACE=enable=no).
// Every child is killed and reaped on every path; nothing here sleeps to assert on timing.

import CrumbsPlatform
import CrumbsSignalPath
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - The matrix

/// What a scenario must end with.
struct CrashExpectation: CustomStringConvertible, Sendable {
  var scenario: String
  var signal: Int32
  var code: Int32?
  var faultAddressIsZero = false
  /// The first frame must lie in the printed function (C helpers, exact) or some early frame
  /// must (Swift traps: the trap may sit in libswiftCore, the function a few frames out).
  var firstFrameInFunction = false
  var someFrameInFunction = false
  var description: String { scenario }
}

let crashExpectations: [CrashExpectation] = [
  CrashExpectation(
    scenario: "null-deref", signal: SIGSEGV, code: 1, faultAddressIsZero: true,
    firstFrameInFunction: true),
  CrashExpectation(
    scenario: "fatal-error", signal: swiftTrapSignal, code: swiftTrapCode, someFrameInFunction: true),
  CrashExpectation(
    scenario: "precondition", signal: swiftTrapSignal, code: swiftTrapCode, someFrameInFunction: true),
  CrashExpectation(
    scenario: "force-unwrap", signal: swiftTrapSignal, code: swiftTrapCode, someFrameInFunction: true),
  CrashExpectation(
    scenario: "bounds", signal: swiftTrapSignal, code: swiftTrapCode, someFrameInFunction: true),
  CrashExpectation(
    scenario: "overflow", signal: swiftTrapSignal, code: swiftTrapCode, someFrameInFunction: true),
  CrashExpectation(
    scenario: "divide-by-zero", signal: swiftTrapSignal, code: swiftTrapCode, someFrameInFunction: true),
  CrashExpectation(scenario: "abort", signal: SIGABRT, code: -6),  // SI_TKILL: raise()
  CrashExpectation(scenario: "c-assert", signal: SIGABRT, code: -6),
  CrashExpectation(scenario: "bus-error", signal: SIGBUS, code: 2),  // BUS_ADRERR
  CrashExpectation(scenario: "sigfpe", signal: SIGFPE, code: 1, firstFrameInFunction: true),  // FPE_INTDIV
  // int3 / brk: SIGTRAP (si_code SI_KERNEL on x86_64, TRAP_BRKPT on aarch64).
  CrashExpectation(scenario: "sigtrap", signal: SIGTRAP, firstFrameInFunction: true),
  // A seccomp filter traps getppid: SIGSYS, SYS_SECCOMP; the fault is inside libc's syscall().
  CrashExpectation(scenario: "sigsys", signal: SIGSYS, code: 1, someFrameInFunction: true),
  CrashExpectation(scenario: "stack-overflow-main", signal: SIGSEGV, firstFrameInFunction: true),
  CrashExpectation(scenario: "stack-overflow-thread", signal: SIGSEGV, firstFrameInFunction: true),
  CrashExpectation(
    scenario: "thread-segv", signal: SIGSEGV, code: 1, faultAddressIsZero: true,
    firstFrameInFunction: true),
  CrashExpectation(
    scenario: "recurse-64", signal: SIGSEGV, code: 1, faultAddressIsZero: true,
    firstFrameInFunction: true),
]

// MARK: - Tests

@Suite("Crash capture")
struct CrashCaptureTests {
  @Test(
    "a crashing child dies by its signal and leaves a complete record and its breadcrumbs",
    arguments: crashExpectations, ChildVariant.all)
  func crashLeavesRecord(expectation: CrashExpectation, variant: ChildVariant) throws {
    guard variant.executable != nil else {
      print("skipped \(expectation.scenario) [\(variant)]: set CRUMBS_RELEASE_CHILD (make test does)")
      return
    }
    let directory = TestDirectory()
    let run = try runCrashScenario(expectation.scenario, variant: variant, directory: directory)
    let context = "\(expectation.scenario) [\(variant)]: \(run.lines.joined(separator: " | "))"
    #expect(run.signal == expectation.signal, "exit \(run.shellStatus) for \(context)")
    #expect(run.shellStatus == 128 + expectation.signal, "\(context)")

    let recordPath = try #require(run.recordPath, "no record path: \(context)")
    let record = try CrashRecord.read(file: recordPath)
    #expect(record.status == .complete, "\(context)")
    #expect(record.signal.number == expectation.signal, "\(context)")
    if let code = expectation.code { #expect(record.signal.code == code, "\(context)") }
    if expectation.faultAddressIsZero { #expect(record.signal.faultAddress == 0, "\(context)") }
    #expect(record.threadID == UInt32(run.facts["thread"] ?? "") ?? 0, "\(context)")
    #expect(!record.frames.isEmpty, "\(context)")
    #expect(record.threadsCrashed == 1, "\(context)")
    #expect(record.handlerDurationNanoseconds > 0)
    #expect(record.processUptimeNanoseconds > 0)
    #expect(record.freeMemoryBytes > 0 && record.totalMemoryBytes >= record.freeMemoryBytes)
    #expect(!record.modules.isEmpty)
    #expect(record.module(containing: record.frames[0]) != nil, "first frame in no module: \(context)")
    #expect(record.registers.count >= 23 || record.architecture != "x86_64")

    if expectation.firstFrameInFunction || expectation.someFrameInFunction {
      let start = try #require(run.functionAddress, "no function address: \(context)")
      // A C helper or @_cdecl thunk is a few dozen bytes; 512 bounds "inside it".
      let inside = { (frame: UInt64) in frame >= start && frame < start + 512 }
      if expectation.firstFrameInFunction {
        #expect(inside(record.frames[0]), "frame 0 \(record.frames[0]) not in \(start): \(context)")
      } else {
        #expect(
          record.frames.prefix(12).contains { inside($0) },
          "no early frame in \(start): \(record.frames.prefix(12)) \(context)")
      }
    }

    let ring = try RingReader.read(file: try #require(run.ringPath))
    #expect(ring.header.state == .crashed, "\(context)")
    let lastMessage = try #require(run.facts["last-breadcrumb"])
    #expect(ring.breadcrumbs.contains { $0.message == lastMessage }, "\(context)")
    let fatal = ring.breadcrumbs.filter { $0.level == .fatal }
    #expect(fatal.count == 1, "exactly one fatal breadcrumb: \(context)")
    #expect(fatal.first?.fromSignalHandler == true)
    #expect(fatal.first?.message.hasPrefix(record.signal.name) == true, "\(fatal) \(context)")

    // The runtime backtracer takes SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE and SIGSEGV
    // (docs/platform-facts.md), not SIGSYS: nothing to chain to there.
    if variant.backtracer && expectation.signal != SIGSYS {
      // Chained: the runtime backtracer still ran and printed its report.
      #expect(
        run.stderr.contains("Crash") || run.stderr.contains("crash"),
        "backtracer output missing for \(context): \(run.stderr.prefix(400))")
    }
  }

  @Test("abort() and C assert produce exactly one record and one fatal breadcrumb")
  func abortRecordsOnce() throws {
    for scenario in ["abort", "c-assert"] {
      let directory = TestDirectory()
      let run = try runCrashScenario(
        scenario, variant: ChildVariant(release: false, backtracer: false), directory: directory)
      #expect(run.signal == SIGABRT)
      let record = try CrashRecord.read(file: try #require(run.recordPath))
      #expect(record.threadsCrashed == 1)
      #expect(record.signal.senderPID == record.pid)
      let ring = try RingReader.read(file: try #require(run.ringPath))
      #expect(ring.breadcrumbs.filter { $0.level == .fatal }.count == 1)
      let crashFiles = try Syscall.directoryEntries(directory.path + "/rings").filter {
        $0.hasSuffix(".crash")
      }
      #expect(crashFiles.count == 1)
    }
  }

  @Test("SIGQUIT is recorded only when asked for, and still ends the process")
  func quitIsOptIn() throws {
    for catches in [false, true] {
      let directory = TestDirectory()
      let run = try runCrashScenario(
        "sigquit", variant: ChildVariant(release: false, backtracer: false), directory: directory,
        environment: catches ? ["CRUMBS_TEST_CATCH_QUIT": "1"] : [:])
      #expect(run.signal == SIGQUIT)
      let record = try CrashRecord.read(file: try #require(run.recordPath))
      if catches {
        #expect(record.status == .complete)
        #expect(record.signal.number == SIGQUIT)
      } else {
        #expect(record.status == .noCrash)
      }
    }
  }

  @Test("a call through a null pointer records the caller as the second frame", arguments: [false, true])
  func callThroughNull(release: Bool) throws {
    let variant = ChildVariant(release: release, backtracer: false)
    guard variant.executable != nil else { return }
    let directory = TestDirectory()
    let run = try runCrashScenario("call-null", variant: variant, directory: directory)
    #expect(run.signal == SIGSEGV)
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.frames.first == 0)
    #expect(record.leafFrameInserted)
    let start = try #require(run.functionAddress)
    #expect(record.frames.count >= 2 && record.frames[1] > start && record.frames[1] < start + 512)
  }

  /// The main thread's stack bounds are registered at install without reading /proc/self/maps
  /// (it costs hundreds of microseconds in a process with many modules): the top must still be
  /// the stack mapping's end, and a crash on that thread uses them.
  @Test("a main-thread crash walks the stack within bounds registered at install")
  func mainThreadStackBounds() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "null-deref", variant: ChildVariant(release: false, backtracer: false), directory: directory)
    #expect(run.signal == SIGSEGV)
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    let mapping = try #require(run.facts["stack-mapping"]).split(separator: " ").compactMap { UInt64($0) }
    try #require(mapping.count == 2)
    #expect(record.stackSource == .registered)
    #expect(record.stackHigh == mapping[1])
    #expect(record.stackLow < mapping[0])  // the limit the stack may still grow to
    #expect(record.frames.count >= 2)
  }

  /// Every alternate stack of the pool has a guard page below it (guard regions where the
  /// kernel has them, PROT_NONE pages elsewhere): a store there faults, it does not land.
  @Test(
    "the guard below an alternate stack faults, set at install or later",
    arguments: [(later: false, index: 3), (later: true, index: 40)])
  func alternateStackGuard(later: Bool, index: Int) throws {
    let directory = TestDirectory()
    var environment = ["CRUMBS_TEST_GUARD_INDEX": String(index)]
    if later { environment["CRUMBS_TEST_GUARDS_LATER"] = "1" }
    let run = try runCrashScenario(
      "altstack-guard", variant: ChildVariant(release: false, backtracer: false), directory: directory,
      environment: environment)
    #expect(run.signal == SIGSEGV)
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.signal.faultAddress == UInt64(try #require(run.facts["guard"].flatMap { UInt64($0) })))
  }

  @Test(
    "a stack overflow is recorded from the alternate stack",
    arguments: ["stack-overflow-main", "stack-overflow-thread", "stack-overflow-recycled"])
  func stackOverflow(scenario: String) throws {
    let directory = TestDirectory()
    // One pool stack: the recycled scenario's overflower needs the one an exited thread gave back
    // on its first append (threads get no stack at creation there).
    let run = try runCrashScenario(
      scenario, variant: ChildVariant(release: false, backtracer: false), directory: directory,
      environment: scenario == "stack-overflow-recycled"
        ? ["CRUMBS_TEST_POOL": "1", "CRUMBS_TEST_NO_NEW_THREAD_STACKS": "1"] : [:])
    #expect(run.signal == SIGSEGV)
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.status == .complete)
    #expect(record.ranOnAlternateStack)
    #expect(record.frames.count > 8, "a deep recursion leaves many frames")
    if scenario != "stack-overflow-main" { #expect(record.threadName == "overflower") }
  }

  @Test("a thread's first append makes no system call but its tid and sigaltstack, pool used up or not")
  func firstAppendSystemCalls() throws {
    // The child's threads first take every pool stack at once and exit; then one thread makes
    // its first append under a seccomp filter that kills the process on any system call but
    // gettid, sigaltstack, clock_gettime, getcpu (and ppoll, to park afterwards): no mprotect,
    // no probing of other threads, no scan that grows with the pool.
    let pool = 4
    let stackSize = String(CrashHandlerOptions().alternateStackSize)
    let directory = TestDirectory()
    let child = try Subprocess(
      ChildProcess.testChild, ["first-append-seccomp", directory.path],
      // Threads created after install would get their stacks at creation: this is about the
      // first append's own path, which threads that existed before install take.
      environment: [
        "SWIFT_BACKTRACE": "enable=no", "CRUMBS_TEST_POOL": String(pool),
        "CRUMBS_TEST_NO_NEW_THREAD_STACKS": "1",
      ],
      standardError: .file(directory.file("stderr.txt")))
    let lines = child.readLines(until: "done", seconds: 60)
    child.wait(seconds: 60)
    #expect(
      child.exitCode == 0,
      "killed by signal \(child.terminatingSignal ?? 0) (SIGSYS is \(SIGSYS)): \(lines)")

    let holders = lines.filter { $0.hasPrefix("holder ") }.map { $0.split(separator: " ").map(String.init) }
    #expect(holders.count == pool, "\(lines)")
    #expect(Set(holders.map { $0[1] }).count == pool, "each holder has its own stack: \(holders)")
    #expect(holders.allSatisfy { $0[2] == stackSize && $0[3] == "0" }, "\(holders)")
    let watched = try #require(
      lines.first { $0.hasPrefix("watched ") }?.split(separator: " ").map(String.init), "\(lines)")
    #expect(watched[2] == stackSize && watched[3] == "0", "the watched thread has one of ours: \(watched)")
    #expect(
      holders.contains { $0[1] == watched[1] },
      "the pool was used up, so it is a stack an exited holder gave back: \(watched) \(holders)")
  }

  @Test("a crash on a thread while others append names that thread")
  func threadCrash() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "thread-segv", variant: ChildVariant(release: false, backtracer: false), directory: directory)
    #expect(run.signal == SIGSEGV)
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.threadName == "crasher")
    #expect(String(record.threadID) == run.facts["thread"])
    let ring = try RingReader.read(file: try #require(run.ringPath))
    #expect(ring.breadcrumbs.contains { $0.message.hasPrefix("background") })
    #expect(ring.breadcrumbs.contains { $0.message == "crasher started" })
  }

  @Test("two threads crashing at once: one record, the other thread counted, no hang")
  func twoThreads() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "two-threads", variant: ChildVariant(release: false, backtracer: false), directory: directory)
    #expect(run.signal == SIGSEGV)
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.status == .complete)
    #expect(["crasher-a", "crasher-b"].contains(record.threadName))
    // The second thread may reach the handler before or after the process dies.
    #expect(record.threadsCrashed >= 1 && record.threadsCrashed <= 2)
    // The other crasher is in the thread table: stopped by the capture before its fault, or
    // caught waiting in the handler behind the first one (then with its own fault's frames).
    let other = try #require(
      record.threads?.threads.first {
        ["crasher-a", "crasher-b"].contains($0.name) && $0.id != record.threadID
      },
      "\(record.threads?.threads.map(\.name) ?? [])")
    #expect([.alsoCrashed, .captured].contains(other.state), "\(other.state)")
    if other.state == .alsoCrashed {
      #expect(other.signal == SIGSEGV && !other.frames.isEmpty)
    }
    let ring = try RingReader.read(file: try #require(run.ringPath))
    #expect(ring.breadcrumbs.filter { $0.level == .fatal }.count == 1)
  }

  @Test(
    "a crash inside the handler leaves a partial record and the original signal", arguments: [false, true])
  func crashInsideHandler(backtracer: Bool) throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "abort", variant: ChildVariant(release: false, backtracer: backtracer), directory: directory,
      environment: ["CRUMBS_TEST_FAULT_IN_HANDLER": "1"])
    #expect(run.signal == SIGABRT, "died by the original signal, not the nested SIGSEGV")
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.status == .partial)
    #expect(record.signal.number == SIGABRT)
    #expect(record.nestedSignal == SIGSEGV)
    #expect(record.nestedFaultAddress == 8)
  }

  @Test("kill -SEGV from another process records the sender", arguments: [false, true])
  func sentSignal(backtracer: Bool) throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "wait-for-signal", variant: ChildVariant(release: false, backtracer: backtracer),
      directory: directory
    ) { child, _ in
      kill(child.pid, SIGSEGV)
    }
    #expect(run.signal == SIGSEGV)
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.status == .complete)
    #expect(record.signal.code == 0)  // SI_USER
    #expect(record.signal.codeName == "SI_USER")
    #expect(record.signal.senderPID == getpid())
    #expect(record.signal.senderUID == getuid())
    #expect(record.signal.faultAddress == 0)
  }

  @Test(
    "a handler installed later by another library is detected; re-installing re-takes it and keeps it chained"
  )
  func replacedHandler() throws {
    let variant = ChildVariant(release: false, backtracer: false)
    let directory = TestDirectory()
    let replaced = try runCrashScenario("handler-replaced", variant: variant, directory: directory)
    #expect(replaced.facts["replaced"] == "\(SIGSEGV)")
    #expect(replaced.signal == SIGSEGV)
    // The other library chains to us: its output, then our record.
    #expect(replaced.lines.contains("foreign handler"))
    let record = try CrashRecord.read(file: try #require(replaced.recordPath))
    #expect(record.status == .complete)

    let again = TestDirectory()
    let reasserted = try runCrashScenario("handler-reasserted", variant: variant, directory: again)
    #expect(reasserted.facts["replaced"] == "\(SIGSEGV)")
    #expect(reasserted.facts["after-reinstall"] == "")
    #expect(reasserted.signal == SIGSEGV)
    // The replacing handler stays chained, called first; it passes the fault on to ours.
    #expect(reasserted.lines.contains("foreign handler"), "\(reasserted.lines)")
    #expect(try CrashRecord.read(file: try #require(reasserted.recordPath)).status == .complete)
  }

  @Test("uninstall restores the previous action and removes the untouched record")
  func uninstalled() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "uninstalled", variant: ChildVariant(release: false, backtracer: false), directory: directory)
    #expect(run.signal == SIGSEGV)
    let recordPath = try #require(run.recordPath)
    #expect(!Syscall.fileExists(recordPath))
    let ring = try RingReader.read(file: try #require(run.ringPath))
    #expect(ring.breadcrumbs.filter { $0.level == .fatal }.isEmpty)
  }

  @Test("a process that exits cleanly leaves a record that says no crash")
  func cleanExit() throws {
    let directory = TestDirectory()
    let child = try Subprocess(
      ChildProcess.testChild, ["clean-exit", directory.path], environment: ["SWIFT_BACKTRACE": "enable=no"],
      standardError: .file(directory.file("stderr.txt")))
    let lines = child.readLines(until: "exiting", seconds: 60)
    child.wait(seconds: 60)
    #expect(child.status == 0)
    let recordLine = try #require(lines.first { $0.hasPrefix("record ") })
    let record = try CrashRecord.read(file: String(recordLine.dropFirst(7)))
    #expect(record.status == .noCrash)
  }

  @Test("the handler does not allocate: an armed LD_PRELOAD malloc guard never fires")
  func noAllocationInHandler() throws {
    let directory = TestDirectory()
    let library = try compileSharedLibrary(mallocGuardSource, named: "malloc_guard", in: directory)
    // dlopen-crash: the handler also finds the library loaded after install, in /proc/self/maps.
    let plugin = try compileSharedLibrary(pluginSource, named: "crumbs_plugin", in: directory, flags: "-O0")
    for scenario in [
      "null-deref", "abort", "stack-overflow-thread", "wait-for-signal", "dlopen-crash", "fatal-message-segv",
      "cxx-exception-guarded", "all-threads",
      // The unwinder's CFI path through libc, and its stack scan (x86_64).
      "clock-abort", "no-unwind-info",
    ] {
      let scenarioDirectory = TestDirectory()
      let run = try runCrashScenario(
        scenario, variant: ChildVariant(release: false, backtracer: false),
        directory: scenarioDirectory,
        environment: [
          "LD_PRELOAD": library, "CRUMBS_TEST_PLUGIN": plugin, "CRUMBS_TEST_CAPTURE_DEADLINE_MS": "10000",
        ]
      ) { child, _ in
        if scenario == "wait-for-signal" { kill(child.pid, SIGSEGV) }
      }
      #expect(run.exitCode != 99, "\(scenario): the handler allocated (guard fired)")
      #expect(run.signal != nil, "\(scenario): \(run.lines)")
      let record = try CrashRecord.read(file: try #require(run.recordPath))
      #expect(record.status == .complete, "\(scenario)")
      // Every other thread captured and walked, allocation-free (on their side too).
      if scenario == "all-threads" {
        #expect((record.threads?.captured ?? 0) >= 100, "\(String(describing: record.threads?.captured))")
      }
      // The Swift runtime's message and the uncaught C++ exception were copied, allocation-free.
      if scenario == "fatal-message-segv" {
        #expect(record.swiftFatalMessage == "Crumbs/Scenario.swift:12: Fatal error: set by the test child")
      }
      if scenario == "cxx-exception-guarded" {
        #expect(run.signal == SIGABRT)
        #expect(
          record.uncaughtException
            == .init(
              mangledType: "N11crumbs_test7FailureE", what: "crash scenario: C++ exception", truncated: false)
        )
      }
      if scenario == "dlopen-crash" {
        let module = record.frames.first.flatMap { record.module(containing: $0) }
        #expect(module?.path.hasSuffix("/libcrumbs_plugin.so") == true, "\(record.modules.map(\.path))")
      }
    }
  }

  @Test(
    "the runtime's message is copied with a bound, never past its field or readable memory",
    arguments: ["long", "unterminated"])
  func boundedMessage(kind: String) throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "fatal-message-segv", variant: ChildVariant(release: false, backtracer: false), directory: directory,
      environment: ["CRUMBS_TEST_MESSAGE": kind])
    #expect(run.signal == SIGSEGV, "\(run.lines)")
    let record = try CrashRecord.read(file: try #require(run.recordPath))
    #expect(record.status == .complete, "the copy did not fault inside the handler")
    #expect(record.swiftFatalMessageTruncated)
    if kind == "long" {
      // 1024 bytes: "x", 511 "é", and the first byte of the next one, which the reader drops.
      #expect(record.swiftFatalMessage == "x" + String(repeating: "é", count: 511))
    } else {
      // 100 bytes, then an unreadable page: the copy stops there.
      #expect(record.swiftFatalMessage == String(repeating: "x", count: 100))
    }
  }

  @Test("the malloc guard itself works: an allocation after arming exits 99")
  func mallocGuardWorks() throws {
    // Keeps the previous test honest: the guard must be able to fire.
    let directory = TestDirectory()
    let library = try compileSharedLibrary(mallocGuardSource, named: "malloc_guard", in: directory)
    let program = directory.file("allocate.c")
    let binary = directory.file("allocate")
    try Syscall.writeFileAtomically(
      program,
      Array(
        """
        #include <dlfcn.h>
        #include <stdlib.h>
        int main(void) {
          void (*arm)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "crumbs_malloc_guard_arm");
          if (arm == NULL) return 3;
          arm();
          volatile void *p = malloc(16);
          return p != NULL ? 0 : 1;
        }
        """.utf8))
    let compile = try Subprocess(
      "/bin/sh", ["-c", "cc -o '\(binary)' '\(program)' -ldl"], environment: [:],
      standardError: .file(directory.file("cc.txt")))
    compile.wait(seconds: 120)
    try #require(compile.status == 0)
    let child = try Subprocess(
      binary, [], environment: ["LD_PRELOAD": library], standardError: .file(directory.file("e")))
    child.wait(seconds: 30)
    #expect(child.exitCode == 99)
  }

  @Test("the record layout is the C one, and the reader rejects damaged bytes without trapping")
  func readerValidation() throws {
    #expect(CrashHandler.recordFileSize == 421_888)  // 412 KiB: version 4, with the waits
    #expect(MemoryLayout<crumbs_crash_record>.offset(of: \.modules) == Int(CRUMBS_CRASH_HEADER_SIZE))
    var bytes = [UInt8](repeating: 0, count: CrashHandler.recordFileSize)
    bytes.withUnsafeMutableBytes { raw in
      let record = raw.baseAddress!.assumingMemoryBound(to: crumbs_crash_record.self)
      crumbs_crash_record_format(
        record, 42, [UInt8](repeating: 7, count: 16), [UInt8](repeating: 1, count: 16), 0)
    }
    let fresh = try bytes.withUnsafeBytes { try CrashRecord.read(image: $0) }
    #expect(fresh.status == .noCrash)
    #expect(fresh.pid == 42)

    func rejected(_ change: (inout [UInt8]) -> Void) -> PersistedFileError.Kind? {
      var copy = bytes
      change(&copy)
      let result = copy.withUnsafeBytes { image in
        Result { () throws(PersistedFileError) in try CrashRecord.read(image: image) }
      }
      guard case .failure(let error) = result else { return nil }
      #expect(error.format == .crashRecord && error.path == nil && !error.reason.contains("\n"))
      return error.kind
    }
    #expect(rejected { $0[0] ^= 1 } == .unrecognized)
    #expect(rejected { $0.removeLast(4096) } == .truncated)
    #expect(rejected { $0.removeLast($0.count - 100) } == .truncated)
    #expect(rejected { $0[8] = UInt8(CRUMBS_CRASH_RECORD_VERSION + 1) } == .unsupported)
    #expect(rejected { $0[16] = 1 } == .corrupt)  // total size
    #expect(rejected { $0[24] = 9 } == .corrupt)  // state
    let frameCount = MemoryLayout<crumbs_crash_record>.offset(of: \.frame_count)!
    #expect(rejected { $0[frameCount + 1] = 1 } == .corrupt)  // 256 + frames
    let moduleCount = MemoryLayout<crumbs_crash_record>.offset(of: \.module_count)!
    #expect(rejected { $0[moduleCount + 1] = 2 } == .corrupt)

    // Version 1 (before the message was appended): still read, with no message.
    var versionOne = Array(bytes.prefix(Int(CRUMBS_CRASH_RECORD_V1_SIZE)))
    versionOne.withUnsafeMutableBytes { raw in
      raw.storeBytes(
        of: 1, toByteOffset: MemoryLayout<crumbs_crash_record>.offset(of: \.version)!, as: UInt32.self)
      raw.storeBytes(
        of: UInt64(CRUMBS_CRASH_RECORD_V1_SIZE),
        toByteOffset: MemoryLayout<crumbs_crash_record>.offset(of: \.total_size)!, as: UInt64.self)
    }
    let old = try versionOne.withUnsafeBytes { try CrashRecord.read(image: $0) }
    #expect(old.version == 1 && old.pid == 42 && old.swiftFatalMessage == nil && old.uncaughtException == nil)
    #expect(
      rejected {
        $0[16] = UInt8(CRUMBS_CRASH_RECORD_V1_SIZE & 0xFF); $0[17] = 0x58
      } == .corrupt)

    // Version 2 (before the thread table was appended): still read, with its message and no
    // thread table.
    var versionTwo = Array(bytes.prefix(Int(CRUMBS_CRASH_RECORD_V2_SIZE)))
    versionTwo.withUnsafeMutableBytes { raw in
      raw.storeBytes(
        of: 2, toByteOffset: MemoryLayout<crumbs_crash_record>.offset(of: \.version)!, as: UInt32.self)
      raw.storeBytes(
        of: UInt64(CRUMBS_CRASH_RECORD_V2_SIZE),
        toByteOffset: MemoryLayout<crumbs_crash_record>.offset(of: \.total_size)!, as: UInt64.self)
      let message = MemoryLayout<crumbs_crash_record>.offset(of: \.message)!
      let text = Array("set by a version 2 writer".utf8)
      raw.storeBytes(of: UInt32(text.count), toByteOffset: message, as: UInt32.self)
      for (index, byte) in text.enumerated() { raw[message + 32 + index] = byte }
    }
    let two = try versionTwo.withUnsafeBytes { try CrashRecord.read(image: $0) }
    #expect(two.version == 2 && two.pid == 42 && two.threads == nil)
    #expect(two.swiftFatalMessage == "set by a version 2 writer")
    // A version 2 file that claims to be version 3 is too short for it.
    versionTwo.withUnsafeMutableBytes {
      $0.storeBytes(
        of: 3, toByteOffset: MemoryLayout<crumbs_crash_record>.offset(of: \.version)!, as: UInt32.self)
    }
    let claimed = versionTwo.withUnsafeBytes { image in
      Result { () throws(PersistedFileError) in try CrashRecord.read(image: image) }
    }
    if case .failure(let error) = claimed {
      #expect(error.kind == .corrupt)
    } else {
      Issue.record("a version 2 file claiming version 3 was read")
    }

    // The thread table's counts are checked against its capacities, each entry's too.
    let tableCount =
      MemoryLayout<crumbs_crash_record>.offset(of: \.threads)!
      + MemoryLayout<crumbs_crash_thread_table>.offset(of: \.thread_count)!
    #expect(rejected { $0[tableCount + 1] = 2 } == .corrupt)  // 512 threads
    let firstEntry =
      MemoryLayout<crumbs_crash_record>.offset(of: \.threads)!
      + MemoryLayout<crumbs_crash_thread_table>.offset(of: \.threads)!
    let frames = firstEntry + MemoryLayout<crumbs_crash_thread>.offset(of: \.frame_count)!
    let registers = firstEntry + MemoryLayout<crumbs_crash_thread>.offset(of: \.register_count)!
    #expect(
      rejected {
        $0[tableCount] = 1; $0[frames] = 65
      } == .corrupt)
    #expect(
      rejected {
        $0[tableCount] = 1; $0[registers] = 41
      } == .corrupt)
    #expect(
      rejected {
        $0[tableCount] = 1; $0[frames] = 64
      } == nil)  // at capacity: fine

    // So are the wait table's (version 4): its entry count, lock words and each entry's lengths.
    let waits = MemoryLayout<crumbs_crash_record>.offset(of: \.waits)!
    let waitCount = waits + MemoryLayout<crumbs_crash_wait_table>.offset(of: \.count)!
    let lockWords = waits + MemoryLayout<crumbs_crash_wait_table>.offset(of: \.candidate_count)!
    let firstWait = waits + MemoryLayout<crumbs_crash_wait_table>.offset(of: \.waits)!
    let textLength = firstWait + MemoryLayout<crumbs_crash_thread_wait>.offset(of: \.text_length)!
    let wordsRead = firstWait + MemoryLayout<crumbs_crash_thread_wait>.offset(of: \.words_read)!
    #expect(rejected { $0[waitCount + 1] = 2 } == .corrupt)  // 512 waits
    #expect(rejected { $0[lockWords] = 9 } == .corrupt)
    #expect(
      rejected {
        $0[waitCount] = 1; $0[textLength] = 209
      } == .corrupt)
    #expect(
      rejected {
        $0[waitCount] = 1; $0[wordsRead] = 17
      } == .corrupt)
    #expect(
      rejected {
        $0[waitCount] = 1; $0[textLength] = 208; $0[wordsRead] = 16
      } == nil)  // at capacity: fine

    // From a file: the error names it.
    let directory = TestDirectory()
    let path = directory.file("cut.crash")
    try Syscall.writeFileAtomically(path, bytes.prefix(100))
    #expect(
      performing: { try CrashRecord.read(file: path) },
      throws: {
        ($0 as? PersistedFileError).map {
          $0.kind == .truncated && $0.path == path && $0.description == path + ": " + $0.reason
        } ?? false
      })
  }
}

/// An LD_PRELOAD library: malloc & co. pass through to libc until `crumbs_malloc_guard_arm` is
/// called; after that, any call writes a line to stderr and _exit(99)s.
let mallocGuardSource = """
  #define _GNU_SOURCE
  #include <dlfcn.h>
  #include <stddef.h>
  #include <unistd.h>
  static volatile int armed;
  extern void *__libc_malloc(size_t);
  extern void *__libc_calloc(size_t, size_t);
  extern void *__libc_realloc(void *, size_t);
  extern void __libc_free(void *);
  extern void *__libc_memalign(size_t, size_t);
  static void fire(const char *what) {
    static const char prefix[] = "malloc guard: ";
    (void)!write(2, prefix, sizeof prefix - 1);
    size_t length = 0;
    while (what[length]) length++;
    (void)!write(2, what, length);
    (void)!write(2, "\\n", 1);
    _exit(99);
  }
  void crumbs_malloc_guard_arm(void) { armed = 1; }
  void *malloc(size_t size) { if (armed) fire("malloc"); return __libc_malloc(size); }
  void *calloc(size_t count, size_t size) { if (armed) fire("calloc"); return __libc_calloc(count, size); }
  void *realloc(void *pointer, size_t size) { if (armed) fire("realloc"); return __libc_realloc(pointer, size); }
  void free(void *pointer) { if (armed) fire("free"); __libc_free(pointer); }
  void *memalign(size_t alignment, size_t size) { if (armed) fire("memalign"); return __libc_memalign(alignment, size); }
  int posix_memalign(void **out, size_t alignment, size_t size) {
    if (armed) fire("posix_memalign");
    *out = __libc_memalign(alignment, size);
    return *out ? 0 : 12;
  }
  void *aligned_alloc(size_t alignment, size_t size) { if (armed) fire("aligned_alloc"); return __libc_memalign(alignment, size); }
  """
