// PoolCensus.swift — the cooperative pool's seats in a live capture: for each pool thread
// (recognised by name, DispatchPools, or by a Swift job on its stack), whether it waits for work
// (idle), runs, or is blocked in the kernel — in which system call, under which API and which
// app frame (the first frame in the app's own code). Hang reports lead with it and `crumbs
// threads` prints it first: "2 of 2 pool seats blocked: 2 in `ImageCache.load()`
// (DispatchSemaphore.wait)".
//
// Entry point: PoolCensus.take(threads:waits:seats:mainThread:) over a capture's symbolicated
// threads and its waits (ThreadWaits), then `text`. Not signal-safe.

import CrumbsRecorder

/// The pool's seats at one capture.
public struct PoolCensus: Sendable, Equatable, Codable {
  /// One pool thread (or the main thread, when watched).
  public struct Seat: Sendable, Equatable, Codable {
    public enum State: String, Sendable, Codable {
      /// Waiting for work, outside any job: a free seat.
      case idle
      /// Running a job, not in a system call.
      case running
      /// Running a job, blocked in the kernel.
      case blocked
    }
    public var threadID: UInt32
    public var threadName: String?
    /// The pool's QoS name (`default`, `user-initiated`, …), or `main` for the main thread.
    public var pool: String
    public var state: State
    /// Blocked: the system call's name (`futex`, `nanosleep`, …).
    public var systemCall: String?
    /// Blocked: the API the app called that blocks (`DispatchSemaphore.wait`, `usleep`), when
    /// the frames name it.
    public var call: String?
    /// The first frame in the app's own code, innermost first.
    public var appFrame: String?
  }

  /// Seats of each pool: the CPUs the process may run on.
  public var seatsPerPool: Int
  /// Every pool thread, then the main thread when asked for.
  public var seats: [Seat]

  /// Seats occupied (running or blocked) in the pools, the main thread aside.
  public var occupied: Int { seats.filter { $0.pool != Self.mainPool && $0.state != .idle }.count }
  /// Seats blocked in the kernel in the pools, the main thread aside.
  public var blocked: Int { seats.filter { $0.pool != Self.mainPool && $0.state == .blocked }.count }

  static let mainPool = "main"

  /// The census of a capture's `threads` (symbolicated) and `waits`. Each pool has `seats`
  /// seats; with `mainThread`, the main thread (`mainThreadID`) is counted too. Nil when the
  /// capture holds no pool thread and no main thread was asked for.
  public static func take(
    threads: [CrashReport.Thread], waits: ThreadWaits?, seats: Int, mainThreadID: Int? = nil
  ) -> PoolCensus? {
    let calls = Dictionary(
      (waits?.threads ?? []).map { ($0.threadID, $0) }, uniquingKeysWith: { first, _ in first })
    var found: [Seat] = []
    var main: Seat?
    for thread in threads {
      let tid = UInt32(clamping: thread.id)
      let isMain = thread.id == mainThreadID
      let job = jobFrames(thread.frames)
      let runsSwiftJob = job.contains { isConcurrencyRuntime($0.module) }
      let named = thread.name.flatMap(DispatchPools.pool(ofThreadNamed:))
      guard isMain || named != nil || (runsSwiftJob && job.count < thread.frames.count) else { continue }
      var seat = Seat(
        threadID: tid, threadName: thread.name, pool: isMain ? mainPool : named ?? "default", state: .idle)
      let app = job.firstIndex { isAppFrame($0) }
      if !isMain, app == nil, !runsSwiftJob {
        found.append(seat)
        continue
      }
      if let app { seat.appFrame = job[app].function }
      if let wait = calls[tid], let number = wait.systemCall {
        seat.state = .blocked
        seat.systemCall = wait.systemCallName ?? "system call \(number)"
        seat.call = api(job, below: app ?? job.count)
      } else {
        seat.state = .running
      }
      if isMain { main = seat } else { found.append(seat) }
    }
    guard !found.isEmpty || main != nil else { return nil }
    return PoolCensus(seatsPerPool: max(1, seats), seats: found + (main.map { [$0] } ?? []))
  }

  /// The census in words, the pools with an occupied seat first ("2 of 2 pool seats blocked:
  /// 2 in `load()` (DispatchSemaphore.wait); 1 idle pool thread"); the main thread last.
  public var text: String {
    var parts: [String] = []
    let pools = DispatchPools.qualities + [DispatchPools.unknownQuality]
    let inPools = seats.filter { $0.pool != Self.mainPool }
    for pool in pools {
      let mine = inPools.filter { $0.pool == pool }
      let busy = mine.filter { $0.state != .idle }
      guard !busy.isEmpty else { continue }
      let blocked = busy.filter { $0.state == .blocked }
      let running = busy.count - blocked.count
      var text = pool == "default" ? "" : "\(pool) pool: "
      text += "\(blocked.count) of \(max(seatsPerPool, busy.count)) pool seats blocked"
      if !blocked.isEmpty { text += ": " + Self.groups(blocked).joined(separator: ", ") }
      if running > 0 { text += "; \(running) running" }
      parts.append(text)
    }
    let idle = inPools.filter { $0.state == .idle }.count
    if parts.isEmpty {
      parts.append("0 of \(seatsPerPool) pool seats occupied")
    }
    if idle > 0 { parts.append("\(idle) idle pool thread\(idle == 1 ? "" : "s")") }
    if let main = seats.first(where: { $0.pool == Self.mainPool }) {
      parts.append(
        main.state == .blocked
          ? "main thread blocked: " + Self.groups([main]).joined() : "main thread running")
    }
    return parts.joined(separator: "; ")
  }

  /// "2 of 8 pool seats blocked for 40 s in `Legacy.fetch()` (DispatchSemaphore.wait)": the
  /// blocked seats among `threadIDs` (the ones a look found blocked for `duration`).
  public func blockedText(_ threadIDs: Set<UInt32>, duration: String) -> String {
    let chosen = seats.filter { $0.state == .blocked && threadIDs.contains($0.threadID) }
    let width = max(seatsPerPool, occupied)
    return "\(chosen.count) of \(width) pool seats blocked for \(duration) "
      + Self.groups(chosen, counted: chosen.count > 1).joined(separator: ", ")
  }

  /// Blocked seats grouped by app frame and call, the largest group first: "3 in `load()`
  /// (DispatchSemaphore.wait)", "1 in `usleep`".
  static func groups(_ blocked: [Seat], counted: Bool = true) -> [String] {
    var order: [String] = []
    var counts: [String: Int] = [:]
    for seat in blocked {
      let call = seat.call ?? seat.systemCall ?? "a system call"
      let key = seat.appFrame.map { "in `\($0)` (\(call))" } ?? "in `\(call)`"
      if counts[key] == nil { order.append(key) }
      counts[key, default: 0] += 1
    }
    let sorted = order.enumerated().sorted {
      (counts[$0.element]!, -$0.offset) > (counts[$1.element]!, -$1.offset)
    }
    return sorted.map { counted ? "\(counts[$0.element]!) \($0.element)" : $0.element }
  }

  // MARK: - Reading the frames

  /// The frames of the job a pool thread runs: those inner to libdispatch's worker loop
  /// (`_dispatch_worker_thread`); all of them when it is not found.
  static func jobFrames(_ frames: [CrashReport.Frame]) -> ArraySlice<CrashReport.Frame> {
    guard let loop = frames.firstIndex(where: { $0.function == "_dispatch_worker_thread" }) else {
      return frames[...]
    }
    return frames[..<loop]
  }

  /// Libraries of the system and the toolchain, by file name: never "the app's own code".
  static let systemLibraries = [
    "libc.so", "libc-", "ld-linux", "libm.so", "libpthread", "librt", "libdl", "libdispatch",
    "libBlocksRuntime", "libswift", "libFoundation", "lib_Foundation", "libicu", "libstdc++", "libgcc_s",
    "libcurl", "libz.so", "libxml2", "liblz4",
  ]

  static func isSystem(_ module: String?) -> Bool {
    guard let module else { return true }
    let file = module.split(separator: "/").last.map(String.init) ?? module
    return systemLibraries.contains { file.hasPrefix($0) }
  }

  static func isConcurrencyRuntime(_ module: String?) -> Bool {
    module?.contains("libswift_Concurrency") == true
  }

  /// A named frame in a module of the app's (not a system library), and not Crumbs' own thread
  /// trampoline (every thread started while the crash handler is installed begins in it).
  static func isAppFrame(_ frame: CrashReport.Frame) -> Bool {
    guard let function = frame.function, !isSystem(frame.module) else { return false }
    return !function.hasPrefix("crumbs_")
  }

  /// The API the app called, from the frames inner to the app frame at `index`: the nearest
  /// named one, libdispatch's internals named as Swift calls them.
  static func api(_ frames: ArraySlice<CrashReport.Frame>, below index: Int) -> String? {
    var position = index
    while position > frames.startIndex {
      position -= 1
      guard let function = frames[position].function else { continue }
      return publicNames[function] ?? function
    }
    return nil
  }

  /// libdispatch's internal functions (what the stack shows: the public entry tail-calls them)
  /// by the Swift API that reaches them.
  static let publicNames = [
    "dispatch_semaphore_wait": "DispatchSemaphore.wait",
    "_dispatch_semaphore_wait_slow": "DispatchSemaphore.wait",
    "_dispatch_sema4_wait": "DispatchSemaphore.wait",
    "_dispatch_sema4_timedwait": "DispatchSemaphore.wait",
    "dispatch_group_wait": "DispatchGroup.wait",
    "_dispatch_group_wait_slow": "DispatchGroup.wait",
    "_dispatch_sync_f_slow": "DispatchQueue.sync",
    "__DISPATCH_WAIT_FOR_QUEUE__": "DispatchQueue.sync",
  ]
}

extension HangFacts {
  /// The pool's census in words (PoolCensus.text), on every hang report whose capture holds a
  /// pool thread.
  package static let poolKey = "crumbs.hang.pool"
  /// Pool seats blocked in the kernel at the capture.
  package static let poolBlockedKey = "crumbs.hang.pool.blocked"
  /// Pool seats occupied (blocked or running) at the capture.
  package static let poolOccupiedKey = "crumbs.hang.pool.occupied"
  /// Seats of each pool (the CPUs the process may run on).
  package static let poolSeatsKey = "crumbs.hang.pool.seats"

  /// `census` as a report's attributes.
  package static func poolAttributes(_ census: PoolCensus) -> [String: String] {
    [
      poolKey: census.text, poolBlockedKey: String(census.blocked), poolOccupiedKey: String(census.occupied),
      poolSeatsKey: String(census.seatsPerPool),
    ]
  }
}
