// SessionProcessing.swift — how an ended session is processed and counted, whoever processes
// it: the app's own client at its next start (CrumbsClient+PreviousSessions) or `crumbs collect`
// from outside. Both build their PostMortemProcessor here, so a session the collector processes
// is counted in the directory's session metrics and queued as a session summary exactly as the
// client would have (SessionMetricsFile.countEnd counts by session id, under its lock: whichever
// process claims the session counts it, once), and recorded in the crash-loop tally
// (CrashLoopTally) that `client.crashLoop` reads at later starts. The queued summaries (and the
// spans each death left open, ClosingSpanQueue) leave through a SessionSummaryOutbox, the
// client's (UploaderBridge) or the collector's.
//
// Entry points, in call order:
//   CrumbsConfiguration.makePostMortemProcessor(directory:store:problem:)
//   SessionSummaryOutbox(directory:resource:)   handed to a ReportUploader as its outbox
// Not signal-safe.

import CrumbsPlatform

extension CrumbsConfiguration {
  /// The post-mortem processor for this configuration's directory: its symbolication, OOM
  /// detection, host name, attachment limit and redaction, and each ended session counted
  /// (SessionMetricsFile), its summary queued (SessionSummaryQueue) and its crash-loop step
  /// tallied (CrashLoopTally) before its files go.
  /// `problem` hears what could not be counted.
  package func makePostMortemProcessor(
    directory: RingDirectory, store: ReportStore, problem: @escaping @Sendable (String) -> Void
  ) -> PostMortemProcessor {
    var processor = PostMortemProcessor(directory: directory, store: store)
    processor.symbolicatorOptions = symbolication
    if fetchesDebugFiles {
      let environment = CrumbsEnvironment.debuginfodEnvironment()
      if processor.symbolicatorOptions.remoteDebugFiles == nil,
        let settings = DebuginfodSettings(environment: environment, crumbsDirectory: self.directory)
      {
        processor.symbolicatorOptions.remoteDebugFiles = DebuginfodClient(settings: settings)
      }
      // A crashed executable's package note may name its debuginfod server (read per session,
      // when its report is made: CrashReportBuilder).
      if processor.symbolicatorOptions.packageDebugInfo == nil {
        processor.symbolicatorOptions.packageDebugInfo = DebuginfodClient.packageNoteClients(
          environment: environment, crumbsDirectory: self.directory)
      }
    }
    processor.reportsAbnormalTerminations = detectOOM
    processor.reportsHostName = reportsHostName
    processor.attachmentSizeLimit = attachmentSizeLimit
    // For sessions that left no rules of their own (no session file): the collector, which
    // does not know the app's configuration, applies the defaults.
    processor.redaction = redaction
    let path = self.directory
    processor.sessionEnded = { session in
      do {
        // Queued by the run that counts it, under the metrics lock: once (SessionMetrics.swift).
        try SessionMetricsFile.countEnd(session, directory: path, problem: problem) { metrics in
          SessionSummaryQueue.enqueue([session], metrics: metrics, directory: path)
          // The spans its death left open, queued the same way (ClosingSpanQueue.swift).
          ClosingSpanQueue.enqueue(session, directory: path)
        }
      } catch {
        problem("cannot count session \(session.sessionID): \(error)")
      }
      // Its place in a crash loop, for `client.crashLoop` at later starts (CrashLoop.swift).
      do {
        if let damage = try CrashLoopTally.record(session, directory: path) { problem(damage) }
      } catch {
        problem("cannot tally session \(session.sessionID): \(error)")
      }
    }
    return processor
  }
}

/// A Crumbs directory's queued session summaries, as an uploader's outbox: each one OTLP log
/// record with the ended session's own resource (`resource` only for summaries queued before
/// they carried one), then the spans each death left open (one traces event per death,
/// ClosingSpanQueue.swift), then the per-release session counts as one metrics event, when they
/// changed since they last went out (SessionSummaries.swift, SessionMetricsExport.swift).
package struct SessionSummaryOutbox: DeliveryOutbox {
  package let directory: String
  package let resource: [String: String]

  package init(directory: String, resource: [String: String]) {
    self.directory = directory
    self.resource = resource
  }

  package func queuedEvents() -> [OutboxEvent] {
    SessionSummaryQueue.events(directory: directory, resource: resource)
      + ClosingSpanQueue.events(directory: directory)
      + (SessionMetricsExport.event(directory: directory).map { [$0] } ?? [])
  }

  package func remove(_ event: OutboxEvent) {
    if let revision = SessionMetricsExport.revision(of: event) {
      SessionMetricsFile.exported(revision: revision, directory: directory)
      return
    }
    if ClosingSpanQueue.remove(event, directory: directory) { return }
    guard !event.key.utf8.contains(UInt8(ascii: "/")) else { return }
    guard let queue = SessionSummaryQueue.open(directory) else { return }
    defer { Syscall.close(queue) }
    Syscall.removeTree(named: event.key, in: queue)
  }
}
