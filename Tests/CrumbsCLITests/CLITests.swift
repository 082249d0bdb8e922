// CLITests.swift — the built `crumbs` executable run as a real process: `ring dump`, `ring tail`,
// `ring stress`, with stdout and stderr captured through pipes.

import CrumbsPlatform
import CrumbsSignalPath
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct CLITests {
  // MARK: dump

  @Test func dumpJSONLinesCarryEveryBreadcrumbWithItsKeysInOrder() throws {
    let directory = TestDirectory()
    let path = directory.file("app.ring")
    var options = RingOptions()
    options.slotSize = 128
    options.slotCount = 256
    options.appName = "cli-test"
    let before = Date()
    let ring = try BreadcrumbRing.create(at: path, options: options)
    ring.append("launch", level: .info, type: .system)
    ring.append("GET \"/x\"\n", level: .warning, type: .http, attributes: ["status": "500", "url": "/x"])
    ring.append(String(repeating: "é", count: 200), level: .error, type: .log)
    // A ring that died within a millisecond of its creation is calibrated by its reader with a
    // clock reading taken then (RingClock), so two readers at different moments may differ by a
    // microsecond. This one keeps its own calibration, as a ring a second old does: its clock
    // anchor refreshed once the monotonic clock has moved 2 ms past its creation.
    let created = SystemClock.monotonicNanoseconds()
    while SystemClock.monotonicNanoseconds() - created < 2_000_000 {}
    crumbs_ring_refresh_anchor_now(ring.handle)
    ring.close(clean: false)  // as if the process had died: state stays running
    let after = Date()
    let expected = try RingReader.read(file: path)

    let result = try CLIProcess.run(["ring", "dump", path, "--json"])
    #expect(result.status == 0)
    let lines = result.stdoutLines
    try #require(lines.count == 3)
    for (line, breadcrumb) in zip(lines, expected.breadcrumbs) {
      let object = try #require(
        try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
        "not a JSON object: \(line)")
      #expect(object["seq"] as? Int == Int(breadcrumb.threadSequence))
      #expect((object["id"] as? NSNumber)?.uint64Value == breadcrumb.id)
      #expect(object["thread"] as? Int == Int(breadcrumb.threadID))
      #expect(object["message"] as? String == breadcrumb.message)
      #expect(object["level"] as? String == breadcrumb.level.name)
      #expect(object["type"] as? String == breadcrumb.type.name)
      let attributes = try #require(object["attributes"] as? [String: String])
      #expect(
        attributes == Dictionary(uniqueKeysWithValues: breadcrumb.attributes.map { ($0.key, $0.value) }))
      #expect((object["truncated"] as? Bool ?? false) == breadcrumb.truncated)
      #expect((object["truncated"] != nil) == breadcrumb.truncated)
      #expect((object["truncated_parts"] as? [String] ?? []) == breadcrumb.truncatedParts)
      #expect((object["truncated_parts"] != nil) == breadcrumb.truncated)
      #expect(object["signal_handler"] == nil)
      #expect(object.count == (breadcrumb.truncated ? 10 : 8), "\(line)")
      let timestamp = try #require(object["timestamp"] as? String)
      let date = try #require(Self.parseISO8601(timestamp), "not ISO 8601: \(timestamp)")
      #expect(date >= before.addingTimeInterval(-2) && date <= after.addingTimeInterval(2), "\(timestamp)")
      #expect(
        timestamp.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$"#, options: .regularExpression) != nil,
        "microseconds: \(timestamp)")
      // Exactly the line the trail attachment holds for it: one schema (docs/formats.md "Breadcrumb
      // trail schema"), keys in its order.
      #expect(line == breadcrumb.jsonLine())
      let keys = [
        "\"timestamp\":", "\"id\":", "\"seq\":", "\"thread\":", "\"level\":", "\"type\":",
        "\"message\":", "\"attributes\":",
      ]
      let offsets = keys.map { line.range(of: $0)?.lowerBound }
      #expect(offsets.allSatisfy { $0 != nil }, "\(line)")
      #expect(offsets.compactMap { $0 } == offsets.compactMap { $0 }.sorted(), "\(line)")
      #expect(line.hasPrefix("{\"timestamp\":"))
    }
    let trail = String(decoding: TrailAttachment.jsonLines(expected.breadcrumbs), as: UTF8.self)
    #expect(trail == lines.map { $0 + "\n" }.joined())
    #expect(
      (try JSONSerialization.jsonObject(with: Data(lines[1].utf8)) as? [String: Any])?["message"] as? String
        == "GET \"/x\"\n")
    #expect(lines[2].contains("\"truncated\":true,\"truncated_parts\":[\"message\"]"))
    #expect(expected.breadcrumbs[2].messageTruncated)

    let summary = result.stderrLines
    try #require(summary.count == 1, "\(summary)")
    #expect(summary[0].contains("3 valid, 0 torn, 0 overwritten"))
    #expect(summary[0].contains("pid \(getpid())"))
    #expect(summary[0].contains("session \(ring.sessionID)"))
    #expect(summary[0].contains("state running"))
  }

  @Test func everythingTheDemoWritesIsPrivateWhateverTheUmask() throws {
    // Issue 11 item 16: `crumbs demo --dir X` under umask 000 created X 0777.
    let directory = TestDirectory()
    let target = directory.file("made/by/demo")
    let output = try Subprocess.run(
      "/bin/sh", ["-c", #"umask 000 && exec "$0" demo --dir "$1""#, CLIProcess.executable, target],
      timeoutMilliseconds: 300_000)
    #expect(output.exitStatus == 0, "\(String(decoding: output.standardError, as: UTF8.self))")
    var directories = [directory.file("made"), directory.file("made/by")]
    var files: [String] = []
    var queue = [target]
    while let folder = queue.popLast() {
      directories.append(folder)
      for name in try Syscall.directoryEntries(folder) {
        let path = folder + "/" + name
        if Syscall.isDirectory(path) { queue.append(path) } else { files.append(path) }
      }
    }
    #expect(files.count >= 3, "\(files)")
    for path in directories { #expect(fileMode(of: path) == 0o700, "\(path)") }
    for path in files { #expect(fileMode(of: path) & 0o077 == 0, "\(path)") }
  }

  /// A stripped copy of the test child (`app` in `directory`) run through `scenario` in
  /// `crumbs`, waited for.
  func crashStrippedChild(
    _ scenario: String, in directory: TestDirectory, environment: [String: String] = [:]
  ) throws -> (app: String, crumbs: String, child: Subprocess) {
    let app = directory.file("app")
    let stripped = try Subprocess.run(
      "/usr/bin/strip", ["-s", ChildProcess.testChild, "-o", app], timeoutMilliseconds: 120_000)
    #expect(stripped.exitStatus == 0)
    let crumbs = directory.file("crumbs")
    let child = try Subprocess(
      app, [scenario, crumbs], environment: environment.merging(["SWIFT_BACKTRACE": "enable=no"]) { $1 },
      standardOutput: .discard)
    child.wait(seconds: 120)
    return (app, crumbs, child)
  }

  @Test func symbolicateNamesAStrippedBuildsFramesFromSymbolFilesFoundByBuildID() throws {
    // Issue 12 item 6: a stripped release binary leaves only module, offset and build ID.
    let directory = TestDirectory()
    let (app, crumbs, child) = try crashStrippedChild("null-deref", in: directory)
    #expect(child.terminatingSignal == SIGSEGV)
    let store = try ReportStore(directory: crumbs)
    _ = PostMortemProcessor(directory: try RingDirectory(path: crumbs), store: store).run()
    let original = try #require(store.list(.pending).reports.first)
    let appFrames = original.report.frames.filter { $0.module == app }
    #expect(!appFrames.isEmpty)
    #expect(!appFrames.contains { $0.function?.contains("crumbs_test_null_deref") == true })

    // Two ways to hand over the symbols: a folder holding the unstripped binary (any name), and
    // a debug root with the .build-id layout holding an `objcopy --only-keep-debug` file.
    let folder = directory.file("symbols")
    try Syscall.makeDirectory(folder)
    #expect(symlink(ChildProcess.testChild, folder + "/unstripped-app") == 0)
    let buildID = try #require(original.report.modules.first { $0.path == app }?.buildIDHex)
    let tree = directory.file("debug-root/.build-id/" + buildID.prefix(2))
    try Syscall.makeDirectories(tree)
    let debugFile = tree + "/" + buildID.dropFirst(2) + ".debug"
    let kept = try Subprocess.run(
      "/usr/bin/objcopy", ["--only-keep-debug", ChildProcess.testChild, debugFile],
      timeoutMilliseconds: 120_000)
    #expect(kept.exitStatus == 0)

    // The next launch does the same when the app's configuration names symbol directories.
    let second = try Subprocess(
      app, ["null-deref", crumbs], environment: ["SWIFT_BACKTRACE": "enable=no"], standardOutput: .discard)
    second.wait(seconds: 120)
    var processor = PostMortemProcessor(directory: try RingDirectory(path: crumbs), store: store)
    processor.symbolicatorOptions.symbolDirectories = [folder]
    let named = try #require(processor.run().lastSession?.report)
    #expect(
      named.report.frames.contains {
        $0.module == app && $0.function?.contains("crumbs_test_null_deref") == true
      })

    for symbols in [folder, directory.file("debug-root")] {
      try store.replace(original, with: original.report)
      let result = try CLIProcess.run(
        ["symbolicate", String(original.report.id.prefix(8)), "--symbols", symbols, "--dir", crumbs],
        timeoutSeconds: 120)
      #expect(result.status == 0, "\(result.stderr)")
      let report = try store.load(id: original.report.id).report
      let top = try #require(report.frames.first { $0.module == app })
      #expect(top.function?.contains("crumbs_test_null_deref") == true, "\(symbols): \(top)")
      #expect(top.file?.hasSuffix("crumbs_test_child.c") == true, "\(symbols): \(top)")
      #expect(top.line != nil)
      #expect(report.exceptionStacktrace.contains("crumbs_test_null_deref"))
      #expect(result.stdout.contains("crumbs_test_null_deref"))
    }
  }

  @Test func symbolicateNamesEveryThreadsFramesToo() throws {
    // Issue 12 item 2 with item 6: the other threads of a stripped build's crash are named too.
    let directory = TestDirectory()
    let (_, crumbs, child) = try crashStrippedChild(
      "all-threads", in: directory,
      environment: [
        "CRUMBS_TEST_THREADS": "3", "CRUMBS_TEST_NO_MASKED": "1", "CRUMBS_TEST_CAPTURE_DEADLINE_MS": "10000",
      ])
    #expect(child.terminatingSignal == SIGSEGV)
    let store = try ReportStore(directory: crumbs)
    _ = PostMortemProcessor(directory: try RingDirectory(path: crumbs), store: store).run()
    let original = try #require(store.list(.pending).reports.first)
    let before = try #require(original.report.threads)
    #expect(before.count == 4)
    #expect(
      !before.contains { $0.frames.contains { $0.function?.hasPrefix("crumbs_test_blocked_") == true } })

    let folder = directory.file("symbols")
    try Syscall.makeDirectory(folder)
    #expect(symlink(ChildProcess.testChild, folder + "/unstripped-app") == 0)
    let result = try CLIProcess.run(
      ["symbolicate", String(original.report.id.prefix(8)), "--symbols", folder, "--dir", crumbs],
      timeoutSeconds: 120)
    #expect(result.status == 0, "\(result.stderr)")
    let report = try store.load(id: original.report.id).report
    let threads = try #require(report.threads)
    #expect(threads.first?.crashed == true && threads.first?.frames == report.frames)
    for index in 0..<3 {
      let thread = try #require(threads.first { $0.name == "blocker-0\(index)" })
      #expect(
        thread.frames.contains { $0.function == "crumbs_test_blocked_0\(index)" },
        "\(thread.frames.map { $0.function ?? $0.address })")
    }
  }

  @Test func dumpHumanLinesAndLastN() throws {
    let directory = TestDirectory()
    let path = directory.file("h.ring")
    let ring = try BreadcrumbRing.create(at: path)
    for number in 0..<5 {
      ring.append("step \(number)", level: .debug, type: .navigation, attributes: ["n": "\(number)"])
    }
    ring.close(clean: true)

    let result = try CLIProcess.run(["ring", "dump", path, "--last", "2"])
    #expect(result.status == 0)
    #expect(result.stdoutLines.count == 2)
    #expect(result.stdoutLines.first?.contains("DEBUG") == true)
    #expect(result.stdoutLines.first?.contains("step 3  {n=3}") == true)
    #expect(result.stdoutLines.last?.contains("step 4  {n=4}") == true)
    #expect(
      result.stdoutLines.allSatisfy {
        $0.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "#, options: .regularExpression) != nil
      })
    #expect(result.stderrLines.first?.contains("state clean") == true)
  }

  @Test func dumpOfAForeignFileExitsNonZeroWithOneLine() throws {
    let directory = TestDirectory()
    let foreign = directory.file("notes.txt")
    try String(repeating: "not a ring at all\n", count: 500).write(
      toFile: foreign, atomically: false, encoding: .utf8)
    let result = try CLIProcess.run(["ring", "dump", foreign])
    #expect(result.status != 0)
    #expect(result.stdout.isEmpty)
    #expect(result.stderrLines.count == 1)
    #expect(result.stderrLines.first?.contains("not a Crumbs ring") == true)

    // A ring cut short: also one line, and it says so.
    let ringPath = directory.file("cut.ring")
    let ring = try BreadcrumbRing.create(at: ringPath)
    ring.append("x")
    ring.close()
    #expect(truncate(ringPath, 5000) == 0)
    let cut = try CLIProcess.run(["ring", "dump", ringPath, "--json"])
    #expect(cut.status != 0)
    #expect(cut.stdout.isEmpty)
    #expect(cut.stderrLines.count == 1)
    #expect(cut.stderrLines.first?.contains("truncated") == true)

    let missing = try CLIProcess.run(["ring", "dump", directory.file("absent.ring")])
    #expect(missing.status != 0)
    #expect(missing.stderrLines.count == 1)
  }

  // MARK: stress

  @Test func stressLeavesARingWhosePerThreadCountersStrictlyIncrease() throws {
    let directory = TestDirectory()
    let path = directory.file("stress.ring")
    let stress = try CLIProcess.run([
      "ring", "stress", "--file", path, "--threads", "3", "--seconds", "0.3", "--slots", "1024",
    ])
    #expect(stress.status == 0, "\(stress.stderr)")
    let totalLine = try #require(stress.stdoutLines.first)
    let total = try #require(Int(totalLine.split(separator: " ")[1]), "\(totalLine)")
    #expect(stress.stdout.contains("appends/s"))
    #expect(stress.stdout.contains("ns/append"))

    let dump = try CLIProcess.run(["ring", "dump", path, "--json"])
    #expect(dump.status == 0)
    #expect(dump.stderrLines.first?.contains("state clean") == true)
    // Torn slots are possible (a writer preempted mid-slot while its lane laps it) and are
    // never printed; what is printed must be in order.
    let records = try dump.stdoutLines.map { line in
      try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }
    #expect(!records.isEmpty)
    #expect(records.count <= total)
    var lastCounter: [String: Int] = [:]
    var lastSequence: [Int: Int] = [:]
    var threadOfWriter: [String: Int] = [:]
    for record in records {
      let attributes = try #require(record["attributes"] as? [String: String])
      let thread = try #require(attributes["thread"])
      let counter = try #require(attributes["n"].flatMap { Int($0) })
      #expect(["0", "1", "2"].contains(thread))
      #expect(record["message"] as? String == "stress t=\(thread) n=\(counter)")
      if let previous = lastCounter[thread] {
        #expect(counter > previous, "t=\(thread): \(counter) after \(previous)")
      }
      lastCounter[thread] = counter
      let tid = try #require(record["thread"] as? Int)
      let sequence = try #require(record["seq"] as? Int)
      if let previous = lastSequence[tid] { #expect(sequence > previous) }
      lastSequence[tid] = sequence
      if let known = threadOfWriter[thread] { #expect(known == tid) }
      threadOfWriter[thread] = tid
    }
  }

  // MARK: tail

  @Test func tailWithoutFollowPrintsTheNewestTen() throws {
    let directory = TestDirectory()
    let path = directory.file("t.ring")
    let ring = try BreadcrumbRing.create(at: path)
    for number in 0..<25 { ring.append("line \(number)") }
    ring.close(clean: false)
    let result = try CLIProcess.run(["ring", "tail", path, "--json"])
    #expect(result.status == 0)
    let messages = try result.stdoutLines.map { line in
      try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["message"]
        as? String
    }
    #expect(messages == (15..<25).map { "line \($0)" })
  }

  @Test func tailFollowPrintsNewBreadcrumbsOnceAndStopsWhenTheRingIsClosedClean() throws {
    let directory = TestDirectory()
    let path = directory.file("live.ring")
    let ring = try BreadcrumbRing.create(at: path)
    for number in 1...3 { ring.append("before-\(number)") }

    let tail = try CLIProcess.start([
      "ring", "tail", "-f", "-n", "2", "--json", "--interval-milliseconds", "20", path,
    ])
    var seen: [String] = []
    func nextMessage() throws -> String? {
      guard let line = tail.readLine(seconds: 20) else { return nil }
      let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
      return object["message"] as? String
    }
    for _ in 0..<2 { if let message = try nextMessage() { seen.append(message) } }
    #expect(seen == ["before-2", "before-3"])

    ring.append("after-1", level: .warning)
    if let message = try nextMessage() { seen.append(message) }
    ring.append("after-2")
    ring.append("after-3", attributes: ["k": "v"])
    for _ in 0..<2 { if let message = try nextMessage() { seen.append(message) } }
    #expect(seen == ["before-2", "before-3", "after-1", "after-2", "after-3"])

    ring.close(clean: true)
    tail.wait(seconds: 20)
    #expect(tail.shellStatus == 0)
    #expect(tail.readLine(seconds: 5) == nil, "nothing printed twice")
    #expect(tail.readStderr().contains("ring is clean"))
  }

  @Test func tailFollowStopsWhenTheFileDisappears() throws {
    let directory = TestDirectory()
    let path = directory.file("gone.ring")
    let ring = try BreadcrumbRing.create(at: path)
    ring.append("only")
    let tail = try CLIProcess.start(["ring", "tail", "-f", "--interval-milliseconds", "20", path])
    #expect(tail.readLine(seconds: 20)?.contains("only") == true)
    #expect(unlink(path) == 0)
    tail.wait(seconds: 20)
    #expect(tail.shellStatus == 0)
    #expect(tail.readStderr().contains("gone"))
    ring.close(clean: true)
  }

  static func parseISO8601(_ text: String) -> Date? {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    if let date = formatter.date(from: text) { return date }
    // Some Foundations read only milliseconds: compare at that precision.
    guard let dot = text.firstIndex(of: "."), text.count > text.distance(from: text.startIndex, to: dot) + 5
    else {
      return nil
    }
    let milliseconds = text[...text.index(dot, offsetBy: 3)] + "Z"
    return formatter.date(from: String(milliseconds))
  }
}

@Suite struct CLITamperedStoreTests {
  @Test func aFIFONamedReportJSONIsQuarantinedNotWaitedOn() throws {
    // Nothing will ever write into the FIFO: a reader that opens it blocking waits for ever.
    let directory = TestDirectory()
    let store = try ReportStore(directory: directory.path)
    let folder = store.folder(.pending) + "/fifo-report"
    try Syscall.makeDirectory(folder)
    #expect(mkfifo(folder + "/report.json", 0o600) == 0)

    let result = try CLIProcess.run(
      ["reports", "list", "--dir", directory.path, "--json"], timeoutSeconds: 120)
    #expect(result.status == 0, "\(result.stderr)")
    #expect(!Syscall.fileExists(folder), "the folder is quarantined")
    let quarantined = (try? Syscall.directoryEntries(store.path + "/quarantine")) ?? []
    #expect(quarantined.contains("fifo-report"), "\(quarantined)")
    let reason = try Syscall.readFile(store.path + "/quarantine/fifo-report.reason")
    #expect(String(decoding: reason, as: UTF8.self).contains("not a regular file"))
  }

}
