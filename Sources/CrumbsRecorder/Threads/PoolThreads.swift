// PoolThreads.swift — the threads of Swift concurrency's cooperative pool on Linux, recognised
// without a signal, and a look at their kernel state that sends none (PoolSeatLook).
//
// On Linux the pool is libdispatch's global root queues that are not "overcommit", one per QoS,
// each as wide as the CPUs the process may run on (its seats). libdispatch 6.3 names each worker
// thread after its root queue: the last 15 bytes of the label ("com.apple.root.default-qos" →
// `oot.default-qos`), which /proc/self/task/TID/comm shows (docs/platform-facts.md, and
// PoolCensusTests shows it with a real child). Later libdispatch names every worker
// `DispatchWorker` (overcommit ones too): such a thread is taken as a pool thread of unknown QoS.
// Earlier ones left the creating thread's name: nothing is recognised there.
//
// Entry points:
//   DispatchPools.pool(ofThreadNamed:)   which pool a thread name says (nil: none)
//   DispatchPools.seats()                the seats of each pool (CPUs allowed, as libdispatch counts)
//   PoolSeatLook.look(now:)              one look: every pool thread, running or blocked in a
//                                        system call, and since when it has been blocked in that
//                                        same call without running once (/proc/self/task: the
//                                        listing every fourth look, each new thread's comm, each
//                                        pool thread's syscall and schedstat files)
// Not signal-safe (allocates, opens files).

import CrumbsPlatform

/// libdispatch's root queues as their worker threads name them.
package enum DispatchPools {
  /// The QoS names of the root queues that make the cooperative pool, highest first.
  package static let qualities = [
    "user-interactive", "user-initiated", "default", "utility", "background", "maintenance",
  ]

  /// What libdispatch 6.3 names a root queue's worker: the last 15 bytes of its label (Linux keeps
  /// 15 bytes of a thread name).
  package static func threadName(quality: String, overcommit: Bool = false) -> String {
    let label = "com.apple.root.\(quality)-qos" + (overcommit ? ".overcommit" : "")
    return String(decoding: label.utf8.suffix(15), as: UTF8.self)
  }

  /// The name later libdispatch gives every worker, whatever its queue.
  package static let anonymousWorkerName = "DispatchWorker"
  /// The pool a thread of `anonymousWorkerName` is counted in.
  package static let unknownQuality = "unnamed"

  private static let byName: [String: String] = Dictionary(
    qualities.map { (threadName(quality: $0), $0) }, uniquingKeysWith: { first, _ in first })

  /// The pool (its QoS name) of a thread named `name`; nil for any other thread, overcommit
  /// workers included (serial queues' work, never the pool's).
  package static func pool(ofThreadNamed name: String) -> String? {
    if let quality = byName[name] { return quality }
    return name == anonymousWorkerName ? unknownQuality : nil
  }

  /// Seats per pool: the CPUs the process (`self`, or a pid) may run on (its affinity, as
  /// libdispatch's `active_cpus` counts them), else the CPUs online here.
  package static func seats(process: String = "self") -> Int {
    var buffer = [UInt8](repeating: 0, count: 4096)
    if let count = try? Syscall.readSmallFile("/proc/\(process)/status", into: &buffer),
      let allowed = cpusAllowed(buffer[..<count])
    {
      return allowed
    }
    return Syscall.onlineCPUCount()
  }

  /// The number of bits set in status's `Cpus_allowed:` mask (hex words joined by commas).
  static func cpusAllowed(_ bytes: ArraySlice<UInt8>) -> Int? {
    let lines = bytes.split(separator: 0x0a)
    guard let line = lines.first(where: { $0.starts(with: "Cpus_allowed:".utf8) }) else { return nil }
    var count = 0
    for byte in line.dropFirst("Cpus_allowed:".utf8.count).prefix(4096) {
      switch byte {
      case 0x30...0x39: count += (byte - 0x30).nonzeroBitCount
      case 0x61...0x66: count += (byte - 0x61 + 10).nonzeroBitCount
      case 0x2c, 0x09, 0x20: continue
      default: return nil
      }
    }
    return count > 0 ? count : nil
  }
}

/// A look at the pool's threads through their kernel files, without a signal: which are blocked
/// in a system call, and since when without running once. Keeps what earlier looks saw (one
/// per watchdog look); one owner at a time.
package struct PoolSeatLook {
  /// One pool thread as the last look found it.
  package struct Seat: Sendable, Equatable {
    package var threadID: UInt32
    /// The pool's QoS name (`default`, `user-initiated`, …; `unnamed` for a `DispatchWorker`).
    package var pool: String
    /// The system call it is blocked in; nil when it runs (or is outside any call).
    package var systemCall: Int?
    package var systemCallName: String?
    /// A futex wait with a timeout (what an idle worker's wait for work is: at most 5 s, then
    /// it ends or the thread does).
    package var timedFutexWait = false
    /// When a look first saw it in this same call without it having run since (monotonic ns):
    /// it has been blocked at least since then.
    package var blockedSince: UInt64?
  }

  private struct Known {
    var pool: String?
    /// Looks that read its name: a thread just started may not have its name yet.
    var namings: Int
  }

  private struct Blocked {
    var line: [UInt64]
    var runs: UInt64?
    var since: UInt64
  }

  private var known: [UInt32: Known] = [:]
  private var blocked: [UInt32: Blocked] = [:]
  private var buffer = [UInt8](repeating: 0, count: 512)

  /// Looks between two listings of /proc/self/task: the listing is what a look costs in a
  /// process of many threads (the kernel walks them all), while the pool's threads are few. In
  /// between, only the pool threads known are read; a new one is seen at the next listing.
  package static let lookingsPerListing = 4
  private var looksSinceListing = Int.max

  package init() {}

  /// Every pool thread now. A thread is blocked since the first look that saw it in the same
  /// call, arguments and all, when schedstat's count of times it ran has not moved since (a
  /// thread that woke and waited again starts over).
  package mutating func look(now: UInt64) -> [Seat] {
    looksSinceListing = looksSinceListing == .max ? .max : looksSinceListing + 1
    guard looksSinceListing >= Self.lookingsPerListing else {
      var seats: [Seat] = []
      for (tid, entry) in known {
        guard let pool = entry.pool else { continue }
        if let seat = read(tid, pool: pool, now: now) { seats.append(seat) } else { forget(tid) }
      }
      return seats
    }
    guard let names = try? Syscall.directoryEntries("/proc/self/task") else { return [] }
    looksSinceListing = 0
    var seats: [Seat] = []
    var present = Set<UInt32>()
    for name in names {
      guard let tid = UInt32(name) else { continue }
      present.insert(tid)
      var entry = known[tid] ?? Known(pool: nil, namings: 0)
      // Named at its first two listings: libdispatch names a worker as it starts, so a thread
      // seen before it did is named at the next.
      if entry.namings < 2 {
        entry.namings += 1
        if let count = try? Syscall.readSmallFile("/proc/self/task/\(tid)/comm", into: &buffer) {
          let comm = buffer[..<count].last == 0x0a ? buffer[..<(count - 1)] : buffer[..<count]
          entry.pool = DispatchPools.pool(ofThreadNamed: String(decoding: comm, as: UTF8.self))
        }
        known[tid] = entry
      }
      guard let pool = entry.pool else { continue }
      if let seat = read(tid, pool: pool, now: now) { seats.append(seat) }
    }
    // Threads that ended: forgotten (their ids may come back as other threads).
    if known.count > present.count {
      known = known.filter { present.contains($0.key) }
      blocked = blocked.filter { present.contains($0.key) }
    }
    return seats
  }

  private mutating func forget(_ tid: UInt32) {
    known[tid] = nil
    blocked[tid] = nil
  }

  /// The thread's seat now; nil when its files are gone (it ended).
  private mutating func read(_ tid: UInt32, pool: String, now: UInt64) -> Seat? {
    var seat = Seat(threadID: tid, pool: pool)
    guard let count = try? Syscall.readSmallFile("/proc/self/task/\(tid)/syscall", into: &buffer) else {
      return nil
    }
    guard case .inCall(let number, let arguments)? = ProcText.systemCall(buffer[..<count]) else {
      blocked[tid] = nil
      return seat
    }
    seat.systemCall = number
    seat.systemCallName = SystemCallNames.name(number)
    // FUTEX_WAIT or FUTEX_WAIT_BITSET with a timeout pointer.
    seat.timedFutexWait =
      number == SystemCallNames.futex && arguments.count >= 4 && [0, 9].contains(arguments[1] & 0x7f)
      && arguments[3] != 0
    let runs = (try? Syscall.readSmallFile("/proc/self/task/\(tid)/schedstat", into: &buffer)).flatMap {
      Self.timesRun(buffer[..<$0])
    }
    let key = [UInt64(number)] + arguments
    if let previous = blocked[tid], previous.line == key, previous.runs == runs {
      seat.blockedSince = previous.since
    } else {
      blocked[tid] = Blocked(line: key, runs: runs, since: now)
      seat.blockedSince = now
    }
    return seat
  }

  /// schedstat's third field: how many times the thread was put on a CPU ("RUN WAIT COUNT").
  static func timesRun(_ bytes: ArraySlice<UInt8>) -> UInt64? {
    let fields = bytes.prefix(128).split(whereSeparator: { $0 == 0x20 || $0 == 0x0a })
    guard fields.count >= 3, fields[2].count <= 19 else { return nil }
    var value: UInt64 = 0
    for byte in fields[2] {
      guard byte >= 0x30, byte <= 0x39 else { return nil }
      value = value &* 10 &+ UInt64(byte - 0x30)
    }
    return value
  }
}
