// ThreadWaits.swift — what each thread of a live capture waits on, and who it waits for: read
// after the capture, without a signal, from the kernel's per-thread files
// (/proc/self/task/TID/syscall: the system call and its arguments; …/stat: the scheduler state).
// A thread in a futex wait is matched to the lock its address belongs to, and the lock's owner
// read where the lock records one (ThreadWaits+LockOwners.swift: glibc's mutex and rwlock,
// priority-inheritance locks such as Swift's Synchronization.Mutex; condition variables and
// semaphores have none), only through a checked read (process_vm_readv) and only believed when
// the tid is a thread of this process; else "owner unknown", and why.
// The wait-for graph (thread → owner) gives the verdict: a cycle is a deadlock; else the
// longest chain, ending at a thread that runs or blocks in some call.
//
// Entry point: ThreadWaits.read(threads:skipping:) (LiveThreadCapture.capture calls it), then
// verdict(from:) and describe(_:names:) for a report. Not signal-safe (allocates, opens files).

import CrumbsPlatform

/// What one thread did in the kernel when a live capture looked.
public struct ThreadWait: Sendable, Equatable, Codable {
  /// Kernel thread id.
  public var threadID: UInt32
  /// Its scheduler state letter from /proc (`R` running, `S` sleeping, `D` uninterruptible,
  /// `T` stopped, …), read for a thread in no system call; nil when in one, or unreadable.
  public var state: String?
  /// The system call it is blocked in; nil when it runs, or waits outside any call.
  public var systemCall: Int?
  /// That call's name, for the calls that explain a wait (futex, nanosleep, read, poll, …).
  public var systemCallName: String?
  /// The call's six arguments as the kernel shows them.
  public var arguments: [UInt64]?
  /// In a futex wait: the address waited on.
  public var lockAddress: UInt64?
  /// The kind of lock that address belongs to, when its words fit a known layout.
  public var lockKind: LockKind?
  /// Where that lock begins (an rwlock's or a condition variable's futex lies inside it); nil
  /// when no layout fit, or two did.
  public var lockObject: UInt64?
  /// On an rwlock: whether it asked to write (else to read).
  public var wantsToWrite: Bool?
  /// On an rwlock held by readers: how many (readers have no owner).
  public var readers: UInt32?
  /// The lock's owner's tid, read from the lock.
  public var owner: UInt32?
  /// In a futex wait without `owner`: why none could be named ("no owner" for a lock that
  /// has none).
  public var ownerUnknown: String?

  /// The locks a futex wait is recognised as.
  public enum LockKind: String, Sendable, Codable {
    /// glibc's `pthread_mutex_t` (NIOLock, Foundation's locks).
    case mutex
    /// A priority-inheritance futex: Swift's `Synchronization.Mutex` on Linux, or a
    /// `PTHREAD_PRIO_INHERIT` mutex.
    case priorityInheritance = "pi_mutex"
    /// glibc's `pthread_rwlock_t`.
    case rwlock
    /// glibc's `pthread_cond_t`, not signalled yet.
    case conditionVariable = "condition_variable"
    /// glibc's `sem_t` (and what waits on one, such as `DispatchSemaphore`).
    case semaphore

    /// In words: "mutex", "PI mutex", "rwlock", "condition variable", "semaphore".
    public var text: String {
      switch self {
      case .mutex: "mutex"
      case .priorityInheritance: "PI mutex"
      case .rwlock: "rwlock"
      case .conditionVariable: "condition variable"
      case .semaphore: "semaphore"
      }
    }
  }

  public init(threadID: UInt32) { self.threadID = threadID }

  /// The lock as the verdict names it: its start when known, else the futex address.
  public var lock: UInt64? { lockObject ?? lockAddress }

  /// In words: "running", "sleeping in clock_nanosleep", "in read", "waiting for mutex 0x…
  /// held by tid 7", "waiting to read rwlock 0x… held for writing by tid 7", "waiting on a
  /// condition variable 0x…; no owner", "in futex on 0x… (owner unknown: …)".
  public var activity: String {
    if let lock, let kind = lockKind {
      let what: String
      switch kind {
      case .rwlock: what = "waiting to \(wantsToWrite == true ? "write" : "read") rwlock \(hex(lock))"
      case .conditionVariable, .semaphore: what = "waiting on a \(kind.text) \(hex(lock))"
      case .mutex, .priorityInheritance: what = "waiting for \(kind.text) \(hex(lock))"
      }
      if let owner {
        return what + (kind == .rwlock ? " held for writing by tid \(owner)" : " held by tid \(owner)")
      }
      if kind == .conditionVariable || kind == .semaphore || readers != nil {
        return what + "; " + (ownerUnknown ?? "no owner")
      }
      return what + " (owner unknown: \(ownerUnknown ?? "not read"))"
    }
    if let lockAddress {
      return "in futex on \(hex(lockAddress)) (owner unknown: \(ownerUnknown ?? "not read"))"
    }
    if let systemCall {
      let name = systemCallName ?? "system call \(systemCall)"
      return SystemCallNames.sleeps.contains(systemCall) ? "sleeping in \(name)" : "in \(name)"
    }
    switch state {
    case "R": return "running"
    case nil: return "state unknown"
    case let letter?: return "not in a system call (state \(letter))"
    }
  }
}

/// What the wait-for graph says: a deadlock (a cycle) or a chain of waits ending at a thread
/// that waits for nobody this capture could name.
public struct WaitVerdict: Sendable, Equatable, Codable {
  public enum Kind: String, Sendable, Codable {
    case deadlock
    case chain
  }
  public var kind: Kind
  /// The threads in wait order: each waits for the next; in a deadlock the last waits for the
  /// first (not repeated here).
  public var threads: [UInt32]
  /// `locks[i]` is the lock `threads[i]` waits for (one fewer than `threads` in a chain).
  public var locks: [UInt64]
  /// In a chain: what its last thread does (`ThreadWait.activity`).
  public var end: String?
  /// `lockKinds[i]` is the kind of `locks[i]`.
  public var lockKinds: [ThreadWait.LockKind] = []
  /// In a chain: the first frame of its last thread in the app's own code, when the caller
  /// that has the frames found one (`describe` then says "… under `endFrame`").
  public var endFrame: String? = nil

  /// The chain's end in words: what its last thread does, and under which app frame.
  public var endText: String? {
    guard let end else { return nil }
    return endFrame.map { end + " under " + $0 } ?? end
  }

  /// The locks in words: "mutexes 0x…, 0x…" when all are glibc mutexes (or their kinds are not
  /// known), else each with its kind ("rwlock 0x…, PI mutex 0x…").
  public var locksText: String {
    guard lockKinds.count == locks.count, lockKinds.contains(where: { $0 != .mutex }) else {
      return "mutexes " + locks.map(hex).joined(separator: ", ")
    }
    return zip(lockKinds, locks).map { "\($0.text) \(hex($1))" }.joined(separator: ", ")
  }
}

/// Every thread's wait, and the verdict over them.
public struct ThreadWaits: Sendable, Equatable, Codable {
  /// One entry per thread read (the capturing thread left out), in capture order.
  public var threads: [ThreadWait]

  public init(threads: [ThreadWait]) { self.threads = threads }

  /// The graph's verdict. With `start`: a cycle reached from it (a deadlock), else its own
  /// chain when it waits for someone; in every other case the first cycle in thread order, else
  /// the longest chain; nil when no thread waits for a named owner.
  public func verdict(from start: UInt32? = nil) -> WaitVerdict? {
    let edges = Dictionary(
      threads.compactMap { wait in
        wait.owner.map { (wait.threadID, (owner: $0, lock: wait.lock ?? 0, kind: wait.lockKind ?? .mutex)) }
      },
      uniquingKeysWith: { first, _ in first })
    let waits = Dictionary(threads.map { ($0.threadID, $0) }, uniquingKeysWith: { first, _ in first })
    func follow(_ from: UInt32) -> WaitVerdict? {
      var path: [UInt32] = [from]
      var locks: [UInt64] = []
      var kinds: [ThreadWait.LockKind] = []
      var index: [UInt32: Int] = [from: 0]
      var current = from
      // Bounded by the thread count: each step adds a new thread or closes a cycle.
      for _ in 0...threads.count {
        guard let edge = edges[current] else { break }
        locks.append(edge.lock)
        kinds.append(edge.kind)
        if let seen = index[edge.owner] {
          return WaitVerdict(
            kind: .deadlock, threads: Array(path[seen...]), locks: Array(locks[seen...]),
            lockKinds: Array(kinds[seen...]))
        }
        index[edge.owner] = path.count
        path.append(edge.owner)
        current = edge.owner
      }
      guard path.count > 1 else { return nil }
      let end = waits[current]?.activity ?? "running (the capturing thread, or one not read)"
      return WaitVerdict(kind: .chain, threads: path, locks: locks, end: end, lockKinds: kinds)
    }
    if let start, let found = follow(start) { return found }
    var longest: WaitVerdict?
    for wait in threads where edges[wait.threadID] != nil {
      guard let found = follow(wait.threadID) else { continue }
      if found.kind == .deadlock { return found }
      if found.threads.count > (longest?.threads.count ?? 0) { longest = found }
    }
    return longest
  }

  /// `verdict` in words, each thread named by `names` (its name, else its tid):
  /// "deadlock: a (tid 12) → b (tid 13) → a (tid 12) (mutexes 0x…, 0x…)", or "wait chain:
  /// a (tid 12) → b (tid 13) (rwlock 0x…); the last is sleeping in clock_nanosleep under
  /// Worker.backoff()".
  public static func describe(_ verdict: WaitVerdict, names: [UInt32: String]) -> String {
    func name(_ tid: UInt32) -> String {
      if let name = names[tid], !name.isEmpty { return "\(name) (tid \(tid))" }
      return "tid \(tid)"
    }
    switch verdict.kind {
    case .deadlock:
      let cycle = (verdict.threads + verdict.threads.prefix(1)).map(name).joined(separator: " → ")
      return "deadlock: \(cycle) (\(verdict.locksText))"
    case .chain:
      let chain = verdict.threads.map(name).joined(separator: " → ")
      return "wait chain: \(chain) (\(verdict.locksText)); the last is \(verdict.endText ?? "unknown")"
    }
  }

  /// Reads the wait of each thread in `threads` but `skipping` (the capturing thread: it reads,
  /// it does not wait). A thread whose files cannot be read (it ended) gets an entry with
  /// nothing known.
  public static func read(threads: [UInt32], skipping: UInt32?) -> ThreadWaits {
    let live = Set(threads)
    var buffer = [UInt8](repeating: 0, count: 512)
    var result: [ThreadWait] = []
    for tid in threads where tid != skipping {
      var wait = ThreadWait(threadID: tid)
      let line = (try? Syscall.readSmallFile("/proc/self/task/\(tid)/syscall", into: &buffer)).flatMap {
        ProcText.systemCall(buffer[..<$0])
      }
      if case .inCall(let number, let arguments)? = line {
        wait.systemCall = number
        wait.systemCallName = SystemCallNames.name(number)
        wait.arguments = arguments
        if number == SystemCallNames.futex { readFutex(&wait, arguments: arguments, live: live) }
      } else if let count = try? Syscall.readSmallFile("/proc/self/task/\(tid)/stat", into: &buffer) {
        // Only for a thread in no call: a call says more than its state, and each file read
        // costs tens of microseconds a thread.
        wait.state = ProcText.stateLetter(buffer[..<count])
      }
      result.append(wait)
    }
    return ThreadWaits(threads: result)
  }
}

/// Parsing of the kernel's per-thread text files: untrusted bytes, bounded and checked.
enum ProcText {
  enum SystemCallLine: Equatable {
    /// "running": on a CPU, no call to show.
    case running
    /// "-1 SP PC": blocked, but not in a system call.
    case outside
    /// "NR A1 … A6 SP PC".
    case inCall(number: Int, arguments: [UInt64])
  }

  /// /proc/…/syscall: "running", "-1 0xSP 0xPC", or "NR 0xA1 … 0xA6 0xSP 0xPC"; nil for
  /// anything else.
  static func systemCall(_ bytes: ArraySlice<UInt8>) -> SystemCallLine? {
    let fields = bytes.prefix(256).split(whereSeparator: { $0 == 0x20 || $0 == 0x0a }).prefix(10)
    guard let first = fields.first else { return nil }
    if first.elementsEqual("running".utf8) { return .running }
    var number: Int = 0
    var negative = false
    var digits = first[...]
    if digits.first == UInt8(ascii: "-") {
      negative = true
      digits = digits.dropFirst()
    }
    guard !digits.isEmpty, digits.count <= 6 else { return nil }
    for byte in digits {
      guard byte >= 0x30, byte <= 0x39 else { return nil }
      number = number * 10 + Int(byte - 0x30)
    }
    if negative { return .outside }
    let values = fields.dropFirst().map(hexValue)
    guard values.count == 8, values.allSatisfy({ $0 != nil }) else { return nil }
    return .inCall(number: number, arguments: values.prefix(6).map { $0! })
  }

  /// "0x" and up to 16 hex digits, checked.
  static func hexValue(_ field: ArraySlice<UInt8>) -> UInt64? {
    guard field.starts(with: "0x".utf8) else { return nil }
    let digits = field.dropFirst(2)
    guard !digits.isEmpty, digits.count <= 16 else { return nil }
    var value: UInt64 = 0
    for byte in digits {
      let digit: UInt8
      switch byte {
      case 0x30...0x39: digit = byte - 0x30
      case 0x61...0x66: digit = byte - 0x61 + 10
      case 0x41...0x46: digit = byte - 0x41 + 10
      default: return nil
      }
      let (shifted, overflow) = value.multipliedReportingOverflow(by: 16)
      guard !overflow else { return nil }
      value = shifted | UInt64(digit)
    }
    return value
  }

  /// /proc/…/stat's state: the letter after the last ")" (the name before it may hold any
  /// byte, ")" included).
  static func stateLetter(_ bytes: ArraySlice<UInt8>) -> String? {
    guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
    let rest = bytes[(close + 1)...].drop { $0 == 0x20 }
    guard let letter = rest.first, (0x41...0x5a).contains(letter) || (0x61...0x7a).contains(letter) else {
      return nil
    }
    return String(UnicodeScalar(letter))
  }
}

/// The names of the system calls that explain a wait, by this architecture's numbers.
enum SystemCallNames {
  #if arch(x86_64)
    static let futex = 202
    static let sleeps: Set<Int> = [35, 230]
    static let table: [Int: String] = [
      0: "read", 1: "write", 7: "poll", 23: "select", 34: "pause", 35: "nanosleep", 43: "accept",
      45: "recvfrom", 47: "recvmsg", 61: "wait4", 202: "futex", 230: "clock_nanosleep", 232: "epoll_wait",
      247: "waitid", 270: "pselect6", 271: "ppoll", 281: "epoll_pwait", 288: "accept4", 441: "epoll_pwait2",
      449: "futex_waitv",
    ]
  #elseif arch(arm64)
    static let futex = 98
    static let sleeps: Set<Int> = [101, 115]
    static let table: [Int: String] = [
      22: "epoll_pwait", 63: "read", 64: "write", 72: "pselect6", 73: "ppoll", 95: "waitid", 98: "futex",
      101: "nanosleep", 115: "clock_nanosleep", 202: "accept", 207: "recvfrom", 212: "recvmsg",
      242: "accept4",
      260: "wait4", 441: "epoll_pwait2", 449: "futex_waitv",
    ]
  #else
    static let futex = -1
    static let sleeps: Set<Int> = []
    static let table: [Int: String] = [:]
  #endif

  static func name(_ number: Int) -> String? { table[number] }
}

private func hex(_ value: UInt64) -> String { "0x" + String(value, radix: 16) }
