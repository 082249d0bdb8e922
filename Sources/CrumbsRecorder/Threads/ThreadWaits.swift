// ThreadWaits.swift — what each thread of a live capture waits on, and who it waits for: read
// after the capture, without a signal, from the kernel's per-thread files
// (/proc/self/task/TID/syscall: the system call and its arguments; …/stat: the scheduler state).
// A thread in a futex wait shaped like glibc's mutex lock (FUTEX_WAIT for the value 2) waits on
// a `pthread_mutex_t` whose `__lock` word is the futex: the owner's tid is read from `__owner`,
// 8 bytes further (docs/platform-facts.md), only through a checked read (process_vm_readv) and
// only believed when the lock word is nonzero and the tid is a thread of this process. Every
// other futex (a semaphore, a condition variable) has no owner we can read: "owner unknown".
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
  /// In a futex wait on a glibc mutex: its owner's tid, read from the mutex.
  public var owner: UInt32?
  /// In a futex wait without `owner`: why none could be named.
  public var ownerUnknown: String?

  public init(threadID: UInt32) { self.threadID = threadID }

  /// In words: "running", "in nanosleep", "waiting for mutex 0x… held by tid 7", "in futex on
  /// 0x… (owner unknown: …)".
  public var activity: String {
    if let lockAddress, let owner {
      return "waiting for mutex \(hex(lockAddress)) held by tid \(owner)"
    }
    if let lockAddress {
      return "in futex on \(hex(lockAddress)) (owner unknown: \(ownerUnknown ?? "not read"))"
    }
    if let systemCall {
      return "in \(systemCallName ?? "system call \(systemCall)")"
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
  /// `locks[i]` is the mutex `threads[i]` waits for (one fewer than `threads` in a chain).
  public var locks: [UInt64]
  /// In a chain: what its last thread does (`ThreadWait.activity`).
  public var end: String?
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
        wait.owner.map { (wait.threadID, (owner: $0, lock: wait.lockAddress ?? 0)) }
      },
      uniquingKeysWith: { first, _ in first })
    let waits = Dictionary(threads.map { ($0.threadID, $0) }, uniquingKeysWith: { first, _ in first })
    func follow(_ from: UInt32) -> WaitVerdict? {
      var path: [UInt32] = [from]
      var locks: [UInt64] = []
      var index: [UInt32: Int] = [from: 0]
      var current = from
      // Bounded by the thread count: each step adds a new thread or closes a cycle.
      for _ in 0...threads.count {
        guard let edge = edges[current] else { break }
        locks.append(edge.lock)
        if let seen = index[edge.owner] {
          return WaitVerdict(kind: .deadlock, threads: Array(path[seen...]), locks: Array(locks[seen...]))
        }
        index[edge.owner] = path.count
        path.append(edge.owner)
        current = edge.owner
      }
      guard path.count > 1 else { return nil }
      let end = waits[current]?.activity ?? "running (the capturing thread, or one not read)"
      return WaitVerdict(kind: .chain, threads: path, locks: locks, end: end)
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
  /// "deadlock: a (tid 12) → b (tid 13) → a (tid 12)" (locks 0x…, 0x…), or "a (tid 12) waits
  /// for b (tid 13), which is in nanosleep".
  public static func describe(_ verdict: WaitVerdict, names: [UInt32: String]) -> String {
    func name(_ tid: UInt32) -> String {
      if let name = names[tid], !name.isEmpty { return "\(name) (tid \(tid))" }
      return "tid \(tid)"
    }
    let locks = verdict.locks.map(hex).joined(separator: ", ")
    switch verdict.kind {
    case .deadlock:
      let cycle = (verdict.threads + verdict.threads.prefix(1)).map(name).joined(separator: " → ")
      return "deadlock: \(cycle) (mutexes \(locks))"
    case .chain:
      let chain = verdict.threads.map(name).joined(separator: " → ")
      return "wait chain: \(chain) (mutexes \(locks)); the last is \(verdict.end ?? "unknown")"
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

  /// A futex wait: its address, and the owner when it has glibc's mutex-lock shape. `memory`
  /// copies bytes at an address (this process's memory now; a crash record's copy of it).
  static func readFutex(
    _ wait: inout ThreadWait, arguments: [UInt64], live: Set<UInt32>,
    memory: (UInt64, UnsafeMutableRawBufferPointer) -> Bool = {
      (try? Syscall.readOwnMemory(at: $0, into: $1)) != nil
    }
  ) {
    guard arguments.count >= 3 else { return }
    let address = arguments[0]
    wait.lockAddress = address
    // FUTEX_PRIVATE_FLAG (128) and FUTEX_CLOCK_REALTIME (256) aside.
    let command = arguments[1] & 0x7f
    // glibc's __lll_lock_wait waits with FUTEX_WAIT for the value 2 ("locked, with waiters");
    // a timed lock with FUTEX_WAIT_BITSET. Condition variables and semaphores wait for 0.
    guard command == 0 || command == 9, arguments[2] == 2 else {
      wait.ownerUnknown = "not a mutex lock wait (futex op \(arguments[1]), value \(arguments[2]))"
      return
    }
    guard address % 4 == 0, address <= UInt64.max - 12 else {
      wait.ownerUnknown = "misaligned address"
      return
    }
    // pthread_mutex_t: __lock at 0, __count at 4, __owner at 8 (glibc, 64-bit Linux).
    var words: (UInt32, UInt32, UInt32) = (0, 0, 0)
    let read: Bool = withUnsafeMutableBytes(of: &words) { bytes in
      memory(address, bytes)
    }
    guard read else {
      wait.ownerUnknown = "the lock could not be read"
      return
    }
    let (lock, _, owner) = words
    guard lock != 0 else {
      wait.ownerUnknown = "the lock was released"
      return
    }
    guard owner != 0, live.contains(owner) else {
      wait.ownerUnknown = "no thread of this process in the owner field (\(owner))"
      return
    }
    wait.owner = owner
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
    static let table: [Int: String] = [
      0: "read", 1: "write", 7: "poll", 23: "select", 34: "pause", 35: "nanosleep", 43: "accept",
      45: "recvfrom", 47: "recvmsg", 61: "wait4", 202: "futex", 230: "clock_nanosleep", 232: "epoll_wait",
      247: "waitid", 270: "pselect6", 271: "ppoll", 281: "epoll_pwait", 288: "accept4", 441: "epoll_pwait2",
      449: "futex_waitv",
    ]
  #elseif arch(arm64)
    static let futex = 98
    static let table: [Int: String] = [
      22: "epoll_pwait", 63: "read", 64: "write", 72: "pselect6", 73: "ppoll", 95: "waitid", 98: "futex",
      101: "nanosleep", 115: "clock_nanosleep", 202: "accept", 207: "recvfrom", 212: "recvmsg",
      242: "accept4",
      260: "wait4", 441: "epoll_pwait2", 449: "futex_waitv",
    ]
  #else
    static let futex = -1
    static let table: [Int: String] = [:]
  #endif

  static func name(_ number: Int) -> String? { table[number] }
}

private func hex(_ value: UInt64) -> String { "0x" + String(value, radix: 16) }
