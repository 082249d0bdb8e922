// HangWatchdog+Reports.swift — what the watchdog does when a watch stalls and when it resumes:
//
//   hangBegan      a breadcrumb ("hang: <watch> silent for 3.1 s"); unless the watch was
//                  reported within `minimumReportInterval`: every thread captured without
//                  stopping the process (LiveThreadCapture), the stalled thread chosen, the ring
//                  header's hang recorded (so the next launch explains a kill during it), and a
//                  `hang` report stored (led by the wait-for graph's verdict when one thread
//                  waits for another's mutex: ThreadWaits), held from delivery until the hang ends (at most
//                  `deliveryHold`) — reportHang, which a stuck operation's hang shares
//                  (HangWatchdog+Operations.swift)
//   refreshOngoing each check while it goes on: the ring header's "still hung at" time
//   hangEnded      "hang ended after 7.3 s" (a breadcrumb), the stored report updated with the
//                  whole duration and released to delivery, the ring header's hang cleared once
//                  no hang goes on; by key: a watch's name, or a stuck operation's episode
//
// All on the watchdog thread. Not signal-safe.

import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

extension HangWatchdog {
  func hangBegan(name: String, kind: Kind, heartbeat: Heartbeat?, since: UInt64, now: UInt64) {
    guard let client, client.isEnabled else { return }
    let silent = now &- since
    let wallNow = SystemClock.wallNanoseconds()
    let sinceWall = wallNow &- min(silent, wallNow)
    let threshold = heartbeat?.threshold ?? detection.usableThreshold
    client.ring.append(
      "hang: \(name) silent for \(HangFacts.text(silent))", level: .error, type: .system,
      attributes: [HangFacts.watchKey: name])
    client.tell(.hangBegan(watch: name))
    let report = reportHang(
      key: name, watch: name, sinceWall: sinceWall, lasted: silent, threshold: threshold, now: now,
      attributes: [:], lead: { threads in Self.leadThread(threads, kind: kind, heartbeat: heartbeat) },
      message: { _ in Self.message(name: name, kind: kind, silent: silent, threshold: threshold) },
      census: kind == .heartbeat ? nil : { $0.text })
    CrumbsClient.hangWatchdogEvents.withLock { $0 }?(.began(watch: name, report: report))
  }

  /// The report of a hang that began, under `key` among the hangs going on: unless `watch` was
  /// reported within `minimumReportInterval`, every thread captured, the one `lead` picks
  /// leading, and a `hang` report stored with `attributes` and `message` (given the lead thread
  /// found, or nil: the report then leads with the watchdog's own), held from delivery
  /// until the hang ends (at most `deliveryHold`); in any case the ring header's hang recorded.
  /// Returns the report stored, if one was.
  func reportHang(
    key: String, watch: String, sinceWall: UInt64, lasted: UInt64, threshold: Double, now: UInt64,
    attributes extra: [String: String], quiet: Bool = false,
    lead: ([CrashReport.Thread]) -> CrashReport.Thread?, message: (CrashReport.Thread?) -> String,
    capture taken: CapturedThreads? = nil, census: ((PoolCensus) -> String)? = nil
  ) -> StoredReport? {
    guard let client else { return nil }
    let due = hangs.withLock { hangs -> Bool in
      let last = hangs.lastReported[watch]
      let interval = UInt64(max(0, min(detection.minimumReportInterval, 1e9)) * 1e9)
      guard last == nil || now &- last! >= interval else { return false }
      hangs.lastReported[watch] = now
      return true
    }
    var ongoing = OngoingHang(report: nil, watch: watch, quiet: quiet)
    guard due else {
      client.ring.recordHang(watch: watch, sinceWallNanoseconds: sinceWall, frames: "")
      hangs.withLock { $0.ongoing[key] = ongoing }
      return nil
    }
    let capture = taken ?? captureThreads(client)
    let lead = lead(capture.threads)
    let frames = HangFacts.topFrames(lead?.frames ?? [])
    client.ring.recordHang(watch: watch, sinceWallNanoseconds: sinceWall, frames: frames)
    var attributes = [
      HangFacts.watchKey: watch, HangFacts.durationKey: HangFacts.milliseconds(lasted),
      HangFacts.thresholdKey: HangFacts.milliseconds(StallTracker.nanoseconds(threshold)),
      HangFacts.ongoingKey: "true",
      HangFacts.sinceKey: ISO8601.string(nanoseconds: sinceWall),
    ].merging(extra) { _, new in new }
    if !frames.isEmpty { attributes[HangFacts.framesKey] = frames }
    var text = message(lead)
    if let waits = capture.waits, let found = waits.verdict(from: lead.map { UInt32(clamping: $0.id) }) {
      let verdict = HangFacts.namingEnd(
        found, threads: capture.threads, executable: SystemFacts.executablePath)
      let names = Dictionary(
        capture.threads.compactMap { thread in thread.name.map { (UInt32(clamping: thread.id), $0) } },
        uniquingKeysWith: { first, _ in first })
      let executable = SystemFacts.executablePath
      attributes.merge(HangFacts.verdictAttributes(verdict, threads: capture.threads, executable: executable))
      {
        _, new in new
      }
      let sites = zip(
        verdict.threads, HangFacts.lockSites(verdict, threads: capture.threads, executable: executable)
      )
      .map {
        "\(names[$0].map { "\($0)" } ?? "tid \($0)") in \($1)"
      }
      text =
        ThreadWaits.describe(verdict, names: names) + "; lock sites: " + sites.joined(separator: ", ") + "; "
        + text
    }
    // The pool's seats (HangWatchdog+Pool.swift): in every hang report's attributes, and
    // leading the message of the hangs that are the pool's.
    if let pool = poolCensus(capture) {
      attributes.merge(HangFacts.poolAttributes(pool)) { _, new in new }
      if let census { text = census(pool) + "; " + text }
    }
    let (builder, files) = client.liveReportBuilder(attributes: attributes)
    var (report, attached) = builder.build(
      kind: .hang, type: HangFacts.exceptionType, message: text,
      frames: lead?.frames ?? [], modules: capture.modules,
      thread: (
        lead?.id ?? Int(CurrentThread.id),
        lead?.name ?? capture.threads.first { $0.id == Int(CurrentThread.id) }?.name
      ), threads: capture.threads,
      attachmentPaths: files)
    report.damage += capture.damage
    let hold = UInt64(max(0, min(detection.deliveryHold, 3600)) * 1e9)
    ongoing.report = client.storeLiveReport(
      report, attachments: attached, heldUntilUnixNano: SystemClock.wallNanoseconds() &+ hold)
    hangs.withLock { $0.ongoing[key] = ongoing }
    return ongoing.report
  }

  /// The hang going on under `key` ended after `duration`: a breadcrumb (unless its start had
  /// none), its report updated with the whole duration and released to delivery, the ring
  /// header's hang cleared once none goes on.
  func hangEnded(key: String, duration: UInt64) {
    guard let ongoing = hangs.withLock({ $0.ongoing.removeValue(forKey: key) }), let client else { return }
    if !ongoing.quiet {
      client.ring.append(
        "hang ended after \(HangFacts.text(duration))", level: .info, type: .system,
        attributes: [HangFacts.watchKey: ongoing.watch])
    }
    if hangs.withLock({ $0.ongoing.isEmpty }) { client.ring.clearHang() }
    defer {
      CrumbsClient.hangWatchdogEvents.withLock { $0 }?(.ended(watch: ongoing.watch, nanoseconds: duration))
    }
    guard let stored = ongoing.report else { return }
    var report = stored.report
    report.attributes[HangFacts.durationKey] = .string(HangFacts.milliseconds(duration))
    report.attributes[HangFacts.ongoingKey] = "false"
    report.exceptionMessage += "; the hang ended after \(HangFacts.text(duration))"
    do {
      try stored.replaceReport(report)
      client.uploader?.wake()
    } catch {
      // Delivery took it already (its hold ran out): it went out with the duration so far.
    }
  }

  /// While a hang goes on: the ring header says it was still going on now.
  func refreshOngoing() {
    guard let client, hangs.withLock({ !$0.ongoing.isEmpty }) else { return }
    client.ring.refreshHang(seenWallNanoseconds: SystemClock.wallNanoseconds())
  }

  /// Every thread, symbolicated, and what each waits on; on failure none, and why, as the
  /// report's damage.
  func captureThreads(_ client: CrumbsClient) -> CapturedThreads {
    do {
      let snapshot = try LiveThreadCapture.capture()
      return (
        CrashReportBuilder.threads(of: snapshot, symbolicator: client.liveSymbolicator), snapshot.modules,
        snapshot.waits, []
      )
    } catch {
      return ([], CurrentProcessModules.list(), nil, ["threads not captured: \(error)"])
    }
  }

  /// The thread the report leads with: the heartbeat's (the thread that made it), the main
  /// thread for the main queue, and for the pool the first thread running a job (a frame of
  /// the concurrency runtime's job loop under it: idle pool threads wait outside any job).
  static func leadThread(_ threads: [CrashReport.Thread], kind: Kind, heartbeat: Heartbeat?)
    -> CrashReport.Thread?
  {
    switch kind {
    case .heartbeat:
      guard let id = heartbeat?.threadID else { return nil }
      return threads.first { $0.id == Int(id) }
    case .mainQueue:
      return threads.first { $0.id == Int(getpid()) }
    case .concurrencyPool:
      return threads.first { thread in
        thread.frames.contains { frame in
          frame.module?.contains("libswift_Concurrency") == true
            || frame.function?.contains("swift_job_run") == true
        }
      }
    }
  }

  static func message(name: String, kind: Kind, silent: UInt64, threshold: Double) -> String {
    let silence = HangFacts.text(silent)
    let limit = HangFacts.text(StallTracker.nanoseconds(threshold))
    return switch kind {
    case .concurrencyPool:
      "the concurrency pool ran no job for \(silence) (threshold \(limit)): a probe job enqueued "
        + "on the global executor did not run; tasks blocking in synchronous calls starve it"
    case .mainQueue:
      "the main queue ran nothing for \(silence) (threshold \(limit))"
    case .heartbeat:
      "heartbeat \"\(name)\" silent for \(silence) (threshold \(limit))"
    }
  }
}
