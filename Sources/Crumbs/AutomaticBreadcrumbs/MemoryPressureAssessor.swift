// MemoryPressureAssessor.swift — from samples to breadcrumbs: levels, crossings, rate limit.
//
// Entry points, in call order:
//   MemoryPressureAssessor(thresholds:limits:)
//   assess(sample, triggerFired:) → [MemoryPressureFinding] the findings of one sample against the
//                                   previous one (levels from figures, counters' deltas)
//   decide(findings, now:)        → what to append: a breadcrumb when the level worsens, when a
//                                   discrete event (OOM kill, limit hit) happens, a reminder when a
//                                   level lasts `repeatInterval`, an `info` "relieved" when it ends;
//                                   all through a token bucket, so a storm cannot flood the ring
//
// Pure state machine with injected time: the fixture tests drive it sample by sample.
// Not signal-safe.

/// Where a memory-pressure figure comes from (`memory.source` attribute).
enum MemoryPressureSource: String {
  case psi, psiTrigger = "psi.trigger", cgroup, meminfo
}

/// One thing a sample showed: how bad, from where, in words and figures.
struct MemoryPressureFinding {
  var level: BreadcrumbLevel
  var source: MemoryPressureSource
  var message: String
  var figures: [(String, String)]
  /// A discrete event (an OOM kill, the limit hit, a PSI trigger) rather than a level: always
  /// worth a breadcrumb, even when the level did not change.
  var isEvent: Bool
}

/// Thresholds at which a figure becomes `warning`, `error` and `fatal`.
public struct MemoryPressureThresholds: Sendable, Equatable {
  /// Share of the cgroup's memory limit in use (0...1).
  public var usageWarning = 0.80
  public var usageError = 0.90
  public var usageFatal = 0.97
  /// PSI: percentage of time some task stalled on memory (the larger of avg10 and the share
  /// since the last sample).
  public var someStallWarning = 10.0
  public var someStallError = 40.0
  /// PSI: percentage of time all non-idle tasks stalled on memory.
  public var fullStallError = 10.0
  public var fullStallFatal = 40.0
  /// Share of the machine's memory still available (MemAvailable / MemTotal).
  public var availableWarning = 0.10
  public var availableError = 0.05
  public var availableFatal = 0.02

  public init() {}
}

/// How many memory-pressure breadcrumbs may be appended: a token bucket.
public struct MemoryPressureRateLimit: Sendable, Equatable {
  /// Breadcrumbs that may go out back to back.
  public var burst = 5
  /// One more may go out per this many seconds.
  public var refillSeconds = 10
  /// A level that persists is announced again at most this often.
  public var repeatSeconds = 60

  public init() {}
}

struct MemoryPressureAssessor {
  let thresholds: MemoryPressureThresholds
  let limits: MemoryPressureRateLimit
  private var previous: MemorySample?
  /// The level last announced; nil when none is in force.
  private(set) var currentLevel: BreadcrumbLevel?
  private var lastAnnounced: UInt64 = 0
  private var tokens: Double
  private var tokensUpdated: UInt64?
  /// Breadcrumbs the bucket refused since the last one that went out.
  private(set) var suppressed = 0

  init(thresholds: MemoryPressureThresholds, limits: MemoryPressureRateLimit) {
    self.thresholds = thresholds
    self.limits = limits
    tokens = Double(max(1, limits.burst))
  }

  /// What one sample shows, compared with the previous one.
  mutating func assess(_ sample: MemorySample, triggerFired: Bool) -> [MemoryPressureFinding] {
    defer { previous = sample }
    var findings: [MemoryPressureFinding] = []
    let elapsed = previous.map { sample.monotonicNanoseconds &- $0.monotonicNanoseconds } ?? 0

    if let cgroup = sample.cgroup {
      findings += assessCgroup(cgroup, before: previous?.cgroup)
    }
    if let stall = sample.pressure {
      let someShare = share(stall.someTotalMicroseconds, previous?.pressure?.someTotalMicroseconds, elapsed)
      let fullShare = share(stall.fullTotalMicroseconds, previous?.pressure?.fullTotalMicroseconds, elapsed)
      let some = max(stall.someAverage10, someShare)
      let full = max(stall.fullAverage10, fullShare)
      var level: BreadcrumbLevel?
      if full >= thresholds.fullStallFatal {
        level = .fatal
      } else if full >= thresholds.fullStallError || some >= thresholds.someStallError {
        level = .error
      } else if some >= thresholds.someStallWarning {
        level = .warning
      }
      if triggerFired, level == nil { level = .warning }
      if let level {
        let figures = [
          ("psi.some", percent(some)), ("psi.full", percent(full)),
          ("psi.some_avg10", percent(stall.someAverage10)),
        ]
        let message =
          "memory pressure \(level.name): tasks stalled on memory \(percent(some)) of the time"
          + (full > 0 ? ", all tasks \(percent(full))" : "")
        findings.append(
          .init(
            level: level, source: triggerFired ? .psiTrigger : .psi, message: message, figures: figures,
            isEvent: triggerFired))
      }
    } else if triggerFired {
      findings.append(
        .init(
          level: .warning, source: .psiTrigger, message: "memory pressure warning: the PSI trigger fired",
          figures: [], isEvent: true))
    }
    if let system = sample.system {
      let available = Double(system.availableBytes) / Double(system.totalBytes)
      if let level = Self.level(
        { available <= $0 }, fatal: thresholds.availableFatal, error: thresholds.availableError,
        warning: thresholds.availableWarning)
      {
        findings.append(
          .init(
            level: level, source: .meminfo,
            message:
              "memory pressure \(level.name): \(percent(available * 100)) of system memory available (\(bytes(system.availableBytes)) of \(bytes(system.totalBytes)))",
            figures: [
              ("meminfo.available", String(system.availableBytes)),
              ("meminfo.total", String(system.totalBytes)),
            ], isEvent: false))
      }
    }
    return findings
  }

  private func assessCgroup(_ cgroup: CgroupMemory, before: CgroupMemory?) -> [MemoryPressureFinding] {
    var findings: [MemoryPressureFinding] = []
    var figures: [(String, String)] = [("cgroup.usage", String(cgroup.usageBytes))]
    if let limit = cgroup.limitBytes { figures.append(("cgroup.limit", String(limit))) }
    let label = "cgroup (\(cgroup.version.rawValue))"
    // Counters only count when there is a previous sample of the same cgroup to compare with:
    // a monitor started in a cgroup that was OOM-killed last week reports nothing.
    if let before, before.path == cgroup.path {
      let kills = cgroup.oomKills &- min(cgroup.oomKills, before.oomKills)
      let ooms = cgroup.oomEvents &- min(cgroup.oomEvents, before.oomEvents)
      let maxHits = cgroup.maxEvents &- min(cgroup.maxEvents, before.maxEvents)
      let highHits = cgroup.highEvents &- min(cgroup.highEvents, before.highEvents)
      if kills > 0 {
        findings.append(
          .init(
            level: .fatal, source: .cgroup,
            message: "memory pressure fatal: the OOM killer killed \(kills) process(es) in this \(label)",
            figures: figures + [("cgroup.oom_kill", "+\(kills)")], isEvent: true))
      } else if ooms > 0 || (cgroup.underOOM && !before.underOOM) {
        findings.append(
          .init(
            level: .fatal, source: .cgroup, message: "memory pressure fatal: this \(label) ran out of memory",
            figures: figures + [("cgroup.oom", "+\(ooms)")], isEvent: true))
      } else if maxHits > 0 {
        let counter = cgroup.version == .v1 ? "cgroup.failcnt" : "cgroup.max"
        findings.append(
          .init(
            level: .error, source: .cgroup,
            message: "memory pressure error: this \(label) hit its memory limit \(maxHits) time(s)",
            figures: figures + [(counter, "+\(maxHits)")], isEvent: true))
      } else if highHits > 0 {
        findings.append(
          .init(
            level: .warning, source: .cgroup,
            message: "memory pressure warning: this \(label) went over memory.high \(highHits) time(s)",
            figures: figures + [("cgroup.high", "+\(highHits)")], isEvent: true))
      }
    }
    if let limit = cgroup.limitBytes, limit > 0 {
      let used = Double(cgroup.usageBytes) / Double(limit)
      if let level = Self.level(
        { used >= $0 }, fatal: thresholds.usageFatal, error: thresholds.usageError,
        warning: thresholds.usageWarning)
      {
        findings.append(
          .init(
            level: level, source: .cgroup,
            message:
              "memory pressure \(level.name): \(label) at \(percent(used * 100)) of its limit (\(bytes(cgroup.usageBytes)) of \(bytes(limit)))",
            figures: figures + [("cgroup.percent", percent(used * 100))], isEvent: false))
      }
    }
    return findings
  }

  /// A breadcrumb to append (level, message, attributes), decided from one sample's findings.
  struct Announcement {
    var level: BreadcrumbLevel
    var message: String
    var attributes: [(String, String)]
  }

  /// Decides what to append for `findings` at `now` (monotonic ns): at most one breadcrumb.
  mutating func decide(_ findings: [MemoryPressureFinding], now: UInt64) -> Announcement? {
    refill(now: now)
    let worst = findings.max { lhs, rhs in
      lhs.level != rhs.level ? lhs.level < rhs.level : (!lhs.isEvent && rhs.isEvent)
    }
    guard let worst else {
      guard currentLevel != nil else { return nil }
      currentLevel = nil
      return take(
        Announcement(
          level: .info, message: "memory pressure relieved", attributes: [("memory.pressure.end", "none")]),
        now: now)
    }
    let worsened = currentLevel.map { worst.level > $0 } ?? true
    let event = findings.contains { $0.isEvent }
    let reminder =
      worst.level == currentLevel
      && now &- lastAnnounced >= UInt64(max(1, limits.repeatSeconds)) * 1_000_000_000
    currentLevel = worst.level
    guard worsened || event || reminder else { return nil }
    let chosen =
      event && !worsened ? (findings.filter(\.isEvent).max { $0.level < $1.level } ?? worst) : worst
    var attributes: [(String, String)] = [
      ("memory.pressure", chosen.level.name), ("memory.source", chosen.source.rawValue),
    ]
    attributes += chosen.figures
    return take(Announcement(level: chosen.level, message: chosen.message, attributes: attributes), now: now)
  }

  private mutating func take(_ announcement: Announcement, now: UInt64) -> Announcement? {
    guard tokens >= 1 else {
      suppressed += 1
      return nil
    }
    tokens -= 1
    lastAnnounced = now
    var announcement = announcement
    if suppressed > 0 {
      announcement.attributes.append(("memory.suppressed", String(suppressed)))
      suppressed = 0
    }
    return announcement
  }

  private mutating func refill(now: UInt64) {
    defer { tokensUpdated = now }
    guard let last = tokensUpdated, now > last else { return }
    let seconds = Double(now - last) / 1e9
    tokens = min(Double(max(1, limits.burst)), tokens + seconds / Double(max(1, limits.refillSeconds)))
  }

  /// The highest level whose threshold `reached` says a figure met, fatal first; nil for none.
  private static func level(
    _ reached: (Double) -> Bool, fatal: Double, error: Double, warning: Double
  ) -> BreadcrumbLevel? {
    if reached(fatal) { return .fatal }
    if reached(error) { return .error }
    if reached(warning) { return .warning }
    return nil
  }

  private func share(_ total: UInt64, _ before: UInt64?, _ elapsedNanoseconds: UInt64) -> Double {
    guard let before, total >= before, elapsedNanoseconds > 0 else { return 0 }
    return min(100, Double(total - before) * 1000 / Double(elapsedNanoseconds) * 100)
  }

  private func percent(_ value: Double) -> String {
    let rounded = (value * 10).rounded() / 10
    // A usage far over its limit (counters from kernel files) must not trap Int(_:).
    guard let whole = Int(exactly: rounded) else { return "\(rounded)%" }
    return "\(whole)%"
  }

  private func bytes(_ count: UInt64) -> String {
    let mebibytes = Double(count) / 1_048_576
    if mebibytes >= 10240 { return "\(Int((mebibytes / 1024).rounded())) GiB" }
    return "\(Int(mebibytes.rounded())) MiB"
  }
}
