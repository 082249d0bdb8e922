// HangWatchdog+Operations.swift — operations (requests, jobs) left open in the in-flight ledger
// past `hangs.operationThreshold`: each is a hang of that operation, even while the pool and
// every heartbeat are fine.
//
// Entry points, in call order (all on the watchdog thread, at each look of `check`):
//   checkOperations(resolution:longest:)   reads the ledger live (BreadcrumbRing.openOperations:
//                                          a seqlock copy of each open entry, no lock, nothing
//                                          the app's threads wait for), asks OperationStalls
//                                          what changed, and handles it:
//     operationHangBegan                   a breadcrumb, the ring header's hang, and — as for any
//                                          hang, once per watch in `minimumReportInterval` — a
//                                          `hang` report with every thread, led by the thread
//                                          that began the operation, held until it ends
//     hangEnded(key:duration:)             the operation ended (it left the ledger): the report
//                                          updated with its whole age and released
//   OperationStalls.observe                the pure rule, tested without threads or clocks
//
// One episode per stuck operation, keyed by the thread that began it and its start in the
// ring's ticks (a rename keeps both): reported when its age reaches the threshold, ended when it
// leaves the ledger, not once per look. The watch an operation's hang is of is its name (`operation "GET /v1/x"`), so
// that many requests of one route stuck at once (a database gone) give one report per
// `minimumReportInterval`, and one breadcrumb while any of them is stuck. As for heartbeats, a
// watchdog that was not scheduled (the process stopped) does not count the time it did not look.
// Not signal-safe.

import CrumbsPlatform

/// What the watchdog concludes from the open operations it reads at each look: the pure rule, in
/// the ledger's monotonic clock (ns).
struct OperationStalls {
  /// One operation, for as long as it is open: the thread that began it and its start in the
  /// ring's ticks (exact: the converted times move a little whenever the ring recalibrates).
  struct Key: Hashable {
    var threadID: UInt32
    var startTicks: UInt64

    init(_ operation: OpenOperation) {
      threadID = operation.threadID
      startTicks = operation.startTicks
    }
  }

  /// The operations stuck now (their episodes going on), as last read.
  private(set) var stuck: [Key: OpenOperation] = [:]
  private var previousLook: UInt64?
  /// Since when the watchdog has looked on time: an operation's age counts from this at least.
  private var lookingSince: UInt64 = 0

  /// Looks at the operations `open` now (a whole read of the ledger; `complete` false when some
  /// entries could not be read, so a stuck one missing from `open` may only have been busy):
  /// those whose age reached `threshold` begin, stuck ones no longer open end (with their age
  /// at this look). A look more than one and a half `longest` after the previous one is late:
  /// ages count from it.
  mutating func observe(
    _ open: [OpenOperation], complete: Bool, now: UInt64, threshold: UInt64, longest: UInt64
  ) -> (began: [(key: Key, operation: OpenOperation, age: UInt64)], ended: [(key: Key, age: UInt64)]) {
    let (latest, overflow) = longest.addingReportingOverflow(longest / 2)
    let onTime = previousLook.map { now >= $0 && (overflow || now - $0 <= latest) } ?? false
    if !onTime { lookingSince = now }
    previousLook = now
    var began: [(key: Key, operation: OpenOperation, age: UInt64)] = []
    var present = Set<Key>()
    for operation in open {
      let key = Key(operation)
      present.insert(key)
      if stuck[key] != nil {
        stuck[key] = operation  // a rename shows in the end's breadcrumb
        continue
      }
      let counted = max(operation.startMonotonicNanoseconds, lookingSince)
      guard now > counted, now - counted >= threshold else { continue }
      stuck[key] = operation
      began.append((key, operation, now &- operation.startMonotonicNanoseconds))
    }
    var ended: [(key: Key, age: UInt64)] = []
    if complete {
      for (key, operation) in stuck where !present.contains(key) {
        stuck[key] = nil
        let start = operation.startMonotonicNanoseconds
        ended.append((key, now > start ? now - start : 0))
      }
    }
    return (began, ended)
  }

  /// Nanoseconds from `now` until an operation of `open` not yet stuck could reach `threshold`;
  /// `resolution` while one is stuck (to see its end), never less, never more than `longest`.
  func wait(_ open: [OpenOperation], now: UInt64, threshold: UInt64, resolution: UInt64, longest: UInt64)
    -> UInt64
  {
    var wait = stuck.isEmpty ? longest : resolution
    for operation in open {
      let due = max(operation.startMonotonicNanoseconds, lookingSince) &+ threshold
      wait = min(wait, due > now ? due - now : 0)
    }
    return max(wait, resolution)
  }
}

extension HangWatchdog {
  /// The ongoing-hang key of an operation's episode (never a heartbeat's name: it starts with a
  /// NUL).
  static func operationHangKey(_ key: OperationStalls.Key) -> String {
    "\u{0}operation \(key.threadID) \(key.startTicks)"
  }

  /// The watch an operation's hang is of, as reports and the ring header name it.
  static func operationWatch(_ name: String) -> String { "operation \"\(name)\"" }

  /// One look at the ledger when `operationThreshold` is set; returns the nanoseconds until the
  /// next look it needs (UInt64.max when it needs none).
  func checkOperations(resolution: UInt64, longest: UInt64) -> UInt64 {
    guard let threshold = detection.usableOperationThreshold, let client else { return .max }
    let limit = StallTracker.nanoseconds(threshold)
    let ledger = client.ring.openOperations()
    let open = ledger?.open ?? []
    let now = SystemClock.monotonicNanoseconds()
    let (changes, wait) = hangs.withLock { hangs in
      let changes = hangs.operations.observe(
        open, complete: (ledger?.unreadable ?? 0) == 0, now: now, threshold: limit, longest: longest)
      let stuck = hangs.operations.stuck
      let waiting = open.filter { stuck[OperationStalls.Key($0)] == nil }
      return (
        changes,
        hangs.operations.wait(waiting, now: now, threshold: limit, resolution: resolution, longest: longest)
      )
    }
    for ended in changes.ended { hangEnded(key: Self.operationHangKey(ended.key), duration: ended.age) }
    for began in changes.began {
      operationHangBegan(began.operation, key: began.key, age: began.age, threshold: threshold, now: now)
    }
    return wait
  }

  /// An operation open for `age` (past `threshold` seconds): a hang of it.
  func operationHangBegan(
    _ operation: OpenOperation, key: OperationStalls.Key, age: UInt64, threshold: Double, now: UInt64
  ) {
    guard let client, client.isEnabled else { return }
    let watch = Self.operationWatch(operation.name)
    // One breadcrumb while any operation of this name is stuck, not one per request.
    let quiet = hangs.withLock { $0.ongoing.values.contains { $0.watch == watch } }
    var attributes = [
      HangFacts.operationKey: operation.name, HangFacts.operationThreadKey: String(operation.threadID),
    ]
    if let trace = operation.trace {
      attributes[HangFacts.operationTraceIDKey] = trace.traceID
      attributes[HangFacts.operationSpanIDKey] = trace.spanID
    }
    if !quiet {
      client.ring.append(
        "hang: \(watch) open for \(HangFacts.text(age))", level: .error, type: .system,
        attributes: BreadcrumbAttributes(
          [(key: HangFacts.watchKey, value: watch)] + attributes.sorted { $0.key < $1.key }))
    }
    client.tell(.hangBegan(watch: watch))
    let report = reportHang(
      key: Self.operationHangKey(key), watch: watch, sinceWall: operation.startWallNanoseconds, lasted: age,
      threshold: threshold, now: now, attributes: attributes, quiet: quiet,
      lead: { threads in threads.first { $0.id == Int(operation.threadID) } },
      message: { lead in
        Self.operationMessage(operation, age: age, threshold: threshold)
          // Async code may have left it; a thread that ended is not in the capture.
          + (lead == nil ? " (a thread not running any more: the report leads with the watchdog's)" : "")
      })
    CrumbsClient.hangWatchdogEvents.withLock { $0 }?(.began(watch: watch, report: report))
  }

  /// `operation "GET /v1/orders/:id" (trace 4bf9…) open for 5.2 s (threshold 5.0 s), begun on
  /// thread 1234`.
  static func operationMessage(_ operation: OpenOperation, age: UInt64, threshold: Double) -> String {
    var text = "operation \"\(operation.name)\""
    if let trace = operation.trace { text += " (trace \(trace.traceID), span \(trace.spanID))" }
    text +=
      " open for \(HangFacts.text(age)) (threshold \(HangFacts.text(StallTracker.nanoseconds(threshold))))"
    return text + ", begun on thread \(operation.threadID)"
  }
}
