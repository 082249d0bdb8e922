// CrashReport+Symbolication.swift — naming a stored report's frames again, later and elsewhere:
// on the developer's machine, with the unstripped binaries or `.debug` files of a stripped
// release build (`crumbs symbolicate`, Symbolicator.Options.symbolDirectories).
//
// Entry points: report.symbolicated(with:) → ReportStore.replace(_:with:).
// Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder

extension CrashReport {
  /// The report with its frames named again from its own module map (`modules`: paths, load
  /// addresses, build IDs) and `options`, and its stack text rebuilt; every thread's frames too
  /// (`threads`). A frame keeps what it had when the new lookup names it less well (a report
  /// read on a machine without the files it was named from); a frame whose address does not
  /// parse is kept as it is.
  ///
  /// Files, lines and source lines found now are redacted with `redaction` (home directories
  /// shortened, source lines as text; the rest of the report stays as it was stored): the rules
  /// the session ran with are not stored with its report, so by default the default rules.
  public func symbolicated(with options: Symbolicator.Options, redaction: Redaction = Redaction())
    -> CrashReport
  {
    var report = self
    // The executable's package note may name where its debug files are (PackageNote.swift).
    let (options, noteRefusal) = options.askingPackageNote(
      options.readsModuleFiles && options.packageDebugInfo != nil
        ? PackageNote.ofExecutable(
          resource["process.executable.path"] ?? modules.first?.path ?? "", modules: modules)
        : nil)
    if let noteRefusal, !report.evidence.contains(noteRefusal) { report.evidence.append(noteRefusal) }
    let symbolicator = Symbolicator(modules: modules, options: options)
    // A crash's first frame is the faulting instruction itself (a hang's, where its stalled
    // thread was stopped), and async resume points are functions' first instructions; every
    // other one is a return address (looked up one byte back).
    let stopped = kind == .crash || kind == .hang
    report.frames = Self.renamed(frames) { addresses, firstParsed, exact in
      symbolicator.symbolicate(addresses, firstIsExactPC: stopped && firstParsed, exact: exact)
    }
    if !frames.isEmpty { report.exceptionStacktrace = CrashReport.stacktrace(report.frames) }
    // The other threads' frames in one batch (each first frame is where that thread stopped,
    // but the requesting thread's of a hang: it walked its own stack, all return addresses).
    if let threads, stopped {
      var batch: [[UInt64]] = []
      var exact: [Set<Int>] = []
      var firstIsExactPC: [Bool] = []
      for thread in threads where !thread.crashed {
        let parsed = thread.frames.filter { !$0.isInlined && Self.address($0) != nil }
        batch.append(parsed.compactMap(Self.address))
        exact.append(Self.asyncIndices(parsed))
        firstIsExactPC.append(thread.state != .requesting)
      }
      var named = symbolicator.symbolicate(backtraces: batch, exact: exact, firstIsExactPC: firstIsExactPC)
        .makeIterator()
      report.threads = threads.map { thread in
        var thread = thread
        if thread.crashed {
          thread.frames = report.frames
        } else if let fresh = named.next() {
          thread.frames = Self.renamed(thread.frames) { _, _, _ in fresh }
        }
        return thread
      }
    }
    // Fresh lines of source for the fresh file:line (the old ones may be of other lines).
    report.frames = report.frames.map { frame in
      var frame = frame
      frame.source = nil
      return frame
    }
    report.threads = report.threads?.map { thread in
      var thread = thread
      thread.frames = thread.frames.map { frame in
        var frame = frame
        frame.source = nil
        return frame
      }
      return thread
    }
    report.addSourceContext(options.effectiveSourceContext)
    let redactor = redaction.redactor()
    report.frames = redactor.frames(report.frames)
    report.threads = report.threads?.map { thread in
      var thread = thread
      thread.frames = redactor.frames(thread.frames)
      return thread
    }
    if !frames.isEmpty { report.exceptionStacktrace = redactor.path(report.exceptionStacktrace) }
    return report
  }

  private static func address(_ frame: Frame) -> UInt64? {
    guard frame.address.hasPrefix("0x") else { return nil }
    return UInt64(frame.address.dropFirst(2), radix: 16)
  }

  /// The indices of async resume points among `frames`.
  private static func asyncIndices(_ frames: [Frame]) -> Set<Int> {
    Set(frames.indices.filter { frames[$0].foundBy == .async })
  }

  /// `frames` with each frame whose address parses replaced by what `name` made of it (given
  /// the parsed addresses, whether the first frame's parsed, and the indices among them of
  /// async resume points), with the calls inlined there, unless that names it less well. An
  /// old report's inlined calls (`Frame.inlined`) go with the frame they were inlined into: the
  /// address is looked up once. How each frame was found stays.
  private static func renamed(
    _ frames: [Frame], _ name: ([UInt64], Bool, Set<Int>) -> [SymbolicatedFrame]
  ) -> [Frame] {
    // Each address's frames: its inlined calls, then the frame they were inlined into.
    var groups: [[Frame]] = []
    var pending: [Frame] = []
    for frame in frames {
      pending.append(frame)
      if !frame.isInlined {
        groups.append(pending)
        pending = []
      }
    }
    if !pending.isEmpty { groups.append(pending) }
    let owners = groups.map { $0[$0.count - 1] }
    let addresses = owners.map(address)
    let parsed = addresses.compactMap { $0 }
    guard !parsed.isEmpty else { return frames }
    let parsedOwners = zip(owners, addresses).filter { $0.1 != nil }.map(\.0)
    var next = CrashReportBuilder.frameGroups(name(parsed, addresses[0] != nil, asyncIndices(parsedOwners)))
      .makeIterator()
    let renamed = zip(groups, addresses).flatMap { old, address -> [Frame] in
      guard address != nil, let fresh = next.next(), let owner = fresh.last else { return old }
      if owner.function == nil && old[old.count - 1].function != nil { return old }
      return fresh.map { frame in
        var frame = frame
        frame.foundBy = old[old.count - 1].foundBy
        return frame
      }
    }
    return CrashReportBuilder.numbered(renamed)
  }
}

extension ReportStore {
  /// Writes `report` over a stored report's report.json (atomically); its state, attachments and
  /// delivery history stay. The id must be the stored one.
  public func replace(_ stored: StoredReport, with report: CrashReport) throws(ReportStoreError) {
    guard report.id == stored.report.id else {
      throw .encoding("report id \(report.id) is not \(stored.report.id)")
    }
    do throws(SystemCallError) {
      try Syscall.writeFileAtomically(stored.reportPath, try Self.encode(report))
    } catch {
      throw .system(error)
    }
  }
}
