// ReportJSONTests.swift — report.json written by hand (CrashReport+JSON.swift) is, byte for
// byte, what `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]` wrote from the `Codable`
// form before, for reports with every field set, none set, hostile strings, extreme numbers and
// many threads, frames and attributes; it decodes back to the report it was made from (a field
// the writer forgot would not); and where it differs on purpose (a double attribute's point;
// backspace, form feed and DEL escaped as `\u00XX`) the values are the same.

import CrumbsPlatform
import CrumbsReportTestSupport
import FoundationEssentials
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct ReportJSONTests {
  /// What ReportStore.encode wrote before the hand-written encoding.
  static func encoderBytes(_ report: CrashReport) throws -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return Array(try encoder.encode(report))
  }

  /// The same bytes as JSONEncoder, and the same report back.
  static func expectSameAsEncoder(_ report: CrashReport, sourceLocation: SourceLocation = #_sourceLocation)
    throws
  {
    let written = try ReportStore.encode(report)
    let expected = try encoderBytes(report)
    #expect(
      String(decoding: written, as: UTF8.self) == String(decoding: expected, as: UTF8.self),
      sourceLocation: sourceLocation)
    #expect(try ReportStore.decode(written) == readBack(report), sourceLocation: sourceLocation)
  }

  /// `report` as it reads back: a double attribute that is not finite as its text (JSON has no
  /// NaN nor infinity; AttributeValue.swift).
  static func readBack(_ report: CrashReport) -> CrashReport {
    var report = report
    report.attributes = report.attributes.mapValues { value in
      if case .double(let number) = value, !number.isFinite { return .string(value.text) }
      return value
    }
    return report
  }

  /// A hostile string made an attachment name `ReportStore.decode` accepts (it refuses names
  /// that leave the folder).
  static func fileName(_ text: String) -> String {
    "f" + text.replacing("/", with: "_").replacing("\u{0}", with: "_")
  }

  // MARK: Reports

  /// Strings JSON escapes, or a writer might: quotes, backslashes, slashes, control characters
  /// (not backspace, form feed or DEL: `differingEscapes`), non-ASCII, emoji, U+2028.
  static let hostileStrings: [String] = [
    "", "plain", "say \"hi\"", #"C:\path\to"#, "/usr/lib/libapp.so", "http://a/b", "line\nbreak\r\n",
    "tab\there", "\u{0}nul", "\u{1}\u{1f}\u{1b}[31m", "café", "中文字符", "🦀🔥👩‍👩‍👧", "e\u{301}",
    "\u{2028}\u{2029}", "\u{fffd}", "</script>", "\\\"\\", String(repeating: "long ", count: 300),
  ]

  static let allFields = CrashReport(
    id: "6acdbf4e-718a-40c4-b194-12e38ae64caf", kind: .crash, exceptionType: "SIGSEGV",
    exceptionMessage: "SEGV_MAPERR at 0x0", exceptionStacktrace: "#0  0x1  f + 4 (app)\n#1  0x2",
    threadID: 4242, threadName: "main", sessionID: "6acdbf4e-718a-40c4-b194-12e38ae64caf",
    reportingSessionID: "1b2c3d4e-0000-4000-8000-000000000001", timeUnixNano: 1_795_000_000_123_456_789,
    time: "2026-11-22T04:10:11.123456789Z", observedTimeUnixNano: UInt64.max,
    observedTime: "2026-11-22T04:10:12.000Z",
    signal: .init(
      number: 11, name: "SIGSEGV", code: 1, codeName: "SEGV_MAPERR", faultAddress: "0x0", senderPID: 99,
      senderUID: UInt32.max),
    registers: [.init(name: "rip", value: "0x00007ffd1c2a3b40"), .init(name: "rsp", value: "0x0")],
    frames: [
      .init(
        index: 0, address: "0x55d0c0de1234", module: "/usr/bin/app", moduleOffset: "0x1234",
        buildID: "abcdef0123", function: "TestCrash.writeThroughNull()",
        symbol: "static Crumbs.TestCrash.writeThroughNull() -> Swift.Never", symbolOffset: UInt64.max,
        file: "/src/Crash.swift", line: Int.max, column: Int.max, note: "stripped", foundBy: .cfi,
        inlined: true,
        source: .init(
          startLine: Int.max - 6, lines: ["  let x = \"tab\there\"", "", "é…"], origin: "file",
          newerThanModule: true)),
      .init(
        index: 1, address: "0x2", module: nil, moduleOffset: nil, buildID: nil, function: nil, symbol: nil,
        symbolOffset: nil, file: nil, line: Int.min, note: nil, foundBy: .guessed),
    ],
    modules: [
      LoadedModule(
        path: "/usr/bin/app", loadBias: 0x55d0_c0de_0000, buildID: [0xab, 0xcd, 0xef, 0x01], start: 0x1000,
        end: UInt64.max, textStart: 0x2000, textEnd: 0x3000, foundAtCrash: true, unloaded: true),
      LoadedModule(path: "/lib/libc.so.6", loadBias: 0, buildID: [], start: 0, end: 0),
    ],
    resource: ["service.name": "app", "process.pid": "4242", "process.executable.path": "/usr/bin/app"],
    attributes: [
      "feature.beta": .bool(true), "off": .bool(false), "cart.items": .int(3), "big": .int(Int64.max),
      "small": .int(Int64.min), "cart.total": .double(2.5), "tiny": .double(.leastNonzeroMagnitude),
      "huge": .double(-.greatestFiniteMagnitude), "sum": .double(0.1 + 0.2), "exp": .double(1e300),
      "neg": .double(-7.25e-10), "nan": .double(.nan), "inf": .double(.infinity),
      "minus.inf": .double(-.infinity), "region": .string("eu-west-1"),
    ],
    breadcrumbs: .init(
      attachment: "breadcrumbs.jsonl.lz4", count: Int.max, valid: 3, torn: 1, overwritten: 2, empty: 0,
      lastMessage: "GET /health", timesCalibrated: false),
    attachments: [
      .init(name: "breadcrumbs.jsonl.lz4", contentType: "application/x-lz4", size: 1234),
      .init(name: "core", contentType: "application/octet-stream", size: -1, omittedReason: "too large"),
    ],
    damage: ["torn slot 3", "crc mismatch"], evidence: ["rss near the limit"],
    handlerDurationNanoseconds: 812_345,
    threads: [
      .init(
        id: 4242, name: "main", state: .crashed, crashed: true, signal: "SIGSEGV",
        registers: [.init(name: "rip", value: "0x1")],
        frames: [
          .init(
            index: 0, address: "0x1", module: "/usr/bin/app", moduleOffset: "0x1", buildID: "abcdef0123",
            function: "f", symbol: "$s3app1fyyF", symbolOffset: 4, file: "/src/f.swift", line: 7,
            column: 9, note: "inlined", foundBy: .inserted, inlined: false,
            source: .init(
              startLine: 6, lines: ["}", "func f() {", "  g()"], origin: "debuginfod", newerThanModule: false)
          )
        ]),
      .init(id: 4243, name: nil, state: .noAnswer, crashed: false, frames: []),
      .init(
        id: 4244, name: "worker", state: .alsoCrashed, crashed: false, signal: "SIGBUS", registers: [],
        frames: [.init(index: 0, address: "0x9", foundBy: .async)]),
      .init(id: 4245, name: "w", state: .notAsked, crashed: false, frames: [], notSignalled: ["seccomp"]),
      .init(id: 4246, name: "r", state: .requesting, crashed: false, frames: []),
      .init(
        id: 4247, name: "c", state: .captured, crashed: false, frames: [],
        notSignalled: ["seccomp", "in_system_call"], blockedSystemCall: 0,
        wait: {
          // Every field, so the walk sees each set (no wait has both an owner and a reason).
          var wait = ThreadWait(threadID: 4247)
          wait.state = "S"
          wait.systemCall = 202
          wait.systemCallName = "futex"
          wait.arguments = [0x7f00_0000_1000, 0x86, 0, 0, 3, 0x6300]
          wait.lockAddress = 0x7f00_0000_1000
          wait.lockKind = .rwlock
          wait.lockObject = 0x7f00_0000_0ff8
          wait.wantsToWrite = true
          wait.readers = 2
          wait.owner = 4242
          wait.ownerUnknown = "not read"
          return wait
        }()),
      .init(id: 4248, name: "u", state: .unknown, crashed: false, frames: []),
    ],
    threadsNotRecorded: 17,
    trace: TraceContext(traceID: "4bf92f3577b34da6a3ce929d0e0e4736", spanID: "00f067aa0ba902b7", flags: 255),
    traceBreadcrumb: .init(
      threadID: UInt32.max, threadSequence: 0, message: "checkout", time: "2026-11-22T04:10:10.000Z"),
    openOperations: .init(
      operations: [
        .init(
          name: "GET /v1/orders/:id", kind: "server", traceID: "4bf92f3577b34da6a3ce929d0e0e4736",
          spanID: "00f067aa0ba902b7", parentSpanID: "b7ad6b7169203331", startTimeUnixNano: UInt64.max,
          startTime: "2026-11-22T04:10:09.000Z", ageNanoseconds: 1_000_000_000, threadID: UInt32.max,
          attributes: [.init(key: "url.path", value: "/v1/orders/\"42\"")], onCrashingThread: true)
      ],
      capacity: 512, notHeld: 3, unreadable: 1, damage: "the ledger's magic is damaged"))

  /// Every optional nil (and the arrays empty), every kind but crash.
  static var noOptionals: [CrashReport] {
    [CrashReport.Kind.abnormalTermination, .nonFatal, .hang].map { kind in
      var report = CrashReport.sample()
      report.kind = kind
      report.threadID = nil
      report.threadName = nil
      report.modules = [LoadedModule(path: "/bin/app", loadBias: 0, buildID: [], start: 0, end: 0)]
      report.resource = [:]
      report.frames = [
        .init(
          index: 0, address: "0x0", module: nil, moduleOffset: nil, buildID: nil, function: nil, symbol: nil,
          symbolOffset: nil, file: nil, line: nil, note: nil)
      ]
      report.threads = kind == .hang ? [] : nil
      return report
    }
  }

  @Test func aReportWithEveryFieldSetIsWhatJSONEncoderWrote() throws {
    try Self.expectSameAsEncoder(Self.allFields)
  }

  /// A property added to `CrashReport`, or to a type in it, must be set in `allFields`: otherwise
  /// the writer could leave it out and every test here would still pass (the encoder omits a nil,
  /// and the decoded report has nil there too). Every stored property, at every depth, is set
  /// (not nil, not empty) somewhere in `allFields`.
  @Test func allFieldsLeavesNoPropertyUnset() {
    var properties: Set<String> = []
    var setSomewhere: Set<String> = []
    func isSet(_ value: Any) -> Bool {
      let mirror = Mirror(reflecting: value)
      switch mirror.displayStyle {
      case .optional, .collection, .dictionary, .set: return !mirror.children.isEmpty
      default: return true
      }
    }
    func walk(_ value: Any, _ path: String) {
      let mirror = Mirror(reflecting: value)
      switch mirror.displayStyle {
      case .optional:
        if let wrapped = mirror.children.first?.value { walk(wrapped, path) }
      case .struct, .class:
        for child in mirror.children {
          guard let label = child.label else { continue }
          properties.insert(path + "." + label)
          if isSet(child.value) { setSomewhere.insert(path + "." + label) }
          walk(child.value, path + "." + label)
        }
      case .collection:
        for element in mirror.children { walk(element.value, path + "[]") }
      default: break  // numbers, strings, enums, dictionaries: set when present
      }
    }
    walk(Self.allFields, "report")
    #expect(properties.count > 60, "the walk saw \(properties.count) properties")
    #expect(properties.subtracting(setSomewhere).sorted() == [])
  }

  @Test func aReportWithNoOptionalFieldsIsWhatJSONEncoderWrote() throws {
    try Self.expectSameAsEncoder(CrashReport.sample())
    for report in Self.noOptionals { try Self.expectSameAsEncoder(report) }
  }

  @Test func storedReportsOfEarlierVersionsReencodeAsJSONEncoderDid() throws {
    let root = String(#filePath.dropLast("Tests/CrumbsReportsTests/ReportJSONTests.swift".count))
    for file in ["Fuzz/Corpus/stored-report/report.json", "Tests/Fixtures/report-string-attributes.json"] {
      try Self.expectSameAsEncoder(try ReportStore.decode(try Syscall.readFile(root + file)))
    }
  }

  /// Every string field, and the keys of `resource` and `attributes`, holding each hostile
  /// string; keys whose order a sort by `String`'s `<` or a numeric or case-insensitive sort
  /// would get wrong.
  @Test func hostileStringsAndKeysAreWhatJSONEncoderWrote() throws {
    for (index, text) in Self.hostileStrings.enumerated() {
      var report = Self.allFields
      report.id = text
      report.exceptionType = text
      report.exceptionMessage = text
      report.exceptionStacktrace = text
      report.threadName = text
      report.sessionID = text
      report.reportingSessionID = text
      report.time = text
      report.observedTime = text
      report.signal?.name = text
      report.signal?.codeName = text
      report.signal?.faultAddress = text
      report.registers = [.init(name: text, value: text)]
      report.frames[0].address = text
      report.frames[0].module = text
      report.frames[0].moduleOffset = text
      report.frames[0].buildID = text
      report.frames[0].function = text
      report.frames[0].symbol = text
      report.frames[0].file = text
      report.frames[0].note = text
      report.modules[0].path = text
      report.resource[text] = text
      report.attributes[text] = .string(text)
      report.attributes[text + "!"] = .int(Int64(index))
      report.breadcrumbs.lastMessage = text
      report.attachments[1].name = Self.fileName(text)
      report.breadcrumbs.attachment = Self.fileName(text)
      report.attachments[1].contentType = text
      report.attachments[1].omittedReason = text
      report.damage.append(text)
      report.evidence.append(text)
      report.threads?[1].name = text
      report.threads?[0].signal = text
      report.traceBreadcrumb?.message = text
      report.traceBreadcrumb?.time = text
      try Self.expectSameAsEncoder(report)
    }
    let keys = [
      "", "a", "A", "B", "Z", "_", "a10", "a9", "a.b", "a_b", "ab", "a-b", "aB", "é", "e\u{301}x", "z",
      "Ω", "中", "🦀", "~", " ", "0", "10", "9", "service.name", "service.namespace", "thread",
    ]
    var report = Self.allFields
    report.resource = Dictionary(uniqueKeysWithValues: keys.map { ($0, $0) })
    report.attributes = Dictionary(uniqueKeysWithValues: keys.map { ($0, .string($0)) })
    try Self.expectSameAsEncoder(report)
  }

  /// Many reports from a seeded generator: each optional set or not, numbers at their extremes,
  /// strings from the hostile ones, up to 40 threads of 70 frames and 60 attributes.
  @Test func generatedReportsAreWhatJSONEncoderWrote() throws {
    var random = SplitMix64(seed: 26)  // SymbolicationTests.swift's: the same reports on every run
    for _ in 0..<150 {
      try Self.expectSameAsEncoder(Self.generated(&random))
    }
  }

  // MARK: Where the bytes differ on purpose

  /// A finite double attribute keeps its point (`4.0`), and backspace, form feed and DEL are
  /// written as `\u00XX` (JSONWriter's escaping): JSONEncoder wrote `4`, `\b`, `\f` and DEL raw.
  /// The report read back is the same.
  @Test func differingEscapesAndWholeDoublesReadBackTheSame() throws {
    var report = Self.allFields
    let text = "bell\u{7}back\u{8}feed\u{c}del\u{7f}end"
    report.exceptionMessage = text
    report.resource[text] = text
    report.attributes = [
      "whole": .double(4.0), "zero": .double(0), "minus.zero": .double(-0.0), "big": .double(1e15),
      "max": .double(9_007_199_254_740_992), text: .string(text),
    ]
    let written = try ReportStore.encode(report)
    let json = String(decoding: written, as: UTF8.self)
    #expect(json.contains(#""whole":{"double":4.0}"#))
    #expect(json.contains(#""minus.zero":{"double":-0.0}"#))
    #expect(json.contains(#""exception.message":"bell\u0007back\u0008feed\u000cdel\u007fend""#))
    let encoded = String(decoding: try Self.encoderBytes(report), as: UTF8.self)
    #expect(encoded.contains(#""whole":{"double":4}"#))
    let decoded = try ReportStore.decode(written)
    #expect(decoded == report)
    #expect(decoded.attributes["minus.zero"]?.doubleSign == .minus)
    // Apart from those, the same text.
    func normalized(_ text: String) -> String {
      text.replacing("\\u0008", with: "\\b").replacing("\\u000c", with: "\\f")
        .replacing("\\u007f", with: "\u{7f}").replacing(".0}", with: "}")
    }
    #expect(normalized(json) == encoded)
  }

  // MARK: A field forgotten

  /// Each optional field alone: the report read back holds it (and JSONEncoder wrote the same
  /// bytes). A field the hand-written encoding left out reads back nil or fails to decode.
  @Test func everyOptionalFieldAloneReadsBack() throws {
    let full = Self.allFields
    let empty = Self.noOptionals[0]
    let setters: [(String, (inout CrashReport) -> Void)] = [
      ("threadID", { $0.threadID = full.threadID }), ("threadName", { $0.threadName = full.threadName }),
      ("reportingSessionID", { $0.reportingSessionID = full.reportingSessionID }),
      ("signal", { $0.signal = full.signal }),
      (
        "signal.sender",
        {
          $0.signal = full.signal; $0.signal?.senderPID = nil
        }
      ),
      ("handlerDurationNanoseconds", { $0.handlerDurationNanoseconds = full.handlerDurationNanoseconds }),
      ("threads", { $0.threads = full.threads }), ("threadsNotRecorded", { $0.threadsNotRecorded = 0 }),
      ("trace", { $0.trace = full.trace }),
      ("traceBreadcrumb", { $0.traceBreadcrumb = full.traceBreadcrumb }),
      ("openOperations", { $0.openOperations = full.openOperations }),
      ("frame", { $0.frames = full.frames }), ("module", { $0.modules = full.modules }),
      ("trail", { $0.breadcrumbs = full.breadcrumbs }),
      ("attachments", { $0.attachments = full.attachments }),
    ]
    for (name, set) in setters {
      var report = empty
      set(&report)
      let decoded = try ReportStore.decode(try ReportStore.encode(report))
      #expect(decoded == Self.readBack(report), "\(name)")
      try Self.expectSameAsEncoder(report)
    }
  }

  // MARK: The generator

  static func generated(_ random: inout SplitMix64) -> CrashReport {
    func flag() -> Bool { random.next() & 1 == 0 }
    func text() -> String { hostileStrings[Int(random.next() % UInt64(hostileStrings.count))] }
    func maybe<T>(_ value: @autoclosure () -> T) -> T? { flag() ? value() : nil }
    func int() -> Int {
      [0, 1, -1, Int.max, Int.min, 42, Int(Int32.max)][Int(random.next() % 7)]
    }
    func uint64() -> UInt64 {
      [0, 1, UInt64.max, UInt64(Int64.max) + 1, random.next()][Int(random.next() % 5)]
    }
    func double() -> Double {
      [0.5, -2.5, 1e300, -1e-300, .leastNonzeroMagnitude, .greatestFiniteMagnitude, .pi, 0.1, 1e21, 1.5e-7][
        Int(random.next() % 10)]
    }
    func frame(_ index: Int) -> CrashReport.Frame {
      .init(
        index: index, address: CrashReport.hex(random.next()), module: maybe(text()),
        moduleOffset: maybe(text()),
        buildID: maybe(text()), function: maybe(text()), symbol: maybe(text()), symbolOffset: maybe(uint64()),
        file: maybe(text()), line: maybe(int()), column: maybe(int()), note: maybe(text()),
        foundBy: maybe([.guessed, .cfi, .async, .inserted][Int(random.next() % 4)]), inlined: maybe(flag()),
        source: maybe(
          .init(
            startLine: int(), lines: (0..<Int(random.next() % 4)).map { _ in text() }, origin: text(),
            newerThanModule: maybe(flag()))))
    }
    func frames(_ most: UInt64) -> [CrashReport.Frame] { (0..<Int(random.next() % most)).map(frame) }
    func registers() -> [CrashReport.Register] {
      (0..<Int(random.next() % 20)).map { _ in .init(name: text(), value: CrashReport.hex(random.next())) }
    }
    func attribute() -> AttributeValue {
      switch random.next() % 5 {
      case 0: .string(text())
      case 1: .bool(flag())
      case 2: .int(Int64(int()))
      case 3: .double(double())
      default: .double([Double.nan, .infinity, -.infinity][Int(random.next() % 3)])
      }
    }
    let states: [CrashReport.Thread.State] = [
      .crashed, .captured, .noAnswer, .notAsked, .alsoCrashed, .requesting, .unknown,
    ]
    let kinds: [CrashReport.Kind] = [.crash, .abnormalTermination, .nonFatal, .hang]
    var attributes: [String: AttributeValue] = [:]
    for index in 0..<Int(random.next() % 60) { attributes["\(text().prefix(8))\(index)"] = attribute() }
    var resource: [String: String] = [:]
    for _ in 0..<Int(random.next() % 12) { resource[text()] = text() }
    return CrashReport(
      id: text(), kind: kinds[Int(random.next() % 4)], exceptionType: text(), exceptionMessage: text(),
      exceptionStacktrace: text(), threadID: maybe(int()), threadName: maybe(text()), sessionID: text(),
      reportingSessionID: maybe(text()), timeUnixNano: uint64(), time: text(), observedTimeUnixNano: uint64(),
      observedTime: text(),
      signal: maybe(
        .init(
          number: Int32.min, name: text(), code: Int32.max, codeName: text(), faultAddress: text(),
          senderPID: maybe(-1), senderUID: maybe(UInt32(truncatingIfNeeded: random.next())))),
      registers: registers(), frames: frames(70),
      modules: (0..<Int(random.next() % 30)).map { _ in
        LoadedModule(
          path: text(), loadBias: random.next(),
          buildID: (0..<Int(random.next() % 21)).map { _ in UInt8(truncatingIfNeeded: random.next()) },
          start: uint64(), end: uint64(), textStart: uint64(), textEnd: uint64(), foundAtCrash: flag(),
          unloaded: flag())
      },
      resource: resource, attributes: attributes,
      breadcrumbs: .init(
        attachment: maybe(fileName(text())), count: int(), valid: int(), torn: int(), overwritten: int(),
        empty: int(),
        lastMessage: maybe(text()), timesCalibrated: flag()),
      attachments: (0..<Int(random.next() % 4)).map { _ in
        .init(name: fileName(text()), contentType: text(), size: int(), omittedReason: maybe(text()))
      },
      damage: (0..<Int(random.next() % 4)).map { _ in text() },
      evidence: (0..<Int(random.next() % 4)).map { _ in text() }, handlerDurationNanoseconds: maybe(uint64()),
      threads: maybe(
        (0..<Int(random.next() % 40)).map { _ in
          CrashReport.Thread(
            id: int(), name: maybe(text()), state: states[Int(random.next() % 7)], crashed: flag(),
            signal: maybe(text()), registers: maybe(registers()), frames: frames(70))
        }),
      threadsNotRecorded: maybe(int()),
      trace: maybe(
        TraceContext(
          traceID: String(repeating: "0", count: 16)
            + String(CrashReport.hex(random.next() | 1 << 60).dropFirst(2)),
          spanID: "00f067aa0ba902b7", flags: UInt8(truncatingIfNeeded: random.next()))!),
      traceBreadcrumb: maybe(
        .init(
          threadID: UInt32(truncatingIfNeeded: random.next()), threadSequence: UInt32.max, message: text(),
          time: text())))
  }
}

extension AttributeValue {
  /// A double's sign (to tell -0.0 from 0.0, which `==` does not).
  fileprivate var doubleSign: FloatingPointSign? {
    if case .double(let number) = self { return number.sign }
    return nil
  }
}
