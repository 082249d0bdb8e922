// ConsumerPackageTests.swift — Crumbs used the way users use it: from another package, through
// its public products only. The consumer's own Package.swift names the product; nothing here
// reaches into the package's internals except to read back what the consumer recorded.

import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct ConsumerPackageTests {
  @Test func aRecorderOnlyProgramLinksNoFoundationCurlOrICUAndRecords() throws {
    let directory = TestDirectory()
    let executable = try ConsumerPackage.build("RecorderConsumer", in: directory)

    let ldd = try Subprocess.run("/usr/bin/ldd", [executable], timeoutMilliseconds: 60_000)
    let libraries = String(decoding: ldd.standardOutput, as: UTF8.self).split(separator: "\n")
    #expect(ldd.exitStatus == 0)
    #expect(libraries.contains { $0.contains("libswiftCore.so") })  // ldd really listed it
    for forbidden in ["libFoundation", "libcurl", "libicu", "libxml2", "libgnutls"] {
      let found = libraries.filter { $0.contains(forbidden) }
      #expect(found.isEmpty, "the recorder consumer links \(found)")
    }
    print("recorder consumer links \(libraries.count) shared libraries")

    let crumbsDirectory = directory.file("crumbs")
    let run = try Subprocess.run(executable, [crumbsDirectory], timeoutMilliseconds: 60_000)
    #expect(run.exitStatus == 0, "\(String(decoding: run.standardError, as: UTF8.self))")
    let ringPath = String(decoding: run.standardOutput, as: UTF8.self).split(separator: "\n").first ?? ""
    let contents = try RingReader.read(file: String(ringPath))
    // Issue 22: the consumer returns from main without closing its ring; the exit hook that
    // `install()` armed ends the session clean, with the exit status.
    #expect(contents.header.state == .clean)
    #expect(contents.header.appName == "recorder-consumer")
    #expect(
      contents.breadcrumbs.map(\.message) == ["GET /items → 200", "consumer done", "process exiting"])
    #expect(contents.breadcrumbs.last?.attributes.first { $0.key == "exit.status" }?.value == "0")
    #expect(contents.breadcrumbs.first?.attributes.first?.value == "200")
  }

  /// Issue 21, case 1: a program linked statically (`-static-executable`, glibc's libc.a) has no
  /// RTLD_NEXT, and Crumbs' pthread_create used to fail every thread (EAGAIN; Dispatch then hung
  /// its caller). Its threads must all run, on alternate stacks (the start trampoline works
  /// there too), and a stack overflow on a Dispatch worker must still be recorded.
  @Test func aStaticallyLinkedProgramStartsThreadsAndRecordsItsCrash() throws {
    let directory = TestDirectory()
    let executable = try ConsumerPackage.build(
      "StaticConsumer", in: directory, swiftFlags: ["-static-executable"])

    // Really static: no program interpreter, no dynamic section.
    let headers = try Subprocess.run("/usr/bin/readelf", ["-l", executable], timeoutMilliseconds: 60_000)
    let programHeaders = String(decoding: headers.standardOutput, as: UTF8.self)
    #expect(headers.exitStatus == 0 && programHeaders.contains("LOAD"))
    #expect(!programHeaders.contains("INTERP") && !programHeaders.contains("DYNAMIC"))

    let expectedThreads = [
      "covers-new-threads true", "pthread_create 0", "pthread ran true alternate-stack true",
      "dispatch ran true alternate-stack true", "task ran true alternate-stack true",
    ]
    let run = try Subprocess.run(
      executable, [directory.file("crumbs"), "threads"], timeoutMilliseconds: 180_000)
    let lines = String(decoding: run.standardOutput, as: UTF8.self).split(separator: "\n").map(String.init)
    print("static consumer: \(lines)")
    #expect(run.exitStatus == 0, "\(String(decoding: run.standardError, as: UTF8.self))")
    #expect(Array(lines.dropFirst()) == expectedThreads)

    let crash = try Subprocess.run(
      executable, [directory.file("crumbs"), "crash"], timeoutMilliseconds: 180_000)
    let crashLines = String(decoding: crash.standardOutput, as: UTF8.self).split(separator: "\n").map(
      String.init)
    #expect(
      crash.terminatingSignal == SIGSEGV,
      "\(crashLines) \(String(decoding: crash.standardError, as: UTF8.self))")
    #expect(Array(crashLines.dropFirst()) == expectedThreads + ["crashing"])
    let ringPath = String(try #require(crashLines.first).dropFirst("ring ".count))
    let record = try CrashRecord.read(file: CrashHandler.recordPath(forRing: ringPath))
    #expect(record.status == .complete)
    #expect(record.signal.number == SIGSEGV)
    #expect(record.ranOnAlternateStack)
    #expect(record.frames.count > 8)
    #expect(try RingReader.read(file: ringPath).header.state == .crashed)
  }
}
