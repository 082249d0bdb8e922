// CrashReport.swift — what a crash (or an abnormal end, or a non-fatal error) becomes.
//
// The JSON keys of the exception, thread and session fields are OpenTelemetry's semantic
// convention names (`exception.type`, `thread.id`, `session.id`, …) so the report maps straight
// onto an OTLP log record; `resource` holds OTel resource attribute names too.

import CrumbsPlatform
import CrumbsRecorder

/// A report, as stored in `reports/<state>/<id>/report.json`.
public struct CrashReport: Codable, Sendable, Equatable {
  /// What ended (or troubled) the session.
  public enum Kind: String, Codable, Sendable {
    /// A fatal signal, recorded by the crash handler.
    case crash
    /// The process vanished without a crash record: SIGKILL, the OOM killer, power loss.
    case abnormalTermination = "abnormal_termination"
    /// Reported by the app while it kept running.
    case nonFatal = "non_fatal"
    /// A watch stalled past its threshold while the process lived on: every
    /// thread's stack, taken without stopping the process.
    case hang
  }

  /// The fatal signal, for crashes.
  public struct SignalInfo: Codable, Sendable, Equatable {
    public var number: Int32
    public var name: String
    public var code: Int32
    public var codeName: String
    /// Hex, e.g. `0x0`.
    public var faultAddress: String
    /// For signals sent by a process (kill, tgkill, sigqueue).
    public var senderPID: Int32?
    public var senderUID: UInt32?
  }

  /// One register of the crashing thread.
  public struct Register: Codable, Sendable, Equatable {
    public var name: String
    /// Hex, e.g. `0x00007ffd1c2a3b40`.
    public var value: String
  }

  /// One stack frame, symbolicated as far as the device could.
  public struct Frame: Codable, Sendable, Equatable {
    public var index: Int
    /// Hex runtime address.
    public var address: String
    public var module: String?
    /// Hex offset in the module (ELF virtual address), with `buildID` what a server needs.
    public var moduleOffset: String?
    public var buildID: String?
    /// The function as a person reads it: `TestCrash.writeThroughNull()`, `closure #1 in
    /// Cache.lookup(_:)`, `std::vector<int>::push_back(int const&)`, `memcpy` (see
    /// `symbol` for the whole name). What the stack text shows.
    public var function: String?
    /// The whole name: the demangled symbol with its module, parameter and return types and
    /// how the compiler made it (`function signature specialization <Arg[0] = Dead> of static
    /// Crumbs.TestCrash.writeThroughNull() -> Swift.Never`); a C symbol as it is. Reports made
    /// before this field existed have the whole (simplified) name in `function` and none here.
    public var symbol: String?
    public var symbolOffset: UInt64?
    /// Source file, line and column from the module's DWARF line table: where the address lies
    /// in `function`, or — in a frame that inlined calls at its address — where the outermost
    /// of those calls was written.
    public var file: String?
    public var line: Int?
    /// Absent in reports made before this field existed, and where DWARF has no column.
    public var column: Int? = nil
    /// Why a frame is not (fully) symbolicated: "module gone", "build id changed", "stripped".
    public var note: String?
    /// How the crash handler found this frame; nil for a frame read from a frame record (or the
    /// faulting PC), and for every frame of a report made before this field existed.
    public var foundBy: FrameOrigin? = nil
    /// True for a call the compiler inlined at this address (DWARF's inlined subroutine): not a
    /// function of its own on the stack, but shown as one, before the frame it was inlined into
    /// (the next frame not inlined, with the same address), as `llvm-symbolizer --inlines`
    /// shows it. Nil for every other frame, and in reports made before this field existed.
    public var inlined: Bool? = nil
    /// The lines of source around `line`, for a frame in the app's code whose source file was
    /// found when the report was made (SourceContext.swift), redacted as messages are. Nil for
    /// every other frame, and in reports made before this field existed.
    public var source: SourceLines? = nil

    /// Whether this frame is a call inlined into the next one (`inlined`).
    public var isInlined: Bool { inlined == true }

    /// Whether the frame was guessed by a stack scan (it may be a stale return address).
    public var guessed: Bool { foundBy == .guessed }
  }

  /// Lines of a source file around a frame's line (`Frame.source`).
  public struct SourceLines: Codable, Sendable, Equatable {
    /// The line number of `lines[0]` (1-based).
    public var startLine: Int
    /// The lines, without their line ends; a long one cut, ending with "…".
    public var lines: [String]
    /// Where they were read: "file" (the path DWARF names, on the machine that made the
    /// report), or another SourceProvider's name.
    public var origin: String
    /// True when the file was modified after the module was built: the lines may not be the
    /// ones compiled. Nil otherwise.
    public var newerThanModule: Bool? = nil

    public init(startLine: Int, lines: [String], origin: String, newerThanModule: Bool? = nil) {
      self.startLine = startLine
      self.lines = lines
      self.origin = origin
      self.newerThanModule = newerThanModule
    }
  }

  /// How a frame was found, when not from a frame record (`Frame.foundBy`).
  public enum FrameOrigin: String, Codable, Sendable, Equatable {
    /// Scanning the stack for return addresses: it may be a stale one.
    case guessed
    /// The module's .eh_frame call frame information (code without frame pointers).
    case cfi
    /// A Swift async caller's resume point, from the task's async context chain.
    case async
    /// The caller's return address at [sp] / in LR, after a call through a bad pointer or a
    /// fault in a function that keeps no frame.
    case inserted

    /// The origin of a frame the crash handler marked so (the strongest doubt first).
    public init?(_ marks: FrameMarks) {
      if marks.contains(.guessed) {
        self = .guessed
      } else if marks.contains(.inserted) {
        self = .inserted
      } else if marks.contains(.async) {
        self = .async
      } else if marks.contains(.cfi) {
        self = .cfi
      } else {
        return nil
      }
    }
  }

  /// One thread of the crashed process (reports of version 3 crash records).
  public struct Thread: Codable, Sendable, Equatable {
    /// What became of a thread at crash time (or in a live capture).
    public enum State: String, Codable, Sendable {
      /// The thread that crashed: always first, with `crashed` true.
      case crashed
      /// Stopped by the crash handler: frames from where it was.
      case captured
      /// Did not answer the crash handler in time (signal blocked, stopped, busy machine).
      case noAnswer = "did_not_answer"
      /// The crash handler could not ask it (its capture signal had been taken, or the thread
      /// runs under a seccomp filter: `notSignalled` says why).
      case notAsked = "not_asked"
      /// Crashed as well, while the first crash was recorded: frames of its own fault.
      case alsoCrashed = "crashed_too"
      /// The thread that took a live capture (a hang report, a thread dump): its own frames
      /// from where it asked, all return addresses.
      case requesting
      case unknown
    }
    /// Kernel thread id.
    public var id: Int
    public var name: String?
    public var state: State
    /// The crashing thread (the report's `thread.id`).
    public var crashed: Bool
    /// The signal of a thread that crashed too.
    public var signal: String?
    /// Its registers (the crashing thread's are the report's `registers`).
    public var registers: [Register]?
    public var frames: [Frame]
    /// Why no signal asked it, each reason named: "seccomp" (it runs under a seccomp filter,
    /// never signalled), "in_system_call" (a live capture walked it where it blocks, without
    /// interrupting its call), "blocks_signals", "stopped", "no_signal". Nil when it was asked.
    public var notSignalled: [String]?
    /// With "in_system_call": the number of the system call it was blocked in.
    public var blockedSystemCall: Int?
    /// What it was blocked in when the crash handler listed it: its system call and, in a futex
    /// wait, the lock and its owner (crash reports of version 4 records; nil otherwise).
    public var wait: ThreadWait?

    public init(
      id: Int, name: String?, state: State, crashed: Bool, signal: String? = nil,
      registers: [Register]? = nil,
      frames: [Frame], notSignalled: [String]? = nil, blockedSystemCall: Int? = nil, wait: ThreadWait? = nil
    ) {
      self.id = id
      self.name = name
      self.state = state
      self.crashed = crashed
      self.signal = signal
      self.registers = registers
      self.frames = frames
      self.notSignalled = notSignalled
      self.blockedSystemCall = blockedSystemCall
      self.wait = wait
    }
  }

  /// The breadcrumb trail: what is in the attachment, and what the ring said about itself.
  public struct Trail: Codable, Sendable, Equatable {
    /// Attachment file name (`breadcrumbs.jsonl.lz4`), nil when there were no breadcrumbs.
    public var attachment: String?
    public var count: Int
    public var valid: Int
    public var torn: Int
    public var overwritten: Int
    public var empty: Int
    /// The newest breadcrumb's message (the crash handler's own final one excluded).
    public var lastMessage: String?
    /// False when times could not be calibrated (see RingContents.timesAreCalibrated).
    public var timesCalibrated: Bool
  }

  /// A file attached to the report, or one that was left out and why.
  public struct Attachment: Codable, Sendable, Equatable {
    public var name: String
    public var contentType: String
    public var size: Int
    /// Set when the attachment was left out (too large, unreadable).
    public var omittedReason: String?

    public init(name: String, contentType: String, size: Int, omittedReason: String? = nil) {
      self.name = name
      self.contentType = contentType
      self.size = size
      self.omittedReason = omittedReason
    }
  }

  public var id: String
  public var kind: Kind
  public var exceptionType: String
  public var exceptionMessage: String
  public var exceptionStacktrace: String
  public var threadID: Int?
  public var threadName: String?
  /// The session that crashed.
  public var sessionID: String
  /// The session that read it (a later launch), for crashes and abnormal ends.
  public var reportingSessionID: String?
  /// When it happened, ns since the epoch, and as ISO 8601.
  public var timeUnixNano: UInt64
  public var time: String
  /// When this report was made.
  public var observedTimeUnixNano: UInt64
  public var observedTime: String
  public var signal: SignalInfo?
  public var registers: [Register]
  public var frames: [Frame]
  /// The loaded modules of the crashed (or reporting) process.
  public var modules: [LoadedModule]
  /// Process, app and OS attributes (OTel resource names: `service.name`, `process.pid`, …).
  public var resource: [String: String]
  /// The app's own attributes (`setAttribute`, `setUser`, a report's own), typed. Reports
  /// stored before attributes were typed hold strings, and read as strings.
  public var attributes: [String: AttributeValue]
  public var breadcrumbs: Trail
  public var attachments: [Attachment]
  /// What was damaged in the inputs this report was built from.
  public var damage: [String]
  /// Why a cause was inferred (e.g. the evidence for "likely out of memory").
  public var evidence: [String]
  /// How long the crash handler ran, measured inside it.
  public var handlerDurationNanoseconds: UInt64?
  /// Every thread of the process at crash time, the crashing one first; nil for reports
  /// without a thread table (older crash records, abnormal ends, non-fatal reports).
  public var threads: [Thread]? = nil
  /// Threads the process had that the crash record had no room for.
  public var threadsNotRecorded: Int? = nil
  /// The W3C trace the report belongs to: for a non-fatal report, the span current when it was
  /// made; for a crash, that of the crashing thread's last traced breadcrumb (`traceBreadcrumb`).
  public var trace: TraceContext? = nil
  /// For a crash: the breadcrumb `trace` was taken from.
  public var traceBreadcrumb: TraceBreadcrumb? = nil
  /// The operations (requests, jobs) open in the in-flight ledger when the process died, oldest
  /// first; nil when its ring had no ledger (or for reports that do not read one).
  public var openOperations: OpenOperations? = nil

  /// What the in-flight ledger held at the death.
  public struct OpenOperations: Codable, Sendable, Equatable {
    public var operations: [Operation]
    /// How many the ledger holds at once.
    public var capacity: Int
    /// Begun while the ledger was full: open at some point, never recorded (some may have been
    /// open at the death).
    public var notHeld: UInt64
    /// Entries being written when the process died: not trusted, only counted.
    public var unreadable: Int
    /// Why the ledger could not be read at all; nil when it was.
    public var damage: String?

    public struct Operation: Codable, Sendable, Equatable {
      public var name: String
      /// `server`, `consumer`, `job`, `internal`.
      public var kind: String
      public var traceID: String?
      public var spanID: String?
      public var parentSpanID: String?
      public var startTimeUnixNano: UInt64
      /// ISO 8601.
      public var startTime: String
      /// How long it had been open at the death.
      public var ageNanoseconds: UInt64
      /// The thread that began it.
      public var threadID: UInt32
      public var attributes: [Breadcrumb.Attribute]
      /// Began on the thread that crashed (a thread-based guess for async code, which may have
      /// moved: docs/client.md, "Open operations"); nil when the end was not a crash on a known thread.
      public var onCrashingThread: Bool?

      enum CodingKeys: String, CodingKey {
        case name, kind, attributes
        case traceID = "trace_id"
        case spanID = "span_id"
        case parentSpanID = "parent_span_id"
        case startTimeUnixNano = "start_time_unix_nano"
        case startTime = "start_time"
        case ageNanoseconds = "age_ns"
        case threadID = "thread.id"
        case onCrashingThread = "on_crashing_thread"
      }
    }

    enum CodingKeys: String, CodingKey {
      case operations, capacity, unreadable, damage
      case notHeld = "not_held"
    }

  }

  /// The breadcrumb a crash's trace was taken from: the crashing thread's last one that carried
  /// a trace context (see TraceContext).
  public struct TraceBreadcrumb: Codable, Sendable, Equatable {
    public var threadID: UInt32
    /// The writing thread's sequence number (orders that thread's breadcrumbs).
    public var threadSequence: UInt32
    public var message: String
    /// ISO 8601.
    public var time: String
  }

  enum CodingKeys: String, CodingKey {
    case id = "report.id"
    case kind
    case exceptionType = "exception.type"
    case exceptionMessage = "exception.message"
    case exceptionStacktrace = "exception.stacktrace"
    case threadID = "thread.id"
    case threadName = "thread.name"
    case sessionID = "session.id"
    case reportingSessionID = "crumbs.reporting_session.id"
    case timeUnixNano = "time_unix_nano"
    case time
    case observedTimeUnixNano = "observed_time_unix_nano"
    case observedTime = "observed_time"
    case signal, registers, frames, modules, resource, attributes, breadcrumbs, attachments
    case damage, evidence
    case handlerDurationNanoseconds = "crumbs.handler_duration_ns"
    case threads
    case threadsNotRecorded = "crumbs.threads_not_recorded"
    case trace = "crumbs.trace"
    case traceBreadcrumb = "crumbs.trace.breadcrumb"
    case openOperations = "crumbs.open_operations"
  }
}

extension CrashReport {
  /// Hex with a 0x prefix.
  package static func hex(_ value: UInt64) -> String { LoadedModule.hexAddress(value) }

  /// The other threads as stack text (`Thread 1235 "worker" (captured)` and its frames, at most
  /// `framesPerThread` each): what a wire format without a thread structure carries.
  package static func otherThreadsText(_ threads: [Thread], framesPerThread: Int = 16) -> String {
    threads.filter { !$0.crashed }.map { thread in
      var heading = "Thread \(thread.id)"
      if let name = thread.name { heading += " \"\(name)\"" }
      heading += " (\(thread.state.description))"
      // What it was blocked in at crash time, under its heading as jstack puts a thread's wait.
      if let wait = thread.wait { heading += "\n- " + wait.activity }
      let frames = stacktrace(Array(thread.frames.prefix(framesPerThread)))
      let more = thread.frames.count > framesPerThread ? "\n…" : ""
      return frames.isEmpty ? heading : heading + "\n" + frames + more
    }.joined(separator: "\n\n")
  }

  /// A readable multi-line stack trace from `frames`:
  /// `#0  0x… MyApp.Cache.lookup(_:) + 52 (MyApp) [file:line]`, `[inlined]` after the function of
  /// a call inlined at the address (`Frame.inlined`), and how the frame was found when not from a
  /// frame record: `{guessed}`, `{cfi}`, `{async}`, `{inserted}` (`Frame.foundBy`).
  package static func stacktrace(_ frames: [Frame]) -> String {
    frames.map { frame in
      var line = "#\(frame.index)  \(frame.address)"
      if let function = frame.function {
        line += "  \(function)"
        if let offset = frame.symbolOffset { line += " + \(offset)" }
      } else if let offset = frame.moduleOffset {
        line += "  \(offset)"
      }
      if frame.isInlined { line += " [inlined]" }
      if let module = frame.module { line += "  (\(module.split(separator: "/").last ?? ""))" }
      if let file = frame.file { line += "  \(file)" + (frame.line.map { ":\($0)" } ?? "") }
      if let note = frame.note { line += "  [\(note)]" }
      if let origin = frame.foundBy { line += "  {\(origin.rawValue)}" }
      return line
    }.joined(separator: "\n")
  }
}

extension CrashReport {
  /// What makes two reports "the same problem", for eviction (the store never evicts the newest
  /// report of a signature while older ones of it remain): the kind, the exception type
  /// (`SIGSEGV`, `SIGILL`, `AbnormalTermination`, an error's type) and the top frame in the app's
  /// own code — the first frame in the executable (`process.executable.path`) that is not
  /// Crumbs' own nor an inlined call (`Frame.inlined`), named by its function as grouped (`groupingName(of:)`: without closure
  /// numbers, generic arguments and the compiler's thunk and specialization words), else by its
  /// module offset; the first frame when none is in the executable (a crash deep in a library).
  /// Reports without frames (abnormal ends) group by kind and type alone. The message is left
  /// out on purpose: it holds addresses and values that differ between two crashes of one bug.
  public var signature: String {
    let executable = resource["process.executable.path"]
    let ownPrefixes = ["Crumbs.", "CrumbsReports.", "CrumbsRecorder.", "CrumbsDelivery.", "crumbs_"]
    func isCrumbs(_ frame: Frame) -> Bool {
      guard let function = frame.function else { return false }
      return ownPrefixes.contains { function.hasPrefix($0) || function.hasPrefix("static " + $0) }
    }
    // Inlined calls are left out: they are there only where llvm-symbolizer and the module's
    // DWARF were, and an inlined library function (an Array subscript) says less of the bug
    // than the app's function it was inlined into.
    let real = frames.filter { !$0.isInlined }
    let inApp = real.first { $0.module != nil && $0.module == executable && !isCrumbs($0) }
    let top = inApp ?? real.first { !isCrumbs($0) }
    let location = top.map { frame in
      frame.function.map(Self.groupingName(of:))
        ?? ((frame.module.map { Syscall.baseName(of: $0) } ?? "?") + "+" + (frame.moduleOffset ?? "?"))
    }
    return [kind.rawValue, exceptionType, location ?? ""].joined(separator: " | ")
  }

  /// A frame's function (`Frame.function`) as the signature names it: what stays the same when
  /// a deploy adds code around it. A Swift name loses the numbers the compiler gives by
  /// position (`closure #3 in` → `closure in`, `implicit closure #1 in`, `$defer #2`, an async
  /// function's `(2) await resume partial function for`: adding a route renumbers every closure
  /// after it), its generic arguments (`buildShopRouter<A>(_:)`, a specialization's `<Int>`:
  /// the same source either way) and the words that say how the compiler made the code
  /// (`specialized`, `merged`, `partial apply for`, `dispatch thunk of`, `static`, `@objc`).
  /// What remains — the closure's place in its function, the function, its type and argument
  /// labels — still tells two functions apart. A C++ name (`::`) is kept as it is: its template
  /// arguments name different code.
  package static func groupingName(of function: String) -> String {
    guard !function.contains("::") else { return function }
    var text = Substring(function)
    // The words in front, any number of them and in any order (`(1) await resume partial
    // function for specialized closure #2 in …`); each pass drops at least one word.
    var dropped = true
    while dropped {
      dropped = false
      let number = text.dropFirst().prefix(while: \.isNumber)
      if text.first == "(", !number.isEmpty, text.dropFirst(1 + number.count).hasPrefix(") ") {
        text = text.dropFirst(3 + number.count)
        dropped = true
      }
      for prefix in SymbolDemangler.readablePrefixes + asyncPartPrefixes
      where text.hasPrefix(prefix) && text.count > prefix.count {
        text = text.dropFirst(prefix.count)
        dropped = true
      }
    }
    var output = ""
    output.reserveCapacity(text.utf8.count)
    while let character = text.first {
      // " #12" after `closure` or `$defer`: the position among its siblings.
      let digits = text.dropFirst(2).prefix(while: \.isNumber)
      if character == " ", text.dropFirst().first == "#", !digits.isEmpty {
        text = text.dropFirst(2 + digits.count)
        continue
      }
      // A generic argument list follows a name (or another list) and opens on a type: an
      // operator's `<` (`Foo.< infix`, `<<`) does neither.
      if character == "<", let previous = output.last,
        previous.isLetter || previous.isNumber || previous == "_" || previous == ">" || previous == " ",
        let next = text.dropFirst().first, next.isLetter || next == "_" || next == "[" || next == "(",
        let end = genericListEnd(text)
      {
        text = text[end...]
        continue
      }
      output.append(character)
      text = text.dropFirst()
    }
    return output
  }

  /// The words in front of an async function's parts: one function, split at its awaits.
  static let asyncPartPrefixes = [
    "await resume partial function for ", "suspend resume partial function for ",
  ]

  /// The index after the `>` that closes the `<` `text` starts with, nil when it is not closed
  /// (`->` inside is an arrow, not a close).
  private static func genericListEnd(_ text: Substring) -> Substring.Index? {
    var depth = 0
    var previous: Character = " "
    var index = text.startIndex
    while index < text.endIndex {
      let character = text[index]
      if character == "<" { depth += 1 }
      if character == ">", previous != "-" {
        depth -= 1
        if depth == 0 { return text.index(after: index) }
      }
      previous = character
      index = text.index(after: index)
    }
    return nil
  }

  /// `signature` as 64 hex digits of its SHA-256: the grouping hint for a backend that wants a
  /// hash (Backtrace's `_mod_fingerprint` "must be sha256"). The same for every report of one
  /// bug, as the signature is.
  public var signatureDigest: String { SHA256.hexDigest(Array(signature.utf8)) }
}

extension CrashReport.Thread.State: CustomStringConvertible {
  /// As a person reads it: "crashed", "captured", "did not answer", …
  public var description: String {
    switch self {
    case .noAnswer: "did not answer"
    case .notAsked: "not asked"
    case .alsoCrashed: "crashed too"
    default: rawValue
    }
  }
}

extension CrashReport.OpenOperations {
  /// The ledger as read, aged at `death` (wall ns); no thread marked as the crashing one.
  package init(_ ledger: LedgerContents, death: UInt64) {
    operations = ledger.open.map { open in
      Operation(
        name: open.name, kind: open.kind.rawValue, traceID: open.trace?.traceID, spanID: open.trace?.spanID,
        parentSpanID: open.parentSpanID, startTimeUnixNano: open.startWallNanoseconds,
        startTime: ISO8601.string(nanoseconds: open.startWallNanoseconds),
        ageNanoseconds: death >= open.startWallNanoseconds ? death - open.startWallNanoseconds : 0,
        threadID: open.threadID, attributes: open.attributes,
        onCrashingThread: nil)
    }
    capacity = ledger.capacity
    notHeld = ledger.overflow
    unreadable = ledger.unreadable
    damage = ledger.damage
  }
}
