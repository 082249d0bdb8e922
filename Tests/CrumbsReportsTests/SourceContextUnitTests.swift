// SourceContextUnitTests.swift — the lines of source a report carries (issue 41, point 2): cut
// from real files, bounded per line, per frame and per report; a path from DWARF opened as
// untrusted input (a real FIFO, a file not named like source, one too large); another source
// provider behind the local files; the lines redacted as messages are.

import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Foundation
import Synchronization
import Testing

@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Source context")
struct SourceContextUnitTests {
  static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

  @Test func excerptsAroundALineAndAtTheFilesEnds() {
    let file = Self.bytes((1...10).map { "line \($0)" }.joined(separator: "\n") + "\n")
    let middle = SourceExcerpt.lines(in: file, around: 5, radius: 2, maxLineBytes: 100)
    #expect(middle?.startLine == 3 && middle?.lines == ["line 3", "line 4", "line 5", "line 6", "line 7"])
    let top = SourceExcerpt.lines(in: file, around: 1, radius: 3, maxLineBytes: 100)
    #expect(top?.startLine == 1 && top?.lines == ["line 1", "line 2", "line 3", "line 4"])
    let bottom = SourceExcerpt.lines(in: file, around: 10, radius: 3, maxLineBytes: 100)
    #expect(bottom?.startLine == 7 && bottom?.lines == ["line 7", "line 8", "line 9", "line 10"])
    // Past the end: the file is not the one compiled.
    #expect(SourceExcerpt.lines(in: file, around: 11, radius: 3, maxLineBytes: 100) == nil)
    #expect(SourceExcerpt.lines(in: [], around: 1, radius: 3, maxLineBytes: 100) == nil)
    #expect(SourceExcerpt.lines(in: file, around: 0, radius: 3, maxLineBytes: 100) == nil)
    #expect(SourceExcerpt.lines(in: file, around: Int.max, radius: Int.max, maxLineBytes: 100) == nil)
    // No newline at the end, CRLF, an empty line.
    let windows = SourceExcerpt.lines(in: Self.bytes("a\r\n\r\nc"), around: 3, radius: 1, maxLineBytes: 100)
    #expect(windows?.startLine == 2 && windows?.lines == ["", "c"])
  }

  @Test func longLinesAreCutOnACharacterAndBinaryIsRefused() {
    let long = String(repeating: "é", count: 100)  // 200 bytes
    let cut = SourceExcerpt.lines(in: Self.bytes(long), around: 1, radius: 0, maxLineBytes: 7)
    #expect(cut?.lines == ["ééé…"])
    let invalid = SourceExcerpt.lines(in: [0x61, 0xFF, 0x62], around: 1, radius: 0, maxLineBytes: 10)
    #expect(invalid?.lines == ["a\u{FFFD}b"])
    #expect(SourceExcerpt.lines(in: [0x61, 0x0A, 0x00, 0x0A], around: 1, radius: 1, maxLineBytes: 10) == nil)
  }

  @Test func aPathFromDWARFIsOpenedAsUntrustedInput() throws {
    let directory = TestDirectory()
    let local = LocalSourceFiles()
    // A FIFO named like source: refused at once, never waited on.
    let fifo = directory.file("pipe.swift")
    #expect(mkfifo(fifo, 0o600) == 0)
    #expect(
      local.source(path: fifo, buildID: nil, limit: 1024) == .failure(SourceUnavailable("not a regular file"))
    )
    // A file not named like source code (a key, a password database) is never quoted.
    let key = directory.file("id_ed25519")
    try "-----BEGIN OPENSSH PRIVATE KEY-----\n".write(toFile: key, atomically: false, encoding: .utf8)
    #expect(
      local.source(path: key, buildID: nil, limit: 1024)
        == .failure(SourceUnavailable("not named like source code")))
    // Bounded.
    let large = directory.file("Large.swift")
    try String(repeating: "x", count: 2048).write(toFile: large, atomically: false, encoding: .utf8)
    #expect(
      local.source(path: large, buildID: nil, limit: 1024) == .failure(SourceUnavailable("over 1024 bytes")))
    #expect(
      local.source(path: "Relative.swift", buildID: nil, limit: 1024)
        == .failure(SourceUnavailable("a relative path")))
    #expect(
      local.source(path: directory.file("Missing.swift"), buildID: nil, limit: 1024)
        == .failure(SourceUnavailable("not on this machine")))
    let found = try local.source(path: large, buildID: nil, limit: 4096).get()
    #expect(found.bytes.count == 2048 && found.modifiedNanoseconds != nil)
  }

  /// A provider behind the local files (what a debuginfod source fetch plugs into).
  struct FixedSource: SourceProvider {
    var name: String { "fixed" }
    var files: [String: String]
    func source(path: String, buildID: String?, limit: Int) -> Result<SourceFile, SourceUnavailable> {
      guard let text = files[path], buildID == "abcd" else { return .failure(SourceUnavailable("not here")) }
      return .success(SourceFile(bytes: Array(text.utf8)))
    }
  }

  static func frame(_ index: Int, module: String, file: String, line: Int) -> CrashReport.Frame {
    CrashReport.Frame(
      index: index, address: "0x\(index)", module: module, moduleOffset: nil, buildID: "abcd",
      function: "f\(index)",
      symbol: nil, symbolOffset: nil, file: file, line: line, note: nil)
  }

  @Test func capsPerFrameAndPerReportAndTheProviderHook() throws {
    let directory = TestDirectory()
    let source = directory.file("App.swift")
    try (1...40).map { "let line\($0) = \($0)" }.joined(separator: "\n").write(
      toFile: source, atomically: false, encoding: .utf8)
    var options = SourceContextOptions()
    options.linesAround = 1
    options.maxFrames = 2
    options.providers = [
      LocalSourceFiles(), FixedSource(files: ["/build/Gone.swift": "a\nb\nc token=abc\nd"]),
    ]
    var reader = SourceContextReader(options: options)
    let frames = reader.add(
      to: [
        Self.frame(0, module: "/usr/lib/libc.so.6", file: source, line: 5),  // not the app's
        Self.frame(1, module: "/app/bin", file: source, line: 10),
        Self.frame(2, module: "/app/bin", file: "/build/Gone.swift", line: 3),
        Self.frame(3, module: "/app/bin", file: source, line: 20),  // past maxFrames
      ], executable: "/app/bin")
    #expect(frames[0].source == nil)
    #expect(
      frames[1].source
        == .init(
          startLine: 9, lines: ["let line9 = 9", "let line10 = 10", "let line11 = 11"], origin: "file"))
    #expect(frames[2].source?.origin == "fixed" && frames[2].source?.lines == ["b", "c token=abc", "d"])
    #expect(frames[3].source == nil)

    // A byte cap: the frame that would pass it goes without, and so do the rest.
    options.maxFrames = 10
    options.maxBytes = 60
    var small = SourceContextReader(options: options)
    let capped = small.add(
      to: [
        Self.frame(0, module: "/app/bin", file: source, line: 10),
        Self.frame(1, module: "/app/bin", file: source, line: 30),
      ],
      executable: "/app/bin")
    #expect(capped[0].source != nil && capped[1].source == nil)

    // Redacted with the report, as messages are.
    var report = CrashReport.emptyForTests(frames: frames)
    Redaction().redactor().report(&report)
    #expect(report.frames[2].source?.lines == ["b", "c token=[redacted]", "d"])
  }

  /// A provider that fetches from elsewhere and has nothing, counting what it is asked.
  final class CountingSource: SourceProvider {
    let asked = Mutex(0)
    var name: String { "counting" }
    func source(path: String, buildID: String?, limit: Int) -> Result<SourceFile, SourceUnavailable> {
      asked.withLock { $0 += 1 }
      return .failure(SourceUnavailable("counting: refused: not text (a NUL byte)"))
    }
  }

  @Test func aFetchingProvidersFailureIsNotedAndItsAsksAreBounded() {
    var options = SourceContextOptions()
    options.maxFrames = 3
    let counting = CountingSource()
    options.providers = [LocalSourceFiles(), counting]
    var reader = SourceContextReader(options: options)
    // A hostile DWARF: a file of its own for each of 20 frames, none on this machine.
    let frames = reader.add(
      to: (0..<20).map { Self.frame($0, module: "/app/bin", file: "/nowhere/F\($0).swift", line: 2) },
      executable: "/app/bin")
    #expect(counting.asked.withLock { $0 } == 3)
    #expect(frames.allSatisfy { $0.source == nil })
    // The machine's own missing file goes unsaid; the fetching provider's reason is noted.
    #expect(frames[0].note == "no source lines: counting: refused: not text (a NUL byte)")
    #expect(frames[19].note == "no source lines: counting: not asked (3 files asked already)")
  }
}

extension CrashReport {
  /// A report with only `frames` (and the fields every report has).
  static func emptyForTests(frames: [Frame]) -> CrashReport {
    CrashReport(
      id: "r", kind: .crash, exceptionType: "SIGSEGV", exceptionMessage: "", exceptionStacktrace: "",
      threadID: nil, threadName: nil, sessionID: "s", reportingSessionID: nil, timeUnixNano: 0, time: "",
      observedTimeUnixNano: 0, observedTime: "", signal: nil, registers: [], frames: frames, modules: [],
      resource: [:], attributes: [:],
      breadcrumbs: .init(
        attachment: nil, count: 0, valid: 0, torn: 0, overwritten: 0, empty: 0, lastMessage: nil,
        timesCalibrated: true),
      attachments: [], damage: [], evidence: [], handlerDurationNanoseconds: nil)
  }
}
