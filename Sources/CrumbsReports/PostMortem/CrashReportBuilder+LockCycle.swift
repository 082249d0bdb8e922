// CrashReportBuilder+LockCycle.swift — a crash that is a deadlock the kernel refused. A lock
// that waits through a priority-inheritance futex (FUTEX_LOCK_PI: Swift's Synchronization.Mutex
// on Linux) never hangs in a lock-order cycle: the kernel walks the chain of owners, finds the
// cycle and fails the last lock with EDEADLK; the Swift runtime then traps with "Recursive call
// to lock Mutex", a message that sends the engineer looking for recursion. The crash record
// holds what explains it: the other threads' waits (the lock each waits for and its owner, read
// from the lock word) and the lock words the crashing thread's registers pointed at (the lock it
// asked for). The report's exception then names the cycle, both lock sites, and keeps the
// runtime's message, explained; `crumbs.crash.verdict` and the keys beside it carry it over
// OTLP and Backtrace. Not signal-safe.

import CrumbsRecorder

extension CrashReportBuilder {
  /// "deadlock" when the crash is a lock-order cycle the kernel refused.
  package static let crashVerdictKey = "crumbs.crash.verdict"
  /// The cycle's threads in wait order, kernel tids joined by ",", the crashing thread first.
  package static let crashVerdictThreadsKey = "crumbs.crash.verdict.threads"
  /// The lock each of them asked for ("0x…", joined by ","; "?" where it was not found).
  package static let crashVerdictLocksKey = "crumbs.crash.verdict.locks"
  /// Where each asked for it: its first frame in the app's own code, joined by " | ".
  package static let crashVerdictSitesKey = "crumbs.crash.verdict.sites"
  /// What the runtime said, kept as it said it.
  package static let crashVerdictRuntimeMessageKey = "crumbs.crash.verdict.runtime_message"

  /// Texts of a lock refused with EDEADLK: the Swift runtime's Mutex ("Recursive call to lock
  /// Mutex", Swift 6.x Synchronization/LinuxImpl.swift), and strerror's or a wrapper's naming of
  /// the error itself.
  static let refusedLockTexts = ["Recursive call to lock", "EDEADLK", "Resource deadlock avoided"]

  /// The lock-order cycle through the crashing thread, when its crash is a lock the kernel
  /// refused (`refusedLockTexts` in what the runtime said) and the other threads' waits lead
  /// back to it; `inferred` when the lock it asked for was not found in its registers (the
  /// cycle's last waiter is then taken as that lock's owner). Not inferred when a register's
  /// lock word names the crashing thread itself and none leads back: that is a real recursive
  /// lock (the kernel refuses a lock its owner asks for again with the same error).
  static func lockCycle(_ record: CrashRecord) -> (verdict: WaitVerdict, inferred: Bool)? {
    guard let said = record.swiftFatalMessage, refusedLockTexts.contains(where: { said.contains($0) }),
      let table = record.threads
    else { return nil }
    let crashing = record.threadID
    var waits = table.threads.compactMap { $0.id == crashing ? nil : $0.wait }
    let owners = Dictionary(
      waits.compactMap { wait in wait.owner.map { (wait.threadID, $0) } },
      uniquingKeysWith: { first, _ in first })
    // Whether the owners' chain from `tid` comes back to the crashing thread (bounded).
    func leadsBack(_ tid: UInt32) -> Bool {
      var current = tid
      for _ in 0...waits.count {
        if current == crashing { return true }
        guard let next = owners[current] else { return false }
        current = next
      }
      return false
    }
    // Threads that crashed too: both ends of a cycle may be refused at once (their lock calls
    // raced through the kernel's chain walk), each then traps with the same message.
    let refusedToo = Set(table.threads.filter { $0.state == .alsoCrashed && $0.id != crashing }.map(\.id))
    var asked: (lock: UInt64, owner: UInt32)?
    var inferred = false
    if let word = record.lockWords?.first(where: {
      $0.owner != crashing && (leadsBack($0.owner) || refusedToo.contains($0.owner))
    }) {
      asked = (word.address, word.owner)
      if !leadsBack(word.owner) {
        // It asked for a lock the crashing thread holds, and was refused too: which lock is not
        // known (its registers were not read for lock words).
        var other = ThreadWait(threadID: word.owner)
        other.lockAddress = 0
        other.owner = crashing
        waits.removeAll { $0.threadID == word.owner }
        waits.append(other)
      }
    } else if record.lockWords?.contains(where: { $0.owner == crashing }) != true {
      // Walk back from the crashing thread through the threads that wait for it: the first of
      // that chain holds the lock the kernel refused (it waits for nobody in the cycle yet).
      var current = crashing
      for _ in 0...waits.count {
        guard let waiter = waits.first(where: { $0.owner == current && $0.threadID != crashing }) else {
          break
        }
        current = waiter.threadID
      }
      if current != crashing {
        asked = (0, current)
        inferred = true
      }
    }
    guard let asked else { return nil }
    var own = ThreadWait(threadID: crashing)
    own.lockAddress = asked.lock
    own.owner = asked.owner
    waits.append(own)
    guard let verdict = ThreadWaits(threads: waits).verdict(from: crashing), verdict.kind == .deadlock,
      verdict.threads.first == crashing
    else { return nil }
    return (verdict, inferred)
  }

  /// The first frame of `frames` in the app's own code: not in libc, the dynamic loader, the
  /// Swift runtime and its libraries, Dispatch or Foundation; "?" when none is named.
  static func appSite(_ frames: [CrashReport.Frame]) -> String {
    let system = [
      "libc.so", "libc-", "ld-linux", "libswift", "libdispatch", "libFoundation", "libstdc++", "libgcc",
    ]
    let site = frames.first { frame in
      guard frame.function != nil else { return false }
      let file = frame.module.map { $0.split(separator: "/").last.map(String.init) ?? $0 } ?? ""
      return !system.contains { file.hasPrefix($0) }
    }
    return site?.function ?? "?"
  }

  /// Rewrites `report`'s exception message when the crash is a refused lock-order cycle
  /// (`lockCycle`), and adds the verdict's attributes. `report.threads` must be set.
  static func explainLockCycle(_ record: CrashRecord, into report: inout CrashReport) {
    guard let (verdict, inferred) = lockCycle(record), let threads = report.threads else { return }
    func name(_ tid: UInt32) -> String {
      let thread = threads.first { $0.id == Int(tid) }
      if let name = thread?.name, !name.isEmpty { return "\(name) (tid \(tid))" }
      return "tid \(tid)"
    }
    let sites = verdict.threads.map { tid in appSite(threads.first { $0.id == Int(tid) }?.frames ?? []) }
    let locks = verdict.locks.map { $0 == 0 ? "?" : CrashReport.hex($0) }
    let cycle = (verdict.threads + verdict.threads.prefix(1)).map(name).joined(separator: " → ")
    var steps: [String] = []
    for index in verdict.threads.indices {
      let tid = verdict.threads[index]
      let holder = verdict.threads[(index + 1) % verdict.threads.count]
      let lock = locks[index] == "?" ? "a lock" : "mutex \(locks[index])"
      let crashedToo = threads.first { $0.id == Int(tid) }?.state == .alsoCrashed
      let verb = index == 0 || crashedToo ? "asked for" : "waits for"
      steps.append(
        "\(name(tid)) \(verb) \(lock) held by \(name(holder))"
          + (crashedToo ? " and was refused too (it crashed as well)" : "") + ", in \(sites[index])")
    }
    let said = saidBeforeTheSignal(record) ?? record.swiftFatalMessage ?? ""
    report.exceptionMessage =
      "deadlock: \(cycle): " + steps.joined(separator: "; ")
      + (inferred
        ? " (the lock it asked for was not in its registers: its owner is the cycle's other end)" : "")
      + ". The runtime said \"\(said)\": the kernel refused the lock because it would close a lock-order "
      + "cycle (EDEADLK), which the runtime calls a 'Recursive call'; there is no recursion"
    report.attributes[crashVerdictKey] = .string(verdict.kind.rawValue)
    report.attributes[crashVerdictThreadsKey] = .string(
      verdict.threads.map(String.init).joined(separator: ","))
    report.attributes[crashVerdictLocksKey] = .string(locks.joined(separator: ","))
    report.attributes[crashVerdictSitesKey] = .string(sites.joined(separator: " | "))
    report.attributes[crashVerdictRuntimeMessageKey] = .string(said)
    report.evidence.append(
      "lock owners read at crash time from the lock words (through the kernel): a PI futex's word holds "
        + "its owner's tid")
  }
}
