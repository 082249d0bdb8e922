// CrumbsDirectory.swift — the Crumbs directory that an app's client and `crumbs collect` share:
// the one place each fixed name in it is spelled, and the one answer to "may what this
// directory holds leave the machine now?", which both deliverers ask.
//
// Layout (the recorder's folders are RingDirectory's, the store's folder ReportStore's: the
// modules below this one cannot see it, so it takes those names from them):
//   rings/                 rings, crash records, session files (RingDirectory.swift)
//   quarantine/            files that could not be read, each with its `.reason` (Quarantine)
//   reports/               the report store (ReportStore.swift)
//   session-starts         sessions started, and the lock of the counts (SessionMetrics.swift)
//   session-metrics.json   the ended sessions counted, per release (SessionMetrics.swift)
//   session-summaries/     each ended session's summary, queued for OTLP (SessionSummaries.swift)
//   closing-spans/         the spans each death left open, queued for OTLP (ClosingSpanQueue.swift)
//   crash-loop.json        the processed sessions of a crash loop (CrashLoop.swift)
//   crash-loop.lock        its lock
//   consent                what the app's consent handler requires (CrumbsDirectory+Consent.swift)
//   disabled               present: the app turned Crumbs off (`CrumbsClient.setEnabled(false)`)
//
// Entry points:
//   CrumbsDirectory(_:)                 names only: nothing is opened or made
//   delivery(consentHandlerSet:)        may this directory deliver: the client (reports and
//                                       session summaries) and the collector ask the same
//   isEnabled, setEnabled(_:)           the `disabled` switch
//   removeAbandonedTemporaryFiles()     what writers killed mid-write left of the state files
//   quarantine(damaged:what:damage:)    a state file that cannot be read, set aside
// Not signal-safe.

import CrumbsPlatform

/// A Crumbs directory as the client and the collector share it (see the file comment).
package struct CrumbsDirectory: Sendable, Equatable {
  /// The directory, as given (the client makes it absolute before, the collector too).
  package let path: String

  package init(_ path: String) { self.path = path }

  /// The files and folders Crumbs keeps at the top of the directory, besides the recorder's
  /// (`rings`, `quarantine`) and the store's (`reports`).
  package enum Name: String, CaseIterable, Sendable {
    case consent = "consent"
    case disabled = "disabled"
    case sessionStarts = "session-starts"
    case sessionMetrics = "session-metrics.json"
    case sessionSummaries = "session-summaries"
    case closingSpans = "closing-spans"
    case crashLoopTally = "crash-loop.json"
    case crashLoopLock = "crash-loop.lock"
  }

  /// `path/name`.
  package func path(_ name: Name) -> String { path + "/" + name.rawValue }

  /// The rings' folder's name (RingDirectory's).
  package static var ringsFolderName: String { RingDirectory.ringsFolderName }
  /// `path/rings`.
  package var rings: String { path + "/" + RingDirectory.ringsFolderName }
  /// `path/quarantine`.
  package var quarantine: String { path + "/" + RingDirectory.quarantineFolderName }
  /// `path/reports`, the report store.
  package var reports: String { path + "/" + ReportStore.folderName }

  // MARK: - Delivery

  /// Whether what the directory holds (reports, session summaries, session counts) may leave
  /// the machine now.
  package enum Delivery: Equatable, Sendable {
    /// It may.
    case allowed
    /// The app turned Crumbs off here (`disabled`): nothing leaves.
    case turnedOff
    /// The app asks for consent and the user gave no standing consent: only the app's own
    /// client sends, what its handler consents to, report by report; nothing else leaves.
    case awaitingConsent
  }

  /// The one answer to "may this directory deliver?". `consentHandlerSet` is what the
  /// deliverer knows of the app's consent handler: the app's own client knows whether it has
  /// one (true, false); the collector cannot ask the app (nil) and takes the `consent` file's
  /// record of one instead. Standing consent (`always`) lets everything go, whoever asks.
  package func delivery(consentHandlerSet: Bool?) -> Delivery {
    guard isEnabled else { return .turnedOff }
    // A client without a handler needs nobody's consent: no file to read.
    if consentHandlerSet == false { return .allowed }
    let consent = self.consent
    if consent == .granted { return .allowed }
    return consentHandlerSet ?? (consent == .required) ? .awaitingConsent : .allowed
  }

  // MARK: - The `disabled` switch

  /// Whether Crumbs records and sends here (no `disabled` file).
  package var isEnabled: Bool { !Syscall.fileExists(path(.disabled)) }

  /// Turns Crumbs off here (writes `disabled`) or back on (removes it; on already is no error).
  package func setEnabled(_ enabled: Bool) throws(SystemCallError) {
    if enabled {
      do {
        try Syscall.unlink(path(.disabled))
      } catch {
        guard error.errno == .noSuchFileOrDirectory else { throw error }
      }
    } else {
      try Syscall.writeFileAtomically(path(.disabled), Array("disabled\n".utf8))
    }
  }

  // MARK: - State files

  /// The files the client and the collector keep in the directory itself, each written whole
  /// through a temporary copy (Syscall.writeFileAtomically): a process killed mid-write leaves
  /// `<name>.tmp-<writer>`, and `removeAbandonedTemporaryFiles` sweeps it. A file added there is
  /// added here, or its leftovers stay for good (a crash loop left one a launch).
  package static let stateFiles: Set<String> = Set(
    [Name.sessionMetrics, .crashLoopTally, .consent, .disabled].map(\.rawValue))

  /// Removes what writers killed mid-write left of `stateFiles` and in the queued summaries' and
  /// closing spans' folders (AbandonedFiles: only when the writer is gone), for whoever processes the
  /// directory: the client at start, the collector at each pass. Returns the paths removed.
  package func removeAbandonedTemporaryFiles() -> [String] {
    AbandonedFiles.removeTemporaryFiles(inFolder: path, of: Self.stateFiles)
      + AbandonedFiles.removeTemporaryFiles(inFolder: path(.sessionSummaries), beneath: path)
      + AbandonedFiles.removeTemporaryFiles(inFolder: path(.closingSpans), beneath: path)
  }

  /// What the client and the collector do with one of the directory's small state files
  /// (`crash-loop.json`, `session-metrics.json`) that they cannot read: it moves to
  /// `quarantine/` with `damage` as its reason (Quarantine, as rings, crash records and report
  /// folders do), so the state starts again from empty without the old bytes being overwritten.
  /// Returns the sentence naming what happened, for the app's `problems` (or the collector's
  /// stderr): bad input is reported and kept, never silently replaced. A file that cannot be
  /// moved is left where it is and the sentence says so (the caller then replaces it: a state
  /// file that stays unreadable would stop every count). Called under the file's own lock,
  /// right before the replacement is written.
  package func quarantine(damaged file: String, what: String, damage: String) -> String {
    do {
      if !Syscall.isDirectory(quarantine) { try Syscall.makeDirectory(quarantine) }
      let moved = try Quarantine.move(file, into: quarantine, reason: "\(what) damaged: \(damage)")
      return "\(what) \(file) damaged (\(damage)); moved to \(moved), counting again from empty"
    } catch {
      return "\(what) \(file) damaged (\(damage)) and could not be quarantined (\(error)); replaced"
    }
  }
}
