// FuzzRegressionTests.swift — every input a fuzzer ever crashed on, replayed through its parser.
//
// Fuzz/Regressions/<corpus>/ holds the inputs (Fuzz/run.sh copies them there); Fuzz/Corpus/<corpus>/
// holds the seeds. Each corpus directory name maps to one parser below: a new fuzz target adds
// one entry, and a directory without an entry fails the test so it cannot be forgotten.

import CrumbsSignalPath
import CrumbsSignalPathTesting
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct FuzzRegressionTests {
  /// The repository root, from this file's path (Tests/CrumbsFuzzRegressionTests/FuzzRegressionTests.swift).
  static let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path
  }()

  /// What a parser made of one input: a value that passed its consistency checks, or a typed
  /// error. A trap never comes back here: it kills the test process, which fails the run.
  enum Outcome: Equatable {
    case parsed(valid: Int, torn: Int)
    case rejected(PersistedFileError.Kind)
    /// An ELF image (maybe partial): how many symbols it gave.
    case parsedELF(symbols: Int)
    case rejectedELF(PersistedFileError.Kind)
    /// A crash record: its status and how many frames it held.
    case parsedCrashRecord(status: CrashRecord.Status, frames: Int)
    case rejectedCrashRecord(PersistedFileError.Kind)
    /// A report folder's file: report.json, or an LZ4 trail.
    case parsedReport(id: String)
    case parsedTrail(bytes: Int)
    case rejectedStoredFile
    /// A Retry-After value: the wait it gives at a fixed now (a default of 60 s when unusable).
    case parsedRetryAfter(nanoseconds: UInt64)
    /// A trail's JSON Lines: how many entries decoded, and how many had a time.
    case parsedTrailEntries(count: Int, timed: Int)
    /// The crash handler's CFI parser at an input's pc: its status (0 a row, 1 no FDE, 2
    /// malformed, 3 unsupported) and, for a row, CFA = register + offset.
    case cfiRow(status: Int32, cfaRegister: UInt32, cfaOffset: Int64)
    /// The crash handler's symbol lookup at an input's address: its status (1 found, 0 not
    /// found, -1 no symbol table) and the symbol's start.
    case elfSymbol(status: Int32, start: UInt64)
    /// A thread-dump answer: how many threads its capture held (-1: an error answer).
    case parsedThreadDump(threads: Int)
    case rejectedThreadDump
    /// A session file and value pattern: what broke (nil: every check held).
    case checked(violation: String?)
  }

  /// Corpus directory name → parser. Add one line per fuzz target.
  static let parsers: [String: @Sendable (UnsafeRawBufferPointer) -> Outcome] = [
    "ring-reader": replayRingReader,
    "elf-reader": replayELFReader,
    "crashrecord-reader": replayCrashRecordReader,
    "stored-report": replayStoredReport,
    "http-headers": replayHTTPHeaders,
    "http-response": replayHTTPResponse,
    "trail-entries": replayTrailEntries,
    "cfi-reader": replayCFIReader,
    "elf-symbol": replayELFSymbol,
    "thread-dump": replayThreadDump,
    "session-file": replaySessionFile,
    "source-lines": replaySourceLines,
  ]

  /// The checks of Fuzz/SourceLines (SourceExcerpt.fuzzViolation): a source file cut into
  /// lines within its bounds; llvm-symbolizer's answer parsed or refused.
  static func replaySourceLines(_ bytes: UnsafeRawBufferPointer) -> Outcome {
    let violation = SourceExcerpt.fuzzViolation(Array(bytes))
    #expect(violation == nil)
    return .checked(violation: violation)
  }

  /// The checks of Fuzz/SessionFile (SessionMetadata.fuzzViolation): a session file decoded or
  /// refused, its rules applied; a value pattern compiled or refused, its matches in order.
  static func replaySessionFile(_ bytes: UnsafeRawBufferPointer) -> Outcome {
    let violation = SessionMetadata.fuzzViolation(Array(bytes))
    #expect(violation == nil)
    return .checked(violation: violation)
  }

  /// The checks of Fuzz/ThreadDump: an answer within its bounds, or a typed error; its threads
  /// named without reading a file the input names, one report thread per captured one.
  static func replayThreadDump(_ bytes: UnsafeRawBufferPointer) -> Outcome {
    guard let answer = try? ThreadDumpAnswer.decode(Array(bytes)) else { return .rejectedThreadDump }
    var offline = Symbolicator.Options()
    offline.useLLVMSymbolizer = false
    offline.readsModuleFiles = false
    let threads = answer.threads(options: offline)
    guard let snapshot = answer.snapshot else { return .parsedThreadDump(threads: -1) }
    #expect(snapshot.table.threads.count <= ThreadDumpAnswer.maxThreads)
    #expect(threads.count == snapshot.table.threads.count)
    return .parsedThreadDump(threads: threads.count)
  }

  /// The checks of Fuzz/CFIReader: three u64 (load address, .eh_frame_hdr address, pc), then
  /// the segment's bytes; a row returned covers the pc it was asked for.
  static func replayCFIReader(_ input: UnsafeRawBufferPointer) -> Outcome {
    guard input.count > 24 else { return .cfiRow(status: 2, cfaRegister: 0, cfaOffset: 0) }
    let word = { (index: Int) in input.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self) }
    let segment = Array(input[24...])
    var result = crumbs_cfi_testing_result()
    for probe in [word(2) &- 1, word(1), word(2)] {
      segment.withUnsafeBufferPointer {
        crumbs_cfi_testing_row($0.baseAddress, $0.count, word(0), word(1), probe, &result)
      }
      #expect((0...3).contains(result.status))
      if result.status == 0 { #expect(result.function_start <= probe && probe < result.function_end) }
    }
    return .cfiRow(status: result.status, cfaRegister: result.cfa_register, cfaOffset: result.cfa_offset)
  }

  /// The checks of Fuzz/ELFSymbol: a status, a symbol at or below the address, a terminated name.
  static func replayELFSymbol(_ input: UnsafeRawBufferPointer) -> Outcome {
    // The termination line's redaction on the same bytes (with whatever keys are set): it stays
    // within its output.
    var redacted = [CChar](repeating: 0, count: 240)
    let count = input.withMemoryRebound(to: CChar.self) {
      crumbs_termination_message_testing_redact($0.baseAddress, min($0.count, 240), &redacted, redacted.count)
    }
    #expect(count <= redacted.count)
    guard input.count >= 8 else { return .elfSymbol(status: -1, start: 0) }
    let address = input.loadUnaligned(as: UInt64.self)
    let file = Array(input[8...])
    var name = [CChar](repeating: 0, count: 64)
    var start: UInt64 = 0
    let status = file.withUnsafeBufferPointer {
      crumbs_elf_symbol_testing_lookup($0.baseAddress, $0.count, address, &name, name.count, &start)
    }
    #expect((-1...1).contains(status))
    if status == 1 {
      #expect(start <= address)
      #expect(name.contains(0))
    }
    return .elfSymbol(status: status, start: start)
  }

  /// The checks of Fuzz/HTTPHeaders: a 429's pause stays within a day of any now; the retry
  /// policy decides within its rules.
  /// The checks of Fuzz/HTTPResponse: an answer read from a socket's bytes, the same whole and
  /// in pieces, within its bounds (HTTPResponseReader+Fuzzing.swift).
  static func replayHTTPResponse(_ bytes: UnsafeRawBufferPointer) -> Outcome {
    let violation = HTTPResponseReader.fuzzViolation(Array(bytes))
    #expect(violation == nil)
    return .checked(violation: violation)
  }

  static func replayHTTPHeaders(_ bytes: UnsafeRawBufferPointer) -> Outcome {
    let value = String(decoding: bytes, as: UTF8.self)
    let answer = HTTPResponse(status: 429, headers: ["Retry-After": value], body: Array(bytes))
    let day: UInt64 = 86_400_000_000_000
    for now: UInt64 in [0, 1_795_320_611_123_456_789, .max] {
      let until = RetryPolicy.pausedUntil(answer, now: now, default: 60)
      #expect(until >= now && (now > .max - day || until - now <= day), "\(value.debugDescription)")
    }
    _ = RetryPolicy.excerpt(Array(bytes))
    #expect(RetryPolicy.fuzzViolation(Array(bytes)) == nil, "\(value.debugDescription)")
    // The body as an OTLP collector's answer (partial success, google.rpc.Status): never traps.
    let otlp = OTLPDestination(endpoint: "http://127.0.0.1:9")
    let request = DeliveryRequest(
      destination: "otlp", reportID: "r", url: otlp.logsURL, headers: [], body: [], itemCount: 3)
    for type in ["application/x-protobuf", "application/json"] {
      _ = otlp.verdict(
        on: HTTPResponse(status: 200, headers: ["Content-Type": type], body: Array(bytes)), to: request)
      _ = otlp.verdict(
        on: HTTPResponse(status: 400, headers: ["Content-Type": type], body: Array(bytes)), to: request)
    }
    // The bytes as an answer's header lines: never past the bounds, nothing read after a
    // refused line, no 1xx taken as the final status (ResponseHeaders+Fuzzing.swift).
    #expect(ResponseHeaders.fuzzViolation(Array(bytes)) == nil, "\(value.debugDescription)")
    return .parsedRetryAfter(
      nanoseconds: RetryPolicy.retryAfter(value, now: 1_795_320_611_123_456_789, default: 60))
  }

  /// The checks of Fuzz/TrailEntries: a parsed time comes back from its own formatting.
  static func replayTrailEntries(_ bytes: UnsafeRawBufferPointer) -> Outcome {
    let entries = Breadcrumb.trail(jsonLines: Array(bytes))
    let lines = bytes.split(separator: UInt8(ascii: "\n")).map { String(decoding: $0, as: UTF8.self) }
    for nanoseconds in lines.compactMap(ISO8601.nanoseconds) + entries.map(\.wallTimeNanoseconds) {
      #expect(ISO8601.nanoseconds(ISO8601.string(nanoseconds: nanoseconds, fractionDigits: 9)) == nanoseconds)
    }
    _ = BacktraceDestination.breadcrumbsFile(entries)
    return .parsedTrailEntries(
      count: entries.count, timed: entries.filter { $0.wallTimeNanoseconds != 0 }.count)
  }

  static func replayStoredReport(_ bytes: UnsafeRawBufferPointer) -> Outcome {
    let input = Array(bytes)
    if let report = try? ReportStore.decode(input) { return .parsedReport(id: report.id) }
    if let text = try? LZ4Frame.decompress(input, limit: 1 << 22) { return .parsedTrail(bytes: text.count) }
    return .rejectedStoredFile
  }

  static func replayCrashRecordReader(_ bytes: UnsafeRawBufferPointer) -> Outcome {
    do {
      let record = try CrashRecord.read(image: bytes)
      #expect(record.frames.count <= Int(CRUMBS_CRASH_MAX_FRAMES))
      return .parsedCrashRecord(status: record.status, frames: record.frames.count)
    } catch {
      #expect(!error.reason.isEmpty)
      return .rejectedCrashRecord(error.kind)
    }
  }

  static func replayELFReader(_ bytes: UnsafeRawBufferPointer) -> Outcome {
    do {
      let image = try ELFImage.parse(bytes: bytes)
      let symbols = image.symbols
      #expect(symbols.count == image.symbolCount)
      #expect(zip(symbols, symbols.dropFirst()).allSatisfy { $0.start <= $1.start })
      for symbol in symbols.prefix(64) {
        let found = image.symbol(containing: symbol.start)
        #expect(found.map { $0.start <= symbol.start } ?? true)
      }
      if case .failure(let failure)? = image.packageNote { #expect(!failure.reason.isEmpty) }
      #expect(
        DebuginfodCache.check(bytes, buildID: image.buildID, kind: .debuginfo).map { !$0.isEmpty } ?? true)
      return .parsedELF(symbols: image.symbolCount)
    } catch {
      #expect(!error.reason.isEmpty)
      return .rejectedELF(error.kind)
    }
  }

  static func replayRingReader(_ image: UnsafeRawBufferPointer) -> Outcome {
    do {
      let contents = try RingReader.read(image: image)
      let counts = contents.counts
      #expect(counts.valid == contents.breadcrumbs.count)
      #expect(counts.valid + counts.torn + counts.empty == contents.header.slotCount)
      #expect(counts.overwritten >= 0)
      if let hang = contents.header.ongoingHang {
        #expect(hang.sinceWallNanoseconds != 0)
        #expect(hang.seenWallNanoseconds >= hang.sinceWallNanoseconds)
        #expect(contents.header.hangDamage == nil)
        #expect(!hang.summary.isEmpty)
      }
      return .parsed(valid: counts.valid, torn: counts.torn)
    } catch {
      #expect(!error.reason.isEmpty)
      return .rejected(error.kind)
    }
  }

  /// Regular files in `directory`, sorted, READMEs left out.
  static func inputs(in directory: String) -> [String] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    return names.filter { !$0.hasPrefix("README") && !$0.hasPrefix(".") }.sorted().map {
      directory + "/" + $0
    }
  }

  static func replay(_ path: String, corpus: String) throws -> Outcome {
    let parser = try #require(parsers[corpus], "no parser registered for corpus \(corpus)")
    let data = try #require(FileManager.default.contents(atPath: path), "cannot read \(path)")
    return data.withUnsafeBytes { parser($0) }
  }

  @Test func everyRegressionInputParsesOrIsRejectedWithATypedError() throws {
    let root = Self.repositoryRoot + "/Fuzz/Regressions"
    let corpora = try FileManager.default.contentsOfDirectory(atPath: root).filter {
      var isDirectory: ObjCBool = false
      return FileManager.default.fileExists(atPath: root + "/" + $0, isDirectory: &isDirectory)
        && isDirectory.boolValue
    }
    #expect(corpora.contains("ring-reader"))
    for corpus in corpora.sorted() {
      for path in Self.inputs(in: root + "/" + corpus) {
        _ = try Self.replay(path, corpus: corpus)
      }
    }
  }

  /// The first ring-reader finding: two lanes whose heads are near 2^63 overflowed the sum of
  /// overwritten counts. The ring is otherwise fine, so it must still parse.
  @Test func hugeLaneHeadsSaturateTheOverwrittenCount() throws {
    let directory = Self.repositoryRoot + "/Fuzz/Regressions/ring-reader"
    let paths = Self.inputs(in: directory).filter { $0.contains("overwritten-sum") }
    #expect(!paths.isEmpty)
    for path in paths {
      let data = try #require(FileManager.default.contents(atPath: path))
      let contents = try data.withUnsafeBytes { image throws(PersistedFileError) in
        try RingReader.read(image: image)
      }
      #expect(contents.counts.overwritten == Int.max)
    }
  }

  /// The CFI seeds (segments of real binaries) give a row at each pc, one byte into a function
  /// (x86_64: after `push`, or a PLT entry: CFA = rsp + 16); every cut and every byte flip of
  /// their .eh_frame_hdr and first entries comes back as a status, never a trap.
  @Test func cfiSeedsGiveRowsAndDamagedOnesStatuses() throws {
    let seeds = Self.inputs(in: Self.repositoryRoot + "/Fuzz/Corpus/cfi-reader")
    #expect(seeds.count >= 6)
    for path in seeds {
      let bytes = try #require(FileManager.default.contents(atPath: path)).map { $0 }
      let outcome = bytes.withUnsafeBytes { Self.replayCFIReader($0) }
      #expect(outcome == .cfiRow(status: 0, cfaRegister: 7, cfaOffset: 16), "\(path)")
      let base = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 0, as: UInt64.self) }
      let header = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self) }
      let headerAt = 24 + Int(header - base)
      for cut in stride(from: 25, to: bytes.count, by: max(1, bytes.count / 97)) {
        _ = Array(bytes[..<cut]).withUnsafeBytes { Self.replayCFIReader($0) }
      }
      for index in headerAt..<min(bytes.count, headerAt + 64) {
        for flip: UInt8 in [0x01, 0x80, 0xff] {
          var damaged = bytes
          damaged[index] ^= flip
          _ = damaged.withUnsafeBytes { Self.replayCFIReader($0) }
        }
      }
    }
  }

  @Test func deliverySeedsReplayAsTheirNamesSay() throws {
    let root = Self.repositoryRoot + "/Fuzz/Corpus/"
    var outcomes: [String: Outcome] = [:]
    for corpus in ["http-headers", "trail-entries"] {
      for path in Self.inputs(in: root + corpus) {
        outcomes[corpus + "/" + URL(fileURLWithPath: path).lastPathComponent] = try Self.replay(
          path, corpus: corpus)
      }
    }
    #expect(outcomes["http-headers/seconds"] == .parsedRetryAfter(nanoseconds: 120_000_000_000))
    #expect(outcomes["http-headers/imf-fixdate"] == .parsedRetryAfter(nanoseconds: 0))
    #expect(outcomes["http-headers/imf-fixdate-year-min"] == .parsedRetryAfter(nanoseconds: 60_000_000_000))
    #expect(outcomes["http-headers/seconds-huge"] == .parsedRetryAfter(nanoseconds: 86_400_000_000_000))
    #expect(outcomes["trail-entries/today"] == .parsedTrailEntries(count: 2, timed: 2))
    #expect(outcomes["trail-entries/far-future"] == .parsedTrailEntries(count: 2, timed: 0))
    #expect(outcomes["trail-entries/last-nanosecond"] == .parsedTrailEntries(count: 1, timed: 1))
    #expect(outcomes["trail-entries/damaged-line"] == .parsedTrailEntries(count: 1, timed: 1))
  }

  /// The hang seeds: the watchdog's record of a hang going on reads back whole; caught mid-write
  /// it reads as none; damaged, it reads as none and the damage is named.
  @Test func hangSeedsReadAsTheirNamesSay() throws {
    let directory = Self.repositoryRoot + "/Fuzz/Corpus/ring-reader"
    func header(_ name: String) throws -> RingHeaderInfo {
      let data = try #require(FileManager.default.contents(atPath: directory + "/" + name), "\(name)")
      return try data.withUnsafeBytes { image throws(PersistedFileError) in
        try RingReader.read(image: image).header
      }
    }
    let hung = try header("hang-64x64")
    #expect(
      hung.ongoingHang
        == OngoingHang(
          watch: "event-loop-1", sinceWallNanoseconds: 1_700_000_000_000_000_000,
          seenWallNanoseconds: 1_700_000_031_000_000_000, frames: "EventLoop.run() ← Thread.main"))
    #expect(hung.hangDamage == nil)
    let torn = try header("damaged-hang-torn")
    #expect(torn.ongoingHang == nil && torn.hangDamage == nil)
    for (name, damage) in [
      ("damaged-hang-watch-no-nul", "its watch name has no terminating NUL in 64 bytes"),
      ("damaged-hang-watch-not-utf8", "its watch name is not valid UTF-8"),
      (
        "damaged-hang-seen-before-since",
        "its last look (1699999999000000000 ns) is before its start (1700000000000000000 ns)"
      ),
    ] {
      let damaged = try header(name)
      #expect(damaged.ongoingHang == nil, "\(name)")
      #expect(damaged.hangDamage == damage, "\(name)")
    }
  }

  /// The unclean-end seeds (issue 24): a stop request and a limit signal read back with their
  /// times, the limits at start with them; a stop-request word naming SIGKILL reads as none.
  @Test func uncleanEndSeedsReadAsTheirNamesSay() throws {
    let directory = Self.repositoryRoot + "/Fuzz/Corpus/ring-reader"
    func signs(_ name: String) throws -> UncleanEndSigns {
      let data = try #require(FileManager.default.contents(atPath: directory + "/" + name), "\(name)")
      return try data.withUnsafeBytes { image throws(PersistedFileError) in
        try RingReader.read(image: image).header.uncleanEndSigns
      }
    }
    let ended = try signs("ends-64x64")
    #expect(ended.stopRequest == SignalSeen(signal: SIGTERM, wallNanoseconds: 1_700_000_000_000_000_000))
    #expect(ended.limitSignal == SignalSeen(signal: SIGXCPU, wallNanoseconds: 1_700_000_001_000_000_000))
    #expect(ended.limits != nil)
    let damaged = try signs("damaged-stop-request-signal")
    #expect(damaged.stopRequest == nil)
    #expect(damaged.limitSignal?.signal == SIGXCPU)
  }

  @Test func threadDumpSeedsReplayAsTheirNamesSay() throws {
    var outcomes: [String: Outcome] = [:]
    for path in Self.inputs(in: Self.repositoryRoot + "/Fuzz/Corpus/thread-dump") {
      outcomes[URL(fileURLWithPath: path).lastPathComponent] = try Self.replay(path, corpus: "thread-dump")
    }
    guard case .parsedThreadDump(let threads)? = outcomes["live.json"] else {
      Issue.record("live.json: \(String(describing: outcomes["live.json"]))")
      return
    }
    #expect(threads >= 1)
    #expect(outcomes["live-cut.json"] == .rejectedThreadDump)
    #expect(outcomes["error.json"] == .parsedThreadDump(threads: -1))
    #expect(outcomes["version-2.json"] == .rejectedThreadDump)
  }

  @Test func seedsParseAsTheirNamesSay() throws {
    let directory = Self.repositoryRoot + "/Fuzz/Corpus/ring-reader"
    let seeds = Self.inputs(in: directory)
    #expect(seeds.count >= 10)
    for path in seeds {
      let name = URL(fileURLWithPath: path).lastPathComponent
      let outcome = try Self.replay(path, corpus: "ring-reader")
      switch name {
      case "damaged-cut-in-slots", "damaged-cut-in-header":
        #expect(outcome == .rejected(.truncated), "\(name)")
      case "damaged-wrong-magic": #expect(outcome == .rejected(.unrecognized), "\(name)")
      case "damaged-future-version": #expect(outcome == .rejected(.unsupported), "\(name)")
      case "damaged-lane-count": #expect(outcome == .rejected(.corrupt), "\(name)")
      case "damaged-payload-byte", "damaged-commit-writing":
        // One of the three breadcrumbs of few-64x64 damaged: counted torn, the others kept.
        #expect(outcome == .parsed(valid: 2, torn: 1), "\(name)")
      default:
        guard case .parsed(let valid, let torn) = outcome else {
          Issue.record("valid seed \(name) was rejected: \(outcome)")
          continue
        }
        #expect(torn == 0, "\(name)")
        #expect(name.hasPrefix("empty") ? valid == 0 : valid > 0, "\(name)")
      }
    }
  }
}
