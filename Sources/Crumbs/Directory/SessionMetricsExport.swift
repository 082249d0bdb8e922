// SessionMetricsExport.swift — the per-release session counts (SessionMetrics.swift) as OTLP
// metrics, so that any OTel backend (Prometheus, Grafana…) computes crash-free sessions per
// release without a crash backend: one monotonic cumulative Sum, `crumbs.sessions`, with one
// data point per (`service.version`, `crumbs.session.end`), end ∈ clean, crashed, abnormal,
// terminated_by_signal, hang. The ends part the sessions: their sum is the release's sessions.
//
// Entry points, in call order:
//   SessionMetricsExport.event(directory:)   SessionSummaryOutbox.queuedEvents, after the
//                                            summaries: the counts as one event when a session
//                                            was counted since they last went out
//   [ReportUploader sends it like the summaries — consent, hooks, rate limit, retry policy —
//    to the OTLP destinations' `/v1/metrics` (OTLPDestination+Metrics.swift)]
//   SessionMetricsExport.revision(of:)       SessionSummaryOutbox.remove: the revision it
//                                            carried is recorded as exported
//
// Why cumulative: the values are the counts since the release was first counted, kept in
// session-metrics.json with that start time, so a restart, a lost request or one sent twice
// (delivery is at least once) changes nothing a backend computes: the next request carries the
// totals again. Deltas would have to be sent exactly once. Each release is one resource: its
// last counted session's, without what is one process's alone (SessionMetricsFile.perProcessKeys),
// and with `service.instance.id` = the install id, so that each install's series are its own.
// `hang` is a session killed while its watchdog saw a hang going on (the ring header's record of
// it, UncleanEndCause.hang), not counted as `abnormal` too; a hang the session outlived is a
// report, and the session's end is how it ended later. Not signal-safe.

import CrumbsPlatform

enum SessionMetricsExport {
  static let metricName = "crumbs.sessions"
  /// The outbox key's prefix; the revision follows.
  static let keyPrefix = "crumbs.sessions@"

  /// The counts as a metrics event, when they changed since they last went out.
  static func event(directory: String) -> OutboxEvent? {
    guard let counts = SessionMetricsFile.unexported(directory: directory) else { return nil }
    return OutboxEvent(
      id: metricName, key: keyPrefix + String(counts.revision),
      metrics: batch(counts.releases, installID: counts.installID, now: SystemClock.wallNanoseconds()))
  }

  /// The revision a metrics event carried; nil for any other event.
  static func revision(of event: OutboxEvent) -> Int? {
    guard event.metrics != nil, event.key.hasPrefix(keyPrefix) else { return nil }
    return Int(event.key.dropFirst(keyPrefix.count))
  }

  /// One resource per release, each with its five data points.
  static func batch(_ releases: [String: ReleaseCounts], installID: String, now: UInt64) -> OTLPMetricBatch {
    let resources = releases.sorted { $0.key < $1.key }.map { version, counts in
      var resource = counts.resource
      resource["service.instance.id"] = installID
      if version.isEmpty { resource["service.version"] = nil } else { resource["service.version"] = version }
      let points = counts.byEnd.map { end, value in
        OTLPSumPoint(
          attributes: (version.isEmpty ? [] : [OTLPAttribute("service.version", .string(version))])
            + [OTLPAttribute("crumbs.session.end", .string(end))],
          startTimeUnixNano: counts.firstCountedUnixNano,
          timeUnixNano: max(now, counts.lastCountedUnixNano), value: Int64(value))
      }
      let sum = OTLPSum(
        name: metricName, description: "Ended sessions of this release, by how they ended", unit: "{session}",
        points: points)
      return (resource: OTLPDestination.resourceAttributes(resource), sums: [sum])
    }
    return OTLPMetricBatch(resources: resources, scopeName: "crumbs", scopeVersion: CrumbsVersion.string)
  }
}
