// NextLaunch.swift — the next launch after a crash scenario (CrumbsTestSupport's
// `runCrashScenario`), as far as the reports go: what the child left becomes a stored report.

import CrumbsRecorder
import CrumbsReports
import CrumbsTestSupport

/// The next launch after a crash scenario: processes what the child left in `directory` (as a
/// later session would) and returns the one stored report, or nil when none was made.
package func crashReport(leftIn directory: TestDirectory) throws -> StoredReport? {
  let outcome = PostMortemProcessor(
    directory: try RingDirectory(path: directory.path), store: try ReportStore(directory: directory.path)
  ).run(reportingSession: SessionID())
  return outcome.reports.first
}
