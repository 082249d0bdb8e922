import Crumbs
import CrumbsPlatform
import CrumbsTestChildC
import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

// Lock-owner scenarios: threads blocked on each kind of lock whose owner a live capture can
// name, or must say it cannot (crumbs_test_waits.c for glibc's locks, Swift's own Mutex here).
//   lock-graph DIR [stay]
//                    a client (hang threshold 1 s, no pool watch) and thirteen threads:
//                    "rw-writer" holds rwlock 0 for writing and sleeps in Worker.backoff();
//                    "rw-reader" (beats the heartbeat "rw-reader" once) waits to read it and
//                    "rw-writer2" to write it; "rd-holder" holds rwlock 1 for reading and
//                    sleeps, "rd-writer" waits to write it; "mx-holder" holds a
//                    Synchronization.Mutex and sleeps in Worker.backoff(), "mx-waiter" (beats
//                    "mx-waiter") waits in withLock; "mix-p" (beats "mix-p") holds pthread
//                    mutex 0 and waits for a Synchronization.Mutex "mix-q" holds while it waits
//                    for mutex 0 (a deadlock the kernel's PI check cannot see); "cv-waiter"
//                    waits on condition variable 0, never signalled; "cv-woken" was signalled
//                    on condition variable 1 by "cv-holder", which kept its mutex and sleeps.
//                    Once each is where it blocks it prints "role NAME TID OBJECT" (OBJECT:
//                    0x… of the lock it waits on, "-" for a holder) and "mutex-word 0x…
//                    holder 0x…" (the contended Mutex's word, its holder's tid), then takes
//                    captureThreads() and prints "wait TID OWNER KIND OBJECT" (OWNER, KIND and
//                    OBJECT "-" when unknown) and "activity TID TEXT" for each thread,
//                    "verdict KIND TID,TID…" and "verdict-text TEXT"; then the watchdog's
//                    "hang-began WATCH REPORT-ID" for the three heartbeats (in any order),
//                    "done", and exits 0; with "stay" it stays until killed.
let lockScenarios: [String: @Sendable ([String]) -> Int32] = [
  "lock-graph": { arguments in
    guard let directory = arguments.first else { return 64 }
    let began = DispatchSemaphore(value: 0)
    guard let client = startGraphClient(directory, began: began) else { return 1 }
    do {
      try LockGraph(client: client).run()
    } catch {
      print("error \(error)")
      return 1
    }
    for _ in 0..<3 { began.wait() }
    print("done")
    fflush(nil)
    // "stay": for `crumbs threads` to ask; the test ends it with a signal.
    while arguments.dropFirst().first == "stay" { pause() }
    exit(0)
  }
]

/// What a thread that holds a lock does with it: sleeps, 10 minutes at a time, forever (the
/// end of a wait chain, named by its first app frame: this function).
enum Worker {
  @inline(never)
  static func backoff() -> Never {
    while true {
      var tenMinutes = timespec(tv_sec: 600, tv_nsec: 0)
      nanosleep(&tenMinutes, nil)
    }
  }
}

/// A Synchronization.Mutex at an address that stays put (the lock word is its first 4 bytes).
struct PinnedMutex: @unchecked Sendable {
  let pointer: UnsafeMutablePointer<Mutex<Int>>
  init() {
    pointer = .allocate(capacity: 1)
    pointer.initialize(to: Mutex(0))
  }
  var address: UInt64 { UInt64(UInt(bitPattern: pointer)) }
}

struct LockGraphError: Error, CustomStringConvertible {
  var description: String
}

/// The lock-graph scenario's threads, started one at a time, each once its precondition holds.
final class LockGraph: Sendable {
  let client: CrumbsClient
  let held = DispatchSemaphore(value: 0)
  let tids = Mutex<[String: UInt32]>([:])
  let mutex = PinnedMutex()
  let mixed = PinnedMutex()

  init(client: CrumbsClient) { self.client = client }

  func spawn(_ name: String, beats: Bool = false, _ body: @escaping @Sendable () -> Void) throws {
    let client = client
    let started = DispatchSemaphore(value: 0)
    try BackgroundThread.start(name: name) {
      self.tids.withLock { $0[name] = CurrentThread.id }
      started.signal()
      guard beats else { return body() }
      // Made on the waiting thread itself, so that its hang report leads with it.
      let heartbeat = client.heartbeat(name, threshold: 1)
      heartbeat.beat()
      withExtendedLifetime(heartbeat) { body() }
    }
    started.wait()
  }

  func tid(_ name: String) -> UInt32 { tids.withLock { $0[name] ?? 0 } }

  /// Waits until `name` blocks on [object, object + size) (size 0: in nanosleep), then prints
  /// its role line.
  func blocked(_ name: String, on object: UInt64, size: UInt64) throws {
    guard crumbs_test_wait_until_blocked_on(tid(name), object, object + size) == 0 else {
      throw LockGraphError(description: "\(name) did not block")
    }
    print("role \(name) \(tid(name)) \(object == 0 ? "-" : "0x" + String(object, radix: 16))")
  }

  func run() throws {
    let held = held
    let mutex = mutex
    let mixed = mixed
    let rw0 = crumbs_test_lock_address(CChar(UInt8(ascii: "r")), 0)
    let rw1 = crumbs_test_lock_address(CChar(UInt8(ascii: "r")), 1)
    let mutex0 = crumbs_test_lock_address(CChar(UInt8(ascii: "m")), 0)
    let mutex2 = crumbs_test_lock_address(CChar(UInt8(ascii: "m")), 2)
    let condition0 = crumbs_test_lock_address(CChar(UInt8(ascii: "c")), 0)
    let condition1 = crumbs_test_lock_address(CChar(UInt8(ascii: "c")), 1)
    let rwlockSize = UInt64(MemoryLayout<pthread_rwlock_t>.size)
    let conditionSize = UInt64(MemoryLayout<pthread_cond_t>.size)
    let mutexSize = UInt64(MemoryLayout<pthread_mutex_t>.size)

    // The holders.
    try spawn("rw-writer") {
      crumbs_test_rwlock_write(0)
      held.signal()
      Worker.backoff()
    }
    try spawn("rd-holder") {
      crumbs_test_rwlock_read(1)
      held.signal()
      Worker.backoff()
    }
    try spawn("mx-holder") {
      mutex.pointer.pointee.withLock { _ in
        held.signal()
        Worker.backoff()
      }
    }
    for _ in 0..<3 { held.wait() }
    for name in ["rw-writer", "rd-holder", "mx-holder"] { try blocked(name, on: 0, size: 0) }

    // A condition variable signalled while its mutex stays held: its waiter blocks on the mutex.
    try spawn("cv-woken") { crumbs_test_cond_wait(1) }
    guard crumbs_test_wait_until_blocked_on(tid("cv-woken"), condition1, condition1 + conditionSize) == 0
    else {
      throw LockGraphError(description: "cv-woken did not wait")
    }
    try spawn("cv-holder") {
      crumbs_test_lock_mutex(2)
      crumbs_test_cond_signal(1)
      held.signal()
      Worker.backoff()
    }
    held.wait()
    try blocked("cv-holder", on: 0, size: 0)
    try blocked("cv-woken", on: mutex2, size: mutexSize)
    try spawn("cv-waiter") { crumbs_test_cond_wait(0) }
    try blocked("cv-waiter", on: condition0, size: conditionSize)

    // The waiters.
    try spawn("rw-reader", beats: true) { crumbs_test_rwlock_read(0) }
    try blocked("rw-reader", on: rw0, size: rwlockSize)
    try spawn("rw-writer2") { crumbs_test_rwlock_write(0) }
    try blocked("rw-writer2", on: rw0, size: rwlockSize)
    try spawn("rd-writer") { crumbs_test_rwlock_write(1) }
    try blocked("rd-writer", on: rw1, size: rwlockSize)
    try spawn("mx-waiter", beats: true) { mutex.pointer.pointee.withLock { _ in } }
    try blocked("mx-waiter", on: mutex.address, size: 4)
    // The Mutex's word with a waiter in FUTEX_LOCK_PI (docs/platform-facts.md): read here, in the
    // scenario that owns it, to show what the capture reads.
    let word = UnsafeRawPointer(mutex.pointer).load(as: UInt32.self)
    print("mutex-word 0x\(String(word, radix: 16)) holder 0x\(String(tid("mx-holder"), radix: 16))")

    // A cycle of a pthread mutex and a Synchronization.Mutex, made certain by a barrier.
    try spawn("mix-q") {
      mixed.pointer.pointee.withLock { _ in
        crumbs_test_lock_barrier()
        crumbs_test_lock_mutex(0)
      }
    }
    try spawn("mix-p", beats: true) {
      crumbs_test_lock_mutex(0)
      crumbs_test_lock_barrier()
      mixed.pointer.pointee.withLock { _ in }
    }
    try blocked("mix-p", on: mixed.address, size: 4)
    try blocked("mix-q", on: mutex0, size: mutexSize)
    fflush(nil)

    let dump = try client.captureThreads()
    for wait in dump.waits {
      let object = wait.lockObject.map { "0x" + String($0, radix: 16) } ?? "-"
      print(
        "wait \(wait.threadID) \(wait.owner.map(String.init) ?? "-") \(wait.lockKind?.rawValue ?? "-") \(object)"
      )
      print("activity \(wait.threadID) \(wait.activity)")
    }
    if let verdict = dump.verdict {
      print("verdict \(verdict.kind.rawValue) \(verdict.threads.map(String.init).joined(separator: ","))")
    }
    print("verdict-text \(dump.verdictText ?? "-")")
    fflush(nil)
  }
}
