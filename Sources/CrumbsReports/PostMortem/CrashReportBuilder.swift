// CrashReportBuilder.swift — a crash record (+ the ring it names) becomes a CrashReport.
//
// Entry points, in call order:
//   CrashReportBuilder.crash(record:ring:…)          a signal the handler recorded
//     → Symbolicator(modules: record.modules)       the crashed process's module map
//     → symbolicate(record.frames)                  names, offsets, build IDs, notes
//     → threads(record.threads)                     every other thread's frames, named in one
//                                                   batch with the crashing thread's
//                                                   (CrashReportBuilder+Frames.swift)
//   CrashReportBuilder.abnormalTermination(ring:…)  a ring left running with no record, or
//                                                   stopped by a signal during a hang, or ended
//                                                   by a resource limit's SIGXCPU or SIGXFSZ
//     → explainUncleanEnd                            the cause the ring header proves: machine
//                                                   restart, shutdown not finished after SIGTERM,
//                                                   resource limit (CrashReportBuilder+UncleanEnds)
//     → hangSentence, hangEvidence, addHangFacts     a hang going on at the end, as the watchdog
//                                                   recorded it (CrashReportBuilder+Hang.swift;
//                                                   crashes get the evidence and facts too)
//
// Not signal-safe; never traps on a damaged record (the reader validated it).

import CrumbsPlatform
import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

package struct CrashReportBuilder {
  /// The evidence a report carries when callers were found by scanning the stack (CrashRecord
  /// `stackScanned`); Backtrace marks those frames `guessed_frame`.
  package static let stackScannedEvidence =
    "the crash was in code without frame pointers; callers were recovered by scanning the stack"

  package var attributes: [String: AttributeValue]
  package var appVersion: String?
  package var reportingSession: SessionID?
  package var symbolicatorOptions = Symbolicator.Options()
  /// Crash signals another handler had taken from the session's crash handler (names): an
  /// abnormal end may be a crash on one of them, which leaves no record.
  package var replacedCrashSignals: [String] = []
  /// A first chance the session's crash handler gave and that never came back to it, in a record
  /// without a crash (its mark, and the path of the handler's module when the table has it): the
  /// process ended inside that handler.
  package var firstChanceEnd: FirstChanceEnd?

  /// See `firstChanceEnd`.
  package struct FirstChanceEnd {
    package var mark: FirstChanceMark
    package var module: String?
    package init(mark: FirstChanceMark, module: String?) {
      self.mark = mark
      self.module = module
    }
  }
  /// The crashed session's resource as it recorded it while it ran (SessionMetadata.resource);
  /// nil when it recorded none, and the machine's facts are then read now (the report says so).
  package var sessionResource: [String: String]?
  /// Leaves `host.name` out of the report (`CrumbsConfiguration.reportsHostName` false).
  package var omitsHostName = false

  /// A report for a crash the handler recorded. `ring` is nil when the ring was unreadable.
  package func crash(record: CrashRecord, ring: RingContents?, trailSize: Int?, damage: [String])
    -> CrashReport
  {
    // Every thread's frames in one batch (the crashing thread's first): one line-info pass. An
    // async resume point is looked up at its address (a function's first instruction).
    let marks = record.frameMarks
    let others = record.threads?.threads.filter { $0.state != .crashing } ?? []
    let otherMarks = others.map { $0.frameMarks.map(FrameMarks.init(rawValue:)) }
    // The executable's package note may name where its debug files are (`debugInfoUrl`): asked
    // only where this process may fetch (`packageDebugInfo` set).
    let executable = ring?.header.executable ?? record.modules.first?.path ?? ""
    let (symbolicatorOptions, noteRefusal) = symbolicatorOptions.askingPackageNote(
      symbolicatorOptions.readsModuleFiles && symbolicatorOptions.packageDebugInfo != nil
        ? PackageNote.ofExecutable(executable, modules: record.modules) : nil)
    let named = Symbolicator(modules: record.modules, options: symbolicatorOptions)
      .symbolicate(
        backtraces: [record.frames] + others.map(\.frames),
        exact: ([marks] + otherMarks).map(Self.asyncIndices))
    let symbolicated = named[0]
    let frames = Self.frames(symbolicated, marks: marks)
    let signal = record.signal
    var message = "\(signal.codeName) at \(CrashReport.hex(signal.faultAddress))"
    if let sender = signal.senderPID {
      message =
        sender == record.pid
        ? "\(signal.codeName) raised by the process itself"
        : "\(signal.codeName) sent by pid \(sender)" + (signal.senderUID.map { " (uid \($0))" } ?? "")
    }
    if let said = Self.saidBeforeTheSignal(record) {
      message = said
    } else if let overflow = Self.stackOverflow(record) {
      message = overflow
    } else if let hint = Self.hint(signal: signal.number, frames: symbolicated) {
      message += " — " + hint
    }

    var report = base(
      id: record.sessionID.description, kind: .crash, sessionID: record.sessionID,
      time: record.crashWallNanoseconds, ring: ring, trailSize: trailSize,
      pid: record.pid, executable: executable, appName: ring?.header.appName ?? "")
    if let noteRefusal { report.evidence.append(noteRefusal) }
    report.exceptionType = signal.name
    report.exceptionMessage = message
    report.exceptionStacktrace = CrashReport.stacktrace(frames)
    if let table = record.threads {
      report.threads = Self.threads(table, crashing: record, frames: frames, others: Array(named.dropFirst()))
      report.threadsNotRecorded =
        table.seen > UInt32(table.threads.count) ? Int(table.seen) - table.threads.count : nil
      let missing = table.threads.filter { $0.state == .noAnswer }.count
      if missing > 0 {
        report.evidence.append(
          "\(missing) thread(s) did not answer the crash handler within "
            + "\(table.deadlineNanoseconds / 1_000_000) ms (signal blocked, stopped, or not scheduled): listed without frames"
        )
      }
      if table.signalTaken {
        report.damage.append(
          "another library had taken the thread capture signal: other threads are listed without frames")
      }
      if table.listingFailed { report.damage.append("the crash handler could not list the threads") }
      if table.liveCaptureBusy {
        report.damage.append(
          "a live thread capture held the threads past the crash handler's wait: only the crashing thread is listed"
        )
      }
      if table.interrupted {
        report.damage.append(
          "the crash handler faulted while walking the other threads' stacks: the thread list ends early")
      }
    }
    report.threadID = Int(record.threadID)
    report.threadName = record.threadName.isEmpty ? nil : record.threadName
    // `base` listed the open operations; a crash also names the thread they may have died on.
    if var open = report.openOperations {
      let crashing = UInt32(truncatingIfNeeded: record.threadID)
      for index in open.operations.indices {
        open.operations[index].onCrashingThread = open.operations[index].threadID == crashing
      }
      report.openOperations = open
    }
    report.signal = CrashReport.SignalInfo(
      number: signal.number, name: signal.name, code: signal.code, codeName: signal.codeName,
      faultAddress: CrashReport.hex(signal.faultAddress), senderPID: signal.senderPID,
      senderUID: signal.senderUID)
    report.registers = record.registers.map { .init(name: $0.name, value: Self.hex16($0.value)) }
    report.frames = frames
    report.modules = record.modules
    report.handlerDurationNanoseconds = record.handlerDurationNanoseconds
    // Measured at the crash, by the handler.
    report.resource["crumbs.process.uptime_ms"] = String(record.processUptimeNanoseconds / 1_000_000)
    report.resource["crumbs.host.memory.free_bytes_at_crash"] = String(record.freeMemoryBytes)
    // The machine the record was written on, not the one reading it (an aarch64 record read here).
    report.resource["host.arch"] = ProcessAttributes.normalizedArchitecture(record.architecture)
    // The package the executable says it is (its `.note.package`), when its file is still the one
    // that crashed.
    if symbolicatorOptions.readsModuleFiles,
      let note = PackageNote.ofExecutable(
        report.resource["process.executable.path"] ?? "", modules: record.modules)
    {
      report.resource = note.resourceAttributes(over: report.resource)
    }
    if let ring, let (trace, origin) = Self.lastTrace(ring.slots, thread: record.threadID) {
      report.trace = trace
      report.traceBreadcrumb = origin
    }
    report.damage = damage
    if record.isPartial {
      report.damage.append(
        "the crash handler itself faulted (signal \(record.nestedSignal ?? 0)); this record is partial")
    }
    if record.status == .incomplete {
      report.damage.append("the crash handler did not finish; fields after the last one written are missing")
    }
    if record.stackScanned {
      report.evidence.append(
        marks.contains { $0.contains(.guessed) }
          ? "some callers were recovered by scanning the stack (frames marked guessed may be stale)"
          : Self.stackScannedEvidence)
    }
    if marks.contains(where: { $0.contains(.async) }) {
      report.evidence.append("async callers were recovered from the Swift task's async context chain")
    }
    if record.modulesTorn { report.damage.append("the module table was being updated at the crash") }
    if record.swiftFatalMessageTruncated {
      report.damage.append("the Swift runtime's message was cut to fit the crash record")
    }
    if record.uncaughtException?.truncated == true {
      report.damage.append("the C++ exception's type or what() was cut to fit the crash record")
    }
    /// "a.so, b.so": the file names of the modules that `included` picks, nil when none.
    func moduleNames(_ included: (LoadedModule) -> Bool) -> String? {
      let names = record.modules.filter(included).map {
        $0.path.split(separator: "/").last.map(String.init) ?? $0.path
      }
      return names.isEmpty ? nil : names.joined(separator: ", ")
    }
    if let names = moduleNames(\.unloaded) {
      report.evidence.append(
        "modules unloaded (dlclose) since the last module scan were gone at crash time; frames in them are stale code: "
          + names)
    }
    if let names = moduleNames(\.foundAtCrash) {
      report.evidence.append(
        "modules loaded after the last module scan (dlopen) were found at crash time in /proc/self/maps: "
          + names)
    }
    if record.modulesStale, symbolicated.contains(where: { $0.note == SymbolicatedFrame.Note.noModule }) {
      report.evidence.append(
        "the module table was stale and some frames lie in no loaded module (JIT or unloaded code, or a bad address)"
      )
    }
    if record.concurrentCrash {
      report.evidence.append("\(record.threadsCrashed) threads crashed at once; the first is reported")
    }
    Self.explainLockCycle(record, into: &report)
    if record.firstChanceLooped, let mark = record.firstChance {
      let module = record.module(containing: mark.handler).map {
        " in " + ($0.path.split(separator: "/").last.map(String.init) ?? $0.path)
      }
      report.evidence.append(
        "the fault went first to a handler known to recover\(module ?? "") (\(CrashReport.hex(mark.handler))), "
          + "which returned from it \(mark.repeats) times in a row without fixing it: "
          + "a fault loop, recorded as a crash")
    }
    if let header = ring?.header {
      if let hang = Self.hangEvidence(header, ended: "crashed") { report.evidence.append(hang) }
      Self.addHangFacts(header, to: &report)
    }
    // Lines of the app's source around its frames, where the source is found (redacted with
    // the report by the processor).
    report.addSourceContext(symbolicatorOptions.effectiveSourceContext)
    return report
  }

  /// A report for a session that vanished without a crash record, or that a terminating signal
  /// ended during a hang or a resource limit's SIGXCPU or SIGXFSZ ended (the ring's `endSignal`).
  package func abnormalTermination(ring: RingContents, trailSize: Int?, cgroupRoot: String = "/sys/fs/cgroup")
    -> CrashReport
  {
    let header = ring.header
    let lastSignOfLife = ring.slots.entries.last?.wallTimeNanoseconds ?? header.createdWallNanoseconds
    var report = base(
      id: header.sessionID.description, kind: .abnormalTermination, sessionID: header.sessionID,
      time: lastSignOfLife, ring: ring, trailSize: trailSize, pid: header.pid,
      executable: header.executable, appName: header.appName)
    let evidence = OOMEvidence.gather(ring, cgroupRoot: cgroupRoot)
    report.evidence = evidence
    // A crash on a signal whose handler another handler had taken leaves no record either: the
    // report names those signals whatever else it infers.
    let replaced = replacedCrashSignals.joined(separator: ", ")
    // A hang going on at the end is the likeliest reason for the kill: said first.
    let hang = header.ongoingHang.map { Self.hangSentence($0, endSignal: header.endSignal) }
    let stoppedBy = hang == nil ? nil : header.endSignal
    if let hang, stoppedBy != nil {
      report.exceptionType = "AbnormalTermination"
      report.exceptionMessage = hang
    } else if evidence.isEmpty {
      report.exceptionType = "AbnormalTermination"
      report.exceptionMessage =
        (hang.map { $0 + ": " } ?? "")
        + "the process ended without a crash record and without a clean exit"
        + (replacedCrashSignals.isEmpty
          ? " (SIGKILL, the OOM killer, or power loss)"
          : ": another handler had replaced the crash handler for \(replaced), so this may be a crash on "
            + "one of them (else SIGKILL, the OOM killer, or power loss)")
    } else {
      report.exceptionType = "OutOfMemory"
      report.exceptionMessage =
        "likely out of memory: " + evidence.joined(separator: "; ") + (hang.map { "; " + $0 } ?? "")
        + (replacedCrashSignals.isEmpty
          ? "" : "; or a crash on \(replaced), whose crash handler another handler had replaced")
    }
    // The thread given the first chance appended after it: it left the handler (by longjmp, a
    // runtime recovering that way) and the process ended later, some other way.
    let leftFirstChance =
      firstChanceEnd.map { end in
        ring.slots.entries.contains {
          $0.threadID == end.mark.threadID && $0.wallTimeNanoseconds > end.mark.wallNanoseconds
        }
      } ?? false
    if leftFirstChance, let firstChance = firstChanceEnd.map(Self.firstChanceSentence) {
      report.evidence.append(
        firstChance + "; but that thread appended breadcrumbs after it, so it left the handler (longjmp) "
          + "and the process ended later")
    } else if let firstChance = firstChanceEnd.map(Self.firstChanceSentence) {
      // Named first when nothing likelier (a hang's stop, memory evidence) was: the mark proves
      // the process was inside that handler, which is how it left no record.
      report.evidence.insert(firstChance, at: 0)
      if stoppedBy == nil, evidence.isEmpty {
        report.exceptionMessage =
          (hang.map { $0 + ": " } ?? "")
          + "the process ended inside a first-chance handler, without a crash record: "
          + firstChance
      }
    }
    if let stoppedBy {
      report.exceptionStacktrace = "(no stack: the process was stopped by \(SignalNames.name(stoppedBy)))"
    } else if firstChanceEnd != nil, !leftFirstChance, evidence.isEmpty {
      report.exceptionStacktrace =
        "(no stack: the process ended inside the handler given the first chance, before any record was written)"
    } else if replacedCrashSignals.isEmpty {
      report.exceptionStacktrace = "(no stack: the process was killed without running any handler)"
    } else {
      report.evidence.append(
        "another handler had replaced the crash handler for \(replaced) (noticed while the session ran): "
          + "a crash on those signals leaves no crash record")
      report.exceptionStacktrace = "(no stack: the crash handler did not run)"
    }
    Self.explainUncleanEnd(ring, oomEvidence: evidence, into: &report)
    let ended = header.endSignal.map { "killed by \(SignalNames.name($0))" } ?? "killed"
    if let hang = Self.hangEvidence(header, ended: ended) { report.evidence.append(hang) }
    Self.addHangFacts(header, to: &report)
    return report
  }

  /// What a first chance that never returned says: "a first-chance handler in libfoo.so
  /// (0x7f…) was given SIGSEGV (SEGV_MAPERR) at pc 0x… (address 0x0) on thread 42 at
  /// 2026-…Z and never returned to the crash handler: it ended the process (an exit), or left by
  /// longjmp and the process ended later".
  static func firstChanceSentence(_ end: FirstChanceEnd) -> String {
    let mark = end.mark
    let module = end.module.map { " in " + ($0.split(separator: "/").last.map(String.init) ?? $0) } ?? ""
    let repeats =
      mark.repeats > 0 ? ", after it had returned from the same fault \(mark.repeats) time(s) in a row" : ""
    return "a first-chance handler\(module) (\(CrashReport.hex(mark.handler))) was given "
      + "\(SignalNames.name(mark.signal)) (\(SignalNames.codeName(signal: mark.signal, code: mark.signalCode))) "
      + "at pc \(CrashReport.hex(mark.pc)) (address \(CrashReport.hex(mark.faultAddress))) on thread "
      + "\(mark.threadID) at \(ISO8601.string(nanoseconds: mark.wallNanoseconds))\(repeats) and never returned "
      + "to the crash handler: it ended the process (an exit), or left by longjmp and the process ended later"
      + (mark.inProgress > 1 ? " (\(mark.inProgress) first chances were in progress)" : "")
      + (mark.maybeTorn ? " (the mark was being rewritten: its fields may mix two faults)" : "")
  }

  /// A report for a ring marked crashed whose crash record is missing or unreadable.
  package func crashWithoutRecord(ring: RingContents, trailSize: Int?, damage: [String]) -> CrashReport {
    var report = abnormalTermination(ring: ring, trailSize: trailSize)
    report.kind = .crash
    report.exceptionType = "Crash"
    report.exceptionMessage = "the crash handler ran but its record is missing or damaged"
    report.exceptionStacktrace = "(no stack: the crash record is missing or damaged)"
    report.evidence = Self.hangEvidence(ring.header, ended: "crashed").map { [$0] } ?? []
    report.damage += damage
    return report
  }

  private func base(
    id: String, kind: CrashReport.Kind, sessionID: SessionID, time: UInt64, ring: RingContents?,
    trailSize: Int?, pid: Int32, executable: String, appName: String
  ) -> CrashReport {
    let observed = SystemClock.wallNanoseconds()
    var report = CrashReport(
      id: id, kind: kind, exceptionType: "", exceptionMessage: "", exceptionStacktrace: "",
      threadID: nil, threadName: nil, sessionID: sessionID.description,
      reportingSessionID: reportingSession?.description,
      timeUnixNano: time, time: ISO8601.string(nanoseconds: time),
      observedTimeUnixNano: observed, observedTime: ISO8601.string(nanoseconds: observed),
      signal: nil, registers: [], frames: [], modules: [],
      resource: resource(pid: pid, executable: executable, appName: appName, ring: ring),
      attributes: attributes,
      breadcrumbs: ring.map { TrailAttachment.summary($0, attachmentSize: trailSize) }
        ?? CrashReport.Trail(
          attachment: nil, count: 0, valid: 0, torn: 0, overwritten: 0, empty: 0, lastMessage: nil,
          timesCalibrated: false),
      attachments: [], damage: [], evidence: [], handlerDurationNanoseconds: nil)
    if let ring, ring.counts.torn > 0 {
      report.damage.append("\(ring.counts.torn) breadcrumb slot(s) torn or damaged, skipped")
    }
    if let ledger = ring?.ledger {
      report.openOperations = CrashReport.OpenOperations(ledger, death: time)
      if let damage = ledger.damage { report.damage.append("in-flight ledger: \(damage)") }
    }
    if let trailSize {
      report.attachments.append(
        .init(name: TrailAttachment.name, contentType: TrailAttachment.contentType, size: trailSize))
    }
    return report
  }

  /// The session's resource: its process (`pid`, `executable`, `appName`, `appVersion`), over it
  /// what it recorded while it ran (`sessionResource`) or, when it recorded none, the machine as
  /// it is now with `unrecordedResourceKey` set to `measuredAt` (what was made then: a report, a
  /// session summary) and the environment's resource the ring header carries. The reports of a
  /// session and its session summary are sent with this.
  package func resource(
    pid: Int32, executable: String, appName: String, ring: RingContents?, measuredAt: String = "report"
  ) -> [String: String] {
    var resource = ProcessAttributes.resource(
      pid: pid, executable: executable, appName: appName, appVersion: appVersion
    )
    .merging(sessionResource ?? ProcessAttributes.machine()) { _, session in session }
    // Said on the report, so nobody takes the reading launch's machine for the crashed one's.
    if sessionResource == nil {
      resource[Self.unrecordedResourceKey] = measuredAt
      // The session file was not written yet (a crash in the first milliseconds): the
      // environment's service name and attributes still came with the ring.
      if let environment = ring.flatMap({ EnvironmentResource.decoded($0.header.environmentResource) }) {
        resource.merge(environment) { _, environment in environment }
      }
    }
    if omitsHostName { resource[ProcessAttributes.hostNameKey] = nil }
    // A forked child's session (crumbs_fork.h): which process and session it came from.
    if let parent = ring?.header.parentSessionID {
      resource["crumbs.session.parent_id"] = parent.description
    }
    if let parentPID = ring?.header.parentPID { resource["process.parent_pid"] = String(parentPID) }
    return resource
  }

  /// Set to `report` when the session recorded no resource while it ran: its os.* and host.*
  /// attributes were read when the report was made.
  package static let unrecordedResourceKey = "crumbs.resource.measured_at"

  /// The trace of `thread`'s last breadcrumb that carried one (TraceContext's reserved
  /// attributes), and that breadcrumb.
  /// On a ring's breadcrumbs as read: only the values looked up are made Strings.
  package static func lastTrace(_ slots: BreadcrumbSlots, thread: UInt32)
    -> (TraceContext, CrashReport.TraceBreadcrumb)?
  {
    var found: (TraceContext, BreadcrumbSlots.Entry)?
    // The thread's own sequence number orders its breadcrumbs exactly (times may tie).
    for breadcrumb in slots.entries where breadcrumb.threadID == thread {
      if let (_, newest) = found, newest.threadSequence > breadcrumb.threadSequence { continue }
      if let trace = TraceContext(attributes: { key in slots.value(breadcrumb, key: key) }) {
        found = (trace, breadcrumb)
      }
    }
    guard let (trace, breadcrumb) = found else { return nil }
    return (
      trace,
      CrashReport.TraceBreadcrumb(
        threadID: thread, threadSequence: breadcrumb.threadSequence,
        message: slots.string(breadcrumb.message),
        time: ISO8601.string(nanoseconds: breadcrumb.wallTimeNanoseconds))
    )
  }

  /// What was said before the signal, as the exception message: an uncaught C++ exception
  /// (`uncaught C++ exception std::runtime_error: what`), else the Swift runtime's fatal-error
  /// message with the file:line it carries (lines joined by "; "). Nil when nothing was said.
  package static func saidBeforeTheSignal(_ record: CrashRecord) -> String? {
    if let exception = record.uncaughtException {
      let type = SymbolDemangler.demangleType(exception.mangledType) ?? exception.mangledType
      return "uncaught C++ exception \(type)" + (exception.what.map { ": \($0)" } ?? "")
    }
    guard let swift = record.swiftFatalMessage else { return nil }
    let lines = swift.split(separator: "\n").map { line in
      String(line.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }.filter { !$0.isEmpty }
    return lines.isEmpty ? nil : lines.joined(separator: "; ")
  }

  /// How far below a stack's lowest address a fault still counts as hitting its guard region:
  /// Linux keeps a gap of 256 pages (1 MiB) below a growing stack (the main thread's), glibc a
  /// guard page or more below a thread's, and a function with a large frame can fault that far
  /// past the guard's start. 64 KiB more covers such a frame.
  package static let guardReach: UInt64 = (1 << 20) + 64 * 1024

  /// "stack overflow: …" when the fault was a stack overflow: a SIGSEGV or SIGBUS (not sent) at
  /// an address in or next to the guard region below the crashing thread's stack (the range
  /// the backtrace trusted), with the stack pointer there too (a wild pointer that happens to
  /// land below a stack is not an overflow). Nil otherwise.
  package static func stackOverflow(_ record: CrashRecord) -> String? {
    let signal = record.signal
    guard signal.number == SIGSEGV || signal.number == SIGBUS, signal.senderPID == nil, signal.code > 0,
      record.stackLow != 0, record.stackHigh > record.stackLow
    else { return nil }
    let low = record.stackLow
    let page: UInt64 = 4096
    func nearGuard(_ address: UInt64) -> Bool {
      address < low + page && address >= (low > guardReach ? low - guardReach : 0)
    }
    let stackPointer = record.registers.first { $0.name == "rsp" || $0.name == "sp" }?.value
    guard nearGuard(signal.faultAddress),
      stackPointer.map({ $0 < low + 64 * 1024 && nearGuard(min($0, low)) }) ?? true
    else { return nil }
    let distance =
      signal.faultAddress < low
      ? "\(low - signal.faultAddress) bytes below"
      : "\(signal.faultAddress - low) bytes into the lowest page of"
    return
      "stack overflow: \(signal.codeName) at \(CrashReport.hex(signal.faultAddress)), \(distance) the thread's "
      + "stack (\(CrashReport.hex(low))–\(CrashReport.hex(record.stackHigh)))"
  }

  /// What a signal usually means, when the frames say so.
  package static func hint(signal: Int32, frames: [SymbolicatedFrame]) -> String? {
    let swiftTop = frames.prefix(3).contains { ($0.symbol ?? "").hasPrefix("$s") }
    if (signal == SIGILL || signal == SIGTRAP) && swiftTop {
      return
        "a Swift runtime trap (fatalError, precondition, force-unwrap of nil, index out of range, arithmetic overflow)"
    }
    return signal == SIGABRT ? "abort() (or a failed C assert)" : nil
  }

  package static func hex16(_ value: UInt64) -> String {
    let digits = String(value, radix: 16)
    return "0x" + String(repeating: "0", count: max(0, 16 - digits.count)) + digits
  }
}
