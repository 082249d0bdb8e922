// CrumbsMetrics.swift — release health, hangs and reports as swift-metrics counters, so that a
// server that exports swift-metrics (swift-prometheus…) shows its crash-free rate per release
// with no OTLP destination. An optional product: only a program that names it links
// swift-metrics (docs/metrics.md).
//
// Nothing is counted here: every value comes from an event the client already has
// (CrumbsClient+Observers.swift). The session counts are the Crumbs directory's own
// (SessionMetrics.swift: each ended session counted once, under its own release, whichever
// launch or `crumbs collect` processed it), mirrored as they stand once the previous sessions
// are processed at start:
//   crumbs_sessions_total{release, end}   end ∈ clean, crashed, abnormal, terminated_by_signal,
//                                         hang (ReleaseCounts.byEnd, the OTLP metric's ends);
//                                         cumulative since the release was first counted, so a
//                                         restart continues the series instead of resetting it
//   crumbs_hangs_total{release}           hangs this process's watchdog saw (rate-limited
//                                         reports included); release = the configured version
//   crumbs_reports_total{kind, outcome}   kind ∈ crash, abnormal_termination, non_fatal, hang;
//                                         outcome ∈ stored, delivered, dropped (a destination
//                                         gave up on it); counted by this process
// Every label value is a configured version, a counted release (at most 16 kept:
// SessionMetricsFile.maxReleases) or one of the fixed names above: no unbounded series.
//
// Entry points, in call order:
//   CrumbsMetrics.bootstrap(client:factory:)   once, after CrumbsClient.start
//   [the client's observers: record(_:) on its background, watchdog and uploader threads]
// Not signal-safe.

import CoreMetrics
import Crumbs
import Synchronization

/// Mirrors a client's session counts, hangs and reports into swift-metrics counters. Make one
/// per client with `bootstrap(client:factory:)`, after `MetricsSystem.bootstrap` (or with the
/// backend's factory).
public final class CrumbsMetrics: Sendable {
  /// Ended sessions per release and end, cumulative since the release was first counted.
  public static let sessionsLabel = "crumbs_sessions_total"
  /// Hangs this process's watchdog saw, per configured release.
  public static let hangsLabel = "crumbs_hangs_total"
  /// Reports per kind and outcome (stored, delivered, dropped), counted by this process.
  public static let reportsLabel = "crumbs_reports_total"

  /// The `outcome` values of `crumbs_reports_total`.
  public static let outcomes = ["stored", "delivered", "dropped"]
  /// The `kind` values of `crumbs_reports_total`.
  public static let kinds: [CrashReport.Kind] = [.crash, .abnormalTermination, .nonFatal, .hang]

  /// The configured release (`appVersion`; "" when none), the `release` of the hang counter.
  public let release: String
  private let factory: any MetricsFactory

  /// What one session series was last mirrored from: its release's start (a new start is a
  /// new count: ReleaseCounts.firstCountedUnixNano) and the value then.
  private struct Mirrored {
    var start: UInt64
    var value: Int
  }

  private struct State {
    var sessions: [String: Mirrored] = [:]
    var counters: [String: any CounterHandler] = [:]
  }

  private let state = Mutex(State())

  /// Counts `client`'s sessions, hangs and reports in `factory` (default: the one
  /// `MetricsSystem.bootstrap` installed). Once per client: a second bridge would count every
  /// event twice. The hang and report counters exist at 0 from now on, the session counters
  /// once the previous sessions are processed (at once when they are already).
  @discardableResult
  public static func bootstrap(client: CrumbsClient, factory: any MetricsFactory = MetricsSystem.factory)
    -> CrumbsMetrics
  {
    let metrics = CrumbsMetrics(release: client.configuration.appVersion ?? "", factory: factory)
    client.addObserver { [metrics] event in metrics.record(event) }
    return metrics
  }

  init(release: String, factory: any MetricsFactory) {
    self.release = release
    self.factory = factory
    // A series that appears only at its first increment loses that increment to a rate over
    // it (Prometheus counts from a series' first sample): these start at 0.
    state.withLock { state in
      _ = counter(Self.hangsLabel, [("release", release)], in: &state)
      for kind in Self.kinds {
        for outcome in Self.outcomes {
          _ = counter(Self.reportsLabel, [("kind", kind.rawValue), ("outcome", outcome)], in: &state)
        }
      }
    }
  }

  /// Counts what the client told.
  func record(_ event: CrumbsClientEvent) {
    switch event {
    case .previousSessionsProcessed(let outcome, let metrics):
      for stored in outcome.reports {
        increment(Self.reportsLabel, [("kind", stored.report.kind.rawValue), ("outcome", "stored")])
      }
      if let metrics { mirror(metrics.releases) }
    case .reportStored(let kind):
      increment(Self.reportsLabel, [("kind", kind.rawValue), ("outcome", "stored")])
    case .hangBegan:
      increment(Self.hangsLabel, [("release", release)])
    case .reportDelivered(let kind):
      increment(Self.reportsLabel, [("kind", kind.rawValue), ("outcome", "delivered")])
    case .reportDropped(let kind):
      increment(Self.reportsLabel, [("kind", kind.rawValue), ("outcome", "dropped")])
    }
  }

  /// Brings each release's session series to the directory's counts: up by what was counted
  /// since they were last mirrored, or by the whole count when the release's counting started
  /// anew (forgotten and counted again, or a damaged file set aside). A counter never goes
  /// down. The configured release's series exist from here on, at 0 when it has no ended
  /// session yet, so that its first crash counts.
  func mirror(_ releases: [String: ReleaseCounts]) {
    var releases = releases
    if releases[release] == nil { releases[release] = ReleaseCounts() }
    state.withLock { state in
      for (version, counts) in releases.sorted(by: { $0.key < $1.key }) {
        for (end, value) in counts.byEnd {
          let dimensions = [("release", version), ("end", end)]
          let key = Self.key(Self.sessionsLabel, dimensions)
          let delta: Int
          if let last = state.sessions[key], last.start == counts.firstCountedUnixNano {
            delta = max(0, value - last.value)
          } else {
            delta = value
          }
          state.sessions[key] = Mirrored(start: counts.firstCountedUnixNano, value: value)
          let handler = counter(Self.sessionsLabel, dimensions, in: &state)
          if delta > 0 { handler.increment(by: Int64(clamping: delta)) }
        }
      }
    }
  }

  private func increment(_ label: String, _ dimensions: [(String, String)]) {
    state.withLock { state in counter(label, dimensions, in: &state) }.increment(by: 1)
  }

  /// The counter of `label` and `dimensions`, made at its first use.
  private func counter(_ label: String, _ dimensions: [(String, String)], in state: inout State)
    -> any CounterHandler
  {
    let key = Self.key(label, dimensions)
    if let made = state.counters[key] { return made }
    let made = factory.makeCounter(label: label, dimensions: dimensions)
    state.counters[key] = made
    return made
  }

  private static func key(_ label: String, _ dimensions: [(String, String)]) -> String {
    ([label] + dimensions.map { "\($0.0)=\($0.1)" }).joined(separator: "\u{1F}")
  }
}
