// CollectHostileInputTests.swift — `crumbs collect` over a Crumbs directory whose app is hostile
// (issue 35): a session file naming files the collector could read with its own privileges, a
// FIFO named like a ring, a ring declaring far more slots than any client makes, and a
// temporary file a killed writer left. The real CLI, real crashing children, real FIFOs and
// symbolic links, a real sparse file.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsRecorder
import CrumbsReports
import CrumbsTestSupport
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct CollectHostileInputTests {
  /// A child that starts a client in `directory` and crashes; returns its session id.
  func crashChild(_ directory: String) throws -> String {
    let child = try ChildProcess(
      ChildProcess.testChild, ["client-crash", directory], environment: ["SWIFT_BACKTRACE": "enable=no"])
    let session = try #require(child.value(after: "session "))
    let status = child.wait(seconds: 60)
    #expect(status & 0x7f == SIGSEGV, "the child died by SIGSEGV (wait status \(status))")
    return session
  }

  func files(_ folder: String) -> [String] { (try? Syscall.directoryEntries(folder)) ?? [] }

  // MARK: - Case 1: attachments named by a session file the collector did not write

  /// The app's session file names the collector's own environment, a file outside the Crumbs
  /// directory, and a link inside it to that file: the collector attaches none of them (their
  /// reasons in the report's damage) and still attaches the app's own file inside the directory.
  @Test func theCollectorAttachesOnlyTheSessionsOwnFilesInsideTheCrumbsDirectory() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let session = try crashChild(crumbs)
    let secret = "tok-35-\(UInt32.random(in: 0...UInt32.max))"
    let outside = directory.file("outside-secret.txt")
    try Syscall.writeFileAtomically(outside, Array("outside \(secret)\n".utf8), durable: false)
    let inside = crumbs + "/app-log.txt"
    try Syscall.writeFileAtomically(inside, Array("the app's own log\n".utf8), durable: false)
    let link = crumbs + "/looks-inside.txt"
    #expect(symlink(outside, link) == 0)
    let sessionFile = crumbs + "/rings/\(session).session.json"
    let attachments = ["/proc/self/environ", outside, link, inside]
    let json = try JSONSerialization.data(withJSONObject: [
      "format": 1, "sessionID": session, "attachments": attachments, "attributes": [String: String](),
      "replacedCrashSignals": [String](), "omitted": 0,
    ])
    try Syscall.writeFileAtomically(sessionFile, Array(json), durable: false)

    let result = try CLIProcess.run(
      ["collect", "--dir", crumbs, "--otlp", "http://127.0.0.1:9"],
      environment: ["CRUMBS_BACKTRACE_TOKEN": secret])
    let stored = ReportStore.listing(crumbs, .pending)
    try #require(stored.count == 1, "stdout: \(result.stdout)\nstderr: \(result.stderr)")
    let report = stored[0]
    for name in files(report.path) {
      let bytes = try Syscall.readFile(report.path + "/" + name)
      #expect(
        !String(decoding: bytes, as: UTF8.self).contains(secret),
        "\(name) in the stored report holds the collector's token or the outside file")
    }
    let attached = Dictionary(uniqueKeysWithValues: report.report.attachments.map { ($0.name, $0) })
    #expect(attached["attachment-app-log.txt"]?.omittedReason == nil)
    #expect(Syscall.fileExists(report.path + "/attachment-app-log.txt"))
    for name in ["attachment-environ", "attachment-outside-secret.txt", "attachment-looks-inside.txt"] {
      #expect(attached[name]?.omittedReason != nil, "\(name) was attached")
      #expect(!Syscall.fileExists(report.path + "/" + name))
    }
    let damage = report.report.damage.joined(separator: "\n")
    #expect(damage.contains("attachment-environ left out"), "damage: \(damage)")
    #expect(damage.contains("outside the Crumbs directory"), "damage: \(damage)")
    #expect(damage.contains("symbolic link"), "damage: \(damage)")
  }

  // MARK: - Case 4: a FIFO named like a ring

  /// A FIFO named `x.ring` appears in one watched directory's rings/ and is closed after a
  /// write open (what a ring writer's exit looks like to inotify): the watching collector neither
  /// blocks on it nor stops reporting — a crash in the other watched directory is reported (no
  /// client ever starts in the first, which would open the FIFO for writing and free a blocked
  /// reader) — quarantines it with its reason, and ends on SIGTERM.
  @Test func aFIFONamedLikeARingNeitherWedgesTheWatcherNorHidesLaterCrashes() throws {
    let directory = TestDirectory()
    let hostile = directory.file("hostile")
    let crumbs = directory.file("crumbs")
    _ = try RingDirectory(path: hostile)
    _ = try RingDirectory(path: crumbs)
    let arrivals = try ServerArrivals()
    defer { arrivals.server.stop() }
    let collector = try CLIProcess.start([
      "collect", "--watch", "--dir", hostile, "--dir", crumbs, "--otlp", arrivals.server.baseURL,
    ])
    defer { if collector.exitCode == nil { kill(collector.pid, SIGKILL) } }
    try #require(collector.value(after: "watching ") != nil, "the collector set up its watches")
    // A first crash reported: the collector's first passes are over and it is in its loop (a
    // pass would claim the FIFO before any check of it).
    let first = try crashChild(crumbs)
    #expect(try arrivals.waitForReport(session: first, seconds: 30) != nil)

    let fifo = hostile + "/rings/x.ring"
    #expect(mkfifo(fifo, 0o600) == 0)
    let writer = open(fifo, O_RDWR | O_NONBLOCK)
    #expect(writer >= 0)
    close(writer)

    let session = try crashChild(crumbs)
    let report = try arrivals.waitForReport(session: session, seconds: 30)
    #expect(report != nil, "the crash in the other directory, after the FIFO, was reported")
    let quarantined = files(hostile + "/quarantine")
    #expect(quarantined.contains("x.ring.reason"), "\(quarantined)")
    #expect(!Syscall.fileExists(fifo))

    kill(collector.pid, SIGTERM)
    #expect(collector.wait(seconds: 30) == 0, "the collector ended on SIGTERM")
  }

  // MARK: - Case 7: bounded work and leftovers

  /// A ring file whose header declares `general + important` slots of 64 bytes, sparse: made as
  /// a real ring of 64 slots, closed, its header and lane table rewritten and the file extended
  /// (the offsets are the persisted ones of crumbs_ring_layout.h, pinned by its static asserts).
  static func craftSparseRing(in crumbs: String, general: UInt32, important: UInt32) throws -> String {
    let rings = try RingDirectory(path: crumbs)
    var options = RingOptions()
    options.slotSize = 64
    options.slotCount = 64
    let ring = try rings.createRing(options: options)
    let path = ring.path
    ring.close()
    let fd = try Syscall.open(path, O_RDWR)
    defer { Syscall.close(fd) }
    func put<T: FixedWidthInteger>(_ value: T, at offset: Int) throws {
      try withUnsafeBytes(of: value.littleEndian) { bytes in
        _ = try Syscall.retrying("pwrite") { pwrite(fd, bytes.baseAddress, bytes.count, off_t(offset)) }
      }
    }
    let slots = UInt64(general) + UInt64(important)
    let slotsOffset: UInt64 = 8192  // crumbs_ring_slots_offset(2)
    try put(UInt32(64), at: 16)  // slot_size
    try put(UInt32(slots), at: 20)  // slot_count
    try put(UInt32(2), at: 24)  // lane_count
    try put(UInt32(1), at: 28)  // general_lane_count
    try put(slotsOffset, at: 32)  // slots_offset
    try put(slotsOffset + slots * 64, at: 40)  // file_size
    for (index, lane) in [(0, general), (1, important)] {
      let base = 4096 + index * 64
      try put(UInt64(lane), at: base)  // head: one full lap
      try put(UInt32(index == 0 ? 0 : general), at: base + 8)  // first_slot
      try put(lane, at: base + 12)  // slot_count
      try put(UInt32(index), at: base + 16)  // important
      try put(UInt64(0), at: base + 24)
      try put(UInt64(0), at: base + 32)
    }
    #expect(ftruncate(fd, off_t(slotsOffset + slots * 64)) == 0)
    return path
  }

  /// A ring declaring 2^23 + 2^22 slots (805 MB, sparse) is more than any client makes: the
  /// collector refuses it at its header, quarantines it with that reason, and spends no time
  /// decoding it (the time is printed).
  @Test func aSparseRingDeclaringMillionsOfSlotsIsQuarantinedAtItsHeader() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    let ring = try Self.craftSparseRing(in: crumbs, general: 1 << 23, important: 1 << 22)
    let started = ChildProcess.now()
    let result = try CLIProcess.run(["collect", "--dir", crumbs, "--otlp", "http://127.0.0.1:9"])
    print("collect over a crafted ring of \((1 << 23) + (1 << 22)) slots: \(ChildProcess.now() - started) s")
    let quarantine = files(crumbs + "/quarantine")
    let reasonName = try #require(
      quarantine.first { $0.hasSuffix(".reason") }, "nothing quarantined; stderr: \(result.stderr)")
    let reason = String(decoding: try Syscall.readFile(crumbs + "/quarantine/" + reasonName), as: UTF8.self)
    #expect(reason.contains("more than a client makes"), "reason: \(reason)")
    #expect(!Syscall.fileExists(ring) && !Syscall.fileExists(ring + ".claimed"))
    #expect(result.stderr.contains("quarantined"), "stderr: \(result.stderr)")
  }

  /// A `crash-loop.json.tmp-<writer>` whose writer is gone (a process killed while it wrote the
  /// crash-loop tally) is swept like every other temporary file.
  @Test func aCrashLoopTallyTemporaryFileOfAGoneWriterIsSwept() throws {
    let directory = TestDirectory()
    let crumbs = directory.file("crumbs")
    _ = try RingDirectory(path: crumbs)
    // A pid that is gone: a child that has exited and been reaped.
    let child = try ChildProcess("/bin/true", [])
    _ = child.wait(seconds: 60)
    let namespace = SystemFacts.pidNamespace(of: "self")
    let leftover = crumbs + "/crash-loop.json.tmp-\(child.pid)-\(namespace)"
    try Syscall.writeFileAtomically(leftover, Array("{\"half\":".utf8), durable: false)
    let kept = crumbs + "/someone-elses.json.tmp-\(child.pid)-\(namespace)"
    try Syscall.writeFileAtomically(kept, Array("not ours".utf8), durable: false)

    let result = try CLIProcess.run(["collect", "--dir", crumbs, "--otlp", "http://127.0.0.1:9"])
    #expect(!Syscall.fileExists(leftover), "stderr: \(result.stderr)")
    #expect(Syscall.fileExists(kept), "a file not Crumbs' own is left alone")
  }
}

extension ReportStore {
  /// The reports in `state` of the store in the Crumbs directory `crumbs`.
  static func listing(_ crumbs: String, _ state: ReportState) -> [StoredReport] {
    (try? ReportStore(directory: crumbs))?.list(state).reports ?? []
  }
}
