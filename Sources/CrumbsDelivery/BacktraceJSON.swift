// BacktraceJSON.swift — a CrashReport as the JSON body of Backtrace's crash submission format
// (the "Backtrace I/O JSON format" of the Error Reporting API: `POST /post?format=json`), in the
// shape a Backtrace server can symbolicate and group itself:
//
//   uuid, timestamp (s), lang, langVersion, agent, agentVersion   the required header fields
//   threads {key: {name, fault, stack: [frame]}}, mainThread       built from `BacktraceThread`s
//                                                                  (today the faulting one);
//                                                                  Crumbs adds `state` and `wait`
//   frame: funcName (the short function name), address (decimal string), library (module file
//          name), debug_identifier (the module's, see below), guessed_frame (found by stack
//          scanning), faulted (the faulting frame), sourceCode (an id into `sourceCode`), line
//          and column when symbolicated, registers on the faulting frame; `symbol` (the whole
//          demangled name) and `inlined` (true on a call inlined into the next frame, which
//          has the same address) are Crumbs' own additions
//   arch {name, registers {name: "u64"}}                           the types of those registers
//   modules [{start (decimal string), size, code_file, debug_file, debug_identifier}]
//   sourceCode {id: {path, text, startLine, startColumn}}          the files frames name, with
//                                                                  the lines of source around a
//                                                                  frame's when the report has
//                                                                  them (one entry per excerpt)
//   classifiers [exception type]
//   attributes  flat strings, numbers and booleans: the report's resource, Backtrace's usual
//               names (`application`, `application.version` = the crashed session's
//               service.version, `application.session`, `guid`, `uname.*`, `hostname`),
//               error.message, error.type ("Crash", "Exception", "Low Memory" for a likely
//               OOM), the app's attributes as typed, and the grouping hint: `_mod_fingerprint`
//               (the SHA-256 of CrashReport.signature) with `crumbs.signature` (the signature)
//   annotations structured extras (Crumbs, Signal, Registers, Modules with the full build IDs,
//               Open operations: the ledger's operations open at the death, oldest first, with
//               its capacity and what it could not hold or read); the counts and the operation
//               marked as the crashing thread's are attributes too (`crumbs.open_operations.*`,
//               the OTLP record's names: OpenOperationsDelivery.swift)
//
// A module's `debug_identifier` is its GNU build ID in the form Breakpad symbol files (and so
// Backtrace's symbol store) name ELF files by: the first 16 bytes as a GUID (the first three
// fields byte-swapped), upper-case hex, then the age "0".
//
// Entry points: BacktraceJSON.body(for:trail:omitted:) (BacktraceDestination calls it) →
// thread(of:) → frame(_:…). Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder
import CrumbsReports

/// One thread as Backtrace's `threads` map holds it.
package struct BacktraceThread {
  /// The key in `threads` (and `mainThread` for the faulting one): unique per report.
  package var key: String
  package var name: String
  package var fault: Bool
  package var frames: [CrashReport.Frame]
  /// Register name → value, on the thread's first frame.
  package var registers: [CrashReport.Register]
  /// How the crash handler found it, when not simply stopped and read (`did_not_answer`, …).
  package var state: String? = nil
  /// What it was blocked in at crash time (`ThreadWait.activity`), when the record says.
  package var wait: String? = nil
}

package enum BacktraceJSON {
  /// The frame keys the schema defines, and the two Crumbs adds (`symbol`, `inlined`).
  package static let frameKeys: Set<String> = [
    "funcName", "address", "library", "debug_identifier", "guessed_frame", "faulted", "sourceCode",
    "line", "column", "registers", "symbol", "inlined",
  ]

  /// The JSON body (see the file comment).
  package static func body(for report: CrashReport, trail: [Breadcrumb], omitted: [String]) -> [UInt8] {
    let threads = threads(of: report)
    let main = threads.first { $0.fault } ?? threads[0]
    let files = sourceFiles(threads)
    let guessed = callersAreGuessed(report)
    let modulesByBuildID = Dictionary(
      report.modules.map { ($0.buildIDHex, $0) }, uniquingKeysWith: { first, _ in first })
    var json = JSONWriter()
    json.object { object in
      object.field("uuid", uuid(for: report.id))
      object.field("timestamp", report.timeUnixNano / 1_000_000_000)
      object.field("lang", "swift")
      object.field(
        "langVersion", report.resource["process.runtime.version"] ?? ProcessAttributes.swiftVersion)
      object.field("agent", "crumbs")
      object.field("agentVersion", CrumbsVersion.string)
      object.field("mainThread", main.key)
      object.object("threads") { map in
        for thread in threads {
          map.object(thread.key) { fields in
            fields.field("name", thread.name)
            fields.field("fault", thread.fault)
            if let state = thread.state { fields.field("state", state) }
            if let wait = thread.wait { fields.field("wait", wait) }
            fields.array("stack") { stack in
              for (position, frame) in thread.frames.enumerated() {
                stack.object { fields in
                  Self.frame(
                    frame, into: &fields, faulted: thread.fault && position == 0 && report.kind == .crash,
                    guessed: frame.guessed || (guessed && position > 0),
                    sourceID: files[sourceKey(frame)],
                    debugIdentifier: frame.buildID.flatMap { modulesByBuildID[$0] }.map(debugIdentifier(of:))
                      ?? frame.buildID.flatMap(debugIdentifier(hex:)),
                    registers: position == 0 ? thread.registers : [])
                }
              }
            }
          }
        }
      }
      let registers = threads.flatMap(\.registers)
      if !registers.isEmpty {
        object.object("arch") { arch in
          arch.field("name", archName(report.resource["host.arch"]))
          arch.object("registers") { types in
            var seen: Set<String> = []
            for register in registers where seen.insert(register.name).inserted {
              types.field(register.name, "u64")
            }
          }
        }
      }
      if !report.modules.isEmpty {
        object.array("modules") { modules in
          for module in report.modules {
            modules.object { fields in
              fields.field("start", String(module.start))
              fields.field("size", module.end >= module.start ? module.end - module.start : 0)
              fields.field("code_file", module.path)
              fields.field("debug_file", module.name)
              if !module.buildID.isEmpty { fields.field("debug_identifier", debugIdentifier(of: module)) }
            }
          }
        }
      }
      if !files.isEmpty {
        let excerpts = sourceExcerpts(threads)
        object.object("sourceCode") { sources in
          for (key, id) in files.sorted(by: { Int($0.value) ?? 0 < Int($1.value) ?? 0 }) {
            sources.object(id) { entry in
              guard let frame = excerpts[key], let path = frame.file else { return }
              entry.field("path", path)
              // The lines around the frame's, when the report carries them: Backtrace shows
              // `text` from `startLine` on, without fetching the file.
              if let source = frame.source {
                entry.field("text", source.lines.joined(separator: "\n"))
                entry.field("startLine", source.startLine)
                entry.field("startColumn", 1)
              }
            }
          }
        }
      }
      object.array("classifiers") { $0.append(report.exceptionType) }
      object.object("attributes") { attributes in
        for (key, value) in self.attributes(for: report, trail: trail) {
          switch value {
          case .string(let text): attributes.field(key, text)
          case .number(let number): attributes.field(key, number)
          case .double(let number): attributes.field(key, number)
          case .bool(let flag): attributes.field(key, flag)
          }
        }
      }
      object.object("annotations") { annotations(report, omitted: omitted, into: &$0) }
    }
    return json.bytes
  }

  /// The faulting (or reporting) thread first, then every other thread the crash record holds
  /// (a version 3 record: keyed by thread id; `fault` only on the first).
  package static func threads(of report: CrashReport) -> [BacktraceThread] {
    let first = thread(of: report)
    let others = (report.threads ?? []).filter { !$0.crashed && String($0.id) != first.key }.map { other in
      BacktraceThread(
        key: String(other.id), name: other.name ?? "thread-\(other.id)", fault: false, frames: other.frames,
        registers: other.registers ?? [], state: other.state == .captured ? nil : other.state.description,
        wait: other.wait?.activity)
    }
    return [first] + others
  }

  /// The faulting (or reporting) thread.
  package static func thread(of report: CrashReport) -> BacktraceThread {
    let name =
      report.threadName.flatMap { $0.isEmpty ? nil : $0 } ?? report.threadID.map { "thread-\($0)" } ?? "main"
    return BacktraceThread(
      key: report.threadID.map(String.init) ?? name, name: name, fault: true, frames: report.frames,
      registers: report.registers)
  }

  /// One stack frame (see the file comment).
  static func frame(
    _ frame: CrashReport.Frame, into json: inout JSONObject, faulted: Bool, guessed: Bool, sourceID: String?,
    debugIdentifier: String?, registers: [CrashReport.Register]
  ) {
    json.field(
      "funcName",
      frame.function ?? frame.moduleOffset.map { "\(Syscall.baseName(of: frame.module ?? "?"))+\($0)" }
        ?? frame.address)
    if let address = hexValue(frame.address) { json.field("address", String(address)) }
    if let module = frame.module { json.field("library", Syscall.baseName(of: module)) }
    if let debugIdentifier { json.field("debug_identifier", debugIdentifier) }
    json.field("guessed_frame", guessed)
    json.field("faulted", faulted)
    if let sourceID { json.field("sourceCode", sourceID) }
    if let line = frame.line { json.field("line", String(line)) }
    if let column = frame.column { json.field("column", String(column)) }
    if frame.isInlined { json.field("inlined", true) }
    if let symbol = frame.symbol, symbol != frame.function { json.field("symbol", symbol) }
    if !registers.isEmpty {
      json.object("registers") { values in
        for register in registers {
          values.field(register.name, hexValue(register.value).map { String($0) } ?? register.value)
        }
      }
    }
  }

  /// Whether every caller (every frame after the first) is to be marked guessed: only for a
  /// report made before frames said how they were found (`Frame.foundBy`), which kept a stack
  /// scan as evidence for the whole stack. A newer report marks its guessed frames one by one.
  static func callersAreGuessed(_ report: CrashReport) -> Bool {
    let framesSayHow = (report.frames + (report.threads ?? []).flatMap(\.frames)).contains {
      $0.foundBy != nil
    }
    return !framesSayHow && report.evidence.contains(CrashReportBuilder.stackScannedEvidence)
  }

  /// `sourceCode` entry (`sourceKey`) → the id frames name it by (1, 2, … in order of first
  /// use). An entry is a source file, or, for a frame with lines of source, that file with
  /// those lines: Backtrace's entry holds one piece of text and the line it starts on.
  static func sourceFiles(_ threads: [BacktraceThread]) -> [String: String] {
    var ids: [String: String] = [:]
    for frame in threads.flatMap(\.frames) where frame.file != nil {
      let key = sourceKey(frame)
      if ids[key] == nil { ids[key] = String(ids.count + 1) }
    }
    return ids
  }

  /// A frame of each `sourceCode` entry, by key.
  static func sourceExcerpts(_ threads: [BacktraceThread]) -> [String: CrashReport.Frame] {
    var frames: [String: CrashReport.Frame] = [:]
    for frame in threads.flatMap(\.frames) where frame.file != nil {
      let key = sourceKey(frame)
      if frames[key] == nil { frames[key] = frame }
    }
    return frames
  }

  /// The `sourceCode` entry a frame names: its file, with its lines' start and count when it
  /// carries lines (two frames with the same lines share one).
  static func sourceKey(_ frame: CrashReport.Frame) -> String {
    guard let file = frame.file else { return "" }
    guard let source = frame.source else { return file }
    return file + "\u{0}\(source.startLine)\u{0}\(source.lines.count)"
  }

  /// The module's build ID as Breakpad and Backtrace name ELF debug files (see the file comment).
  package static func debugIdentifier(of module: LoadedModule) -> String {
    debugIdentifier(buildID: module.buildID)
  }

  package static func debugIdentifier(buildID: [UInt8]) -> String {
    var bytes = Array(buildID.prefix(16))
    bytes += [UInt8](repeating: 0, count: 16 - bytes.count)
    let guid = bytes[0..<4].reversed() + bytes[4..<6].reversed() + bytes[6..<8].reversed() + bytes[8..<16]
    return LoadedModule.hex(Array(guid)).uppercased() + "0"
  }

  static func debugIdentifier(hex: String) -> String? {
    guard let bytes = [UInt8](hexDigits: hex) else { return nil }
    return debugIdentifier(buildID: bytes)
  }

  /// `0x…` → its value.
  static func hexValue(_ text: String) -> UInt64? {
    text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : nil
  }

  /// Backtrace's architecture names.
  static func archName(_ hostArch: String?) -> String {
    switch hostArch {
    case "amd64", "x86_64": "x64"
    case "arm64", "aarch64": "arm64"
    case let other?: other
    case nil: "unknown"
    }
  }

  /// A value in `attributes`: Backtrace takes strings, numbers and booleans.
  enum AttributeValue: Equatable {
    case string(String)
    case number(Int64)
    case double(Double)
    case bool(Bool)

    /// An app attribute as its type says.
    init(_ value: CrumbsReports.AttributeValue) {
      switch value {
      case .string(let text): self = .string(text)
      case .bool(let flag): self = .bool(flag)
      case .int(let number): self = .number(number)
      case .double(let number): self = .double(number)
      }
    }
  }

  /// Backtrace's modifier attribute that sets the fingerprint it groups by (it "must be sha256"):
  /// the SHA-256 of the report's signature (CrashReport.signatureDigest), so two crashes of one
  /// bug group together as the store groups them. The readable signature goes with it as
  /// `crumbs.signature`.
  static let fingerprintKey = "_mod_fingerprint"

  /// Backtrace's `error.type`: what kind of error its views group by.
  static func errorType(_ report: CrashReport) -> String {
    switch report.kind {
    case .nonFatal: "Exception"
    case .crash: "Crash"
    case .hang: "Hang"
    case .abnormalTermination: report.exceptionType == "OutOfMemory" ? "Low Memory" : "Crash"
    }
  }

  /// The flat attribute map, sorted by key.
  static func attributes(for report: CrashReport, trail: [Breadcrumb]) -> [(String, AttributeValue)] {
    var attributes: [String: AttributeValue] = [:]
    for (key, value) in report.resource { attributes[key] = .string(value) }
    let derived: [(String, String)] = [
      ("application", "service.name"), ("application.version", "service.version"),
      ("uname.machine", "host.arch"), ("uname.release", "os.version"),
      ("uname.version", "crumbs.os.kernel_build"),
      ("hostname", "host.name"),
    ]
    for (name, source) in derived {
      if let value = report.resource[source] { attributes[name] = .string(value) }
    }
    attributes["uname.sysname"] = .string("Linux")
    if let pid = report.resource["process.pid"].flatMap({ Int64($0) }) {
      attributes["process.id"] = .number(pid)
    }
    for (key, value) in report.attributes { attributes[key] = AttributeValue(value) }
    attributes["error.message"] = .string(report.exceptionMessage)
    attributes["error.type"] = .string(errorType(report))
    attributes["application.session"] = .string(report.sessionID)
    attributes["guid"] = .string(guid(report))
    attributes["crumbs.exception.type"] = .string(report.exceptionType)
    attributes["crumbs.report.id"] = .string(report.id)
    attributes["crumbs.report.kind"] = .string(report.kind.rawValue)
    attributes["session.id"] = .string(report.sessionID)
    if let thread = report.threadID { attributes["thread.id"] = .number(Int64(thread)) }
    if let signal = report.signal { attributes["fault.address"] = .string(signal.faultAddress) }
    attributes["breadcrumbs.lastId"] = .number(Int64(trail.count))
    attributes[OTLPDestination.signatureKey] = .string(report.signature)
    attributes[fingerprintKey] = .string(report.signatureDigest)
    // The open operations' scalars (Backtrace indexes flat values; the list is an annotation).
    for attribute in OTLPDestination.openOperationAttributes(report) {
      switch attribute.value {
      case .int(let number): attributes[attribute.key] = .number(number)
      case .string(let text): attributes[attribute.key] = .string(text)
      default: break
      }
    }
    return attributes.sorted { $0.key < $1.key }
  }

  /// Backtrace's per-machine identifier: a UUID derived from the host (its `host.id`, else its
  /// name), the same for every report of the machine and never the name itself.
  static func guid(_ report: CrashReport) -> String {
    uuid(for: "guid:" + (report.resource["host.id"] ?? report.resource["host.name"] ?? "unknown"))
  }

  static func annotations(_ report: CrashReport, omitted: [String], into annotations: inout JSONObject) {
    annotations.object("Crumbs") { crumbs in
      crumbs.field("report.id", report.id)
      crumbs.field("kind", report.kind.rawValue)
      crumbs.field("time", report.time)
      crumbs.field("observedTime", report.observedTime)
      for (key, values) in [
        ("damage", report.damage), ("evidence", report.evidence), ("omittedAttachments", omitted),
      ] {
        crumbs.array(key) { array in
          for value in values { array.append(value) }
        }
      }
      crumbs.object("trail") { summary in
        summary.field("count", report.breadcrumbs.count)
        summary.field("valid", report.breadcrumbs.valid)
        summary.field("torn", report.breadcrumbs.torn)
        summary.field("overwritten", report.breadcrumbs.overwritten)
      }
    }
    if let signal = report.signal {
      annotations.object("Signal") { fields in
        fields.field("number", signal.number)
        fields.field("name", signal.name)
        fields.field("code", signal.code)
        fields.field("codeName", signal.codeName)
        fields.field("faultAddress", signal.faultAddress)
        if let sender = signal.senderPID { fields.field("senderPid", sender) }
      }
    }
    if !report.registers.isEmpty {
      annotations.object("Registers") { registers in
        for register in report.registers { registers.field(register.name, register.value) }
      }
    }
    if !report.modules.isEmpty {
      annotations.array("Modules") { modules in
        for module in report.modules {
          modules.object { fields in
            fields.field("path", module.path)
            fields.field("loadAddress", CrashReport.hex(module.loadBias))
            if !module.buildID.isEmpty { fields.field("buildId", module.buildIDHex) }
          }
        }
      }
    }
    if let open = report.openOperations {
      annotations.object("Open operations") { ledger in
        ledger.field("count", open.operations.count)
        ledger.field("capacity", open.capacity)
        ledger.field("notHeld", open.notHeld)
        ledger.field("unreadable", open.unreadable)
        if let damage = open.damage { ledger.field("damage", damage) }
        let listed = open.operations.prefix(OTLPDestination.maxListedOperations)
        if listed.count < open.operations.count {
          ledger.field("omitted", open.operations.count - listed.count)
        }
        ledger.array("operations") { list in
          for operation in listed { list.object { Self.operation(operation, into: &$0) } }
        }
      }
    }
    annotations.field("Stacktrace", report.exceptionStacktrace)
  }

  /// One open operation in the `Open operations` annotation.
  static func operation(_ operation: CrashReport.OpenOperations.Operation, into fields: inout JSONObject) {
    fields.field("name", operation.name)
    fields.field("kind", operation.kind)
    if let trace = operation.traceID { fields.field("traceId", trace) }
    if let span = operation.spanID { fields.field("spanId", span) }
    if let parent = operation.parentSpanID { fields.field("parentSpanId", parent) }
    fields.field("startTime", operation.startTime)
    fields.field("ageMs", operation.ageNanoseconds / 1_000_000)
    fields.field("threadId", operation.threadID)
    if let marked = operation.onCrashingThread { fields.field("onCrashingThread", marked) }
    if !operation.attributes.isEmpty {
      fields.object("attributes") { attributes in
        // A JSON object names each key once: the first of a repeated key is kept.
        var named = Set<String>()
        for attribute in operation.attributes where named.insert(attribute.key).inserted {
          attributes.field(attribute.key, attribute.value)
        }
      }
    }
  }

  /// The report id when it is a UUID (session ids are); otherwise a UUID derived from it, the
  /// same on every attempt, so Backtrace can dedupe resubmissions.
  static func uuid(for id: String) -> String {
    if let uuid = SessionID(id) { return uuid.description }
    var bytes: [UInt8] = []
    for seed: UInt64 in [0xcbf2_9ce4_8422_2325, 0x8422_2325_cbf2_9ce4] {
      var hash = seed
      for byte in id.utf8 {
        hash ^= UInt64(byte)
        hash = hash &* 0x0000_0100_0000_01b3
      }
      for shift in stride(from: 56, through: 0, by: -8) {
        bytes.append(UInt8(truncatingIfNeeded: hash >> UInt64(shift)))
      }
    }
    bytes[6] = (bytes[6] & 0x0F) | 0x80  // version 8: custom
    bytes[8] = (bytes[8] & 0x3F) | 0x80
    return SessionID(bytes: bytes)!.description
  }
}
