// CrashReport+Symbolication.swift — naming a stored report's frames again, later and elsewhere:
// on the developer's machine, with the unstripped binaries or `.debug` files of a stripped
// release build (`crumbs symbolicate`, Symbolicator.Options.symbolDirectories).
//
// Entry points: report.symbolicated(with:) → ReportStore.replace(_:with:).
// Not signal-safe.

import CrumbsRecorder

extension CrashReport {
  /// The report with its frames named again from its own module map (`modules`: paths, load
  /// addresses, build IDs) and `options`, and its stack text rebuilt. A frame keeps what it had
  /// when the new lookup names it less well (a report read on a machine without the files it
  /// was named from); a frame whose address does not parse is kept as it is.
  public func symbolicated(with options: Symbolicator.Options) -> CrashReport {
    let addresses = frames.map { frame -> UInt64? in
      guard frame.address.hasPrefix("0x") else { return nil }
      return UInt64(frame.address.dropFirst(2), radix: 16)
    }
    let parsed = addresses.compactMap { $0 }
    guard !parsed.isEmpty else { return self }
    // A crash's first frame is the faulting instruction itself, and async resume points are
    // functions' first instructions; every other one is a return address (looked up one byte
    // back).
    let parsedFrames = zip(frames, addresses).filter { $0.1 != nil }.map(\.0)
    let named = Symbolicator(modules: modules, options: options)
      .symbolicate(
        parsed, firstIsExactPC: kind == .crash && addresses[0] != nil,
        exact: Set(parsedFrames.indices.filter { parsedFrames[$0].foundBy == .async }))
    var next = CrashReportBuilder.frames(named).makeIterator()
    var report = self
    report.frames = zip(frames, addresses).map { old, address in
      guard address != nil, var fresh = next.next() else { return old }
      fresh.index = old.index
      fresh.foundBy = old.foundBy
      return fresh.function == nil && old.function != nil ? old : fresh
    }
    if !frames.isEmpty { report.exceptionStacktrace = CrashReport.stacktrace(report.frames) }
    return report
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
