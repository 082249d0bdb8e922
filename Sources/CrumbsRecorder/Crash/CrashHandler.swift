// CrashHandler.swift — the Swift face of crash capture: install, check, refresh, uninstall.
//
// Entry points, in call order:
//   CrashHandler.install(ring:options:)  create `<session>.crash` beside the ring (0600,
//                                        posix_fallocate'd, mapped MAP_SHARED), format it, then
//                                        crumbs_crash_install (signals, alternate stack, modules)
//   CrashHandler.prepareCurrentThread()  optional, per thread: alternate stack + exact bounds
//                                        (threads created after install get both at start)
//   CrashHandler.refreshModules()        after dlopen/dlclose (one cheap check when unchanged)
//   CrashHandler.replacedSignals()       signals another library took from us since install
//   CrashHandler.whileInstalled(_:)      a live thread capture, serialized with the others
//                                        (LiveThreadCapture)
//   [crash]                              C only: Sources/CrumbsSignalPath/crash/crumbs_crash_handler.c
//   CrashHandler.uninstall()             previous actions back, record file removed
//
// Nothing here runs in a signal handler: the handler is C and reads only what install prepared.
// In a forked child the C fork handler has replaced the record's mapping with the child's own
// record (crumbs_fork.h), so the record's path is always asked from C, never kept here.
// The record file is created at install so that a crash never opens, writes or sizes a file:
// a full or read-only disk is an install-time error (`CrashHandlerError.recordFile`), never a
// hang or a different death at crash time.

import CrumbsPlatform
import CrumbsSignalPath
import Synchronization
import SystemPackage

#if canImport(Glibc)
  import Glibc
#endif

/// What the crash handler catches and how it behaves.
public struct CrashHandlerOptions: Sendable, Equatable {
  /// The fatal signals caught: SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS.
  public static let defaultSignals: [Int32] = [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS]

  /// Signals to catch. Each must be in 1..<64 and not SIGKILL or SIGSTOP.
  public var signals: [Int32] = CrashHandlerOptions.defaultSignals
  /// Also catch SIGQUIT (the terminal's Ctrl-\ "quit and dump core").
  public var catchesQuit = false
  /// Bytes of each alternate signal stack (rounded up to pages). Big enough for our handler
  /// and the Swift runtime backtracer we chain to.
  public var alternateStackSize = 64 * 1024
  /// Alternate stacks reserved (virtual memory, touched only when used) for threads other
  /// than the installing one; stacks of exited threads are reused. Threads created after
  /// install still get one when these are all in use: the pool grows by chunks of 64 stacks,
  /// one mapping each (with guard regions, Linux 6.13+; on older kernels each stack's guard
  /// page splits its chunk, 2 mappings a stack), kept for later threads. Only a thread that
  /// existed before install and gets its stack on its first breadcrumb needs one from here.
  public var alternateStackPoolCount = 64
  /// Give every thread created after install, by any library (Dispatch's workers, Swift
  /// concurrency's pool…), an alternate stack before its code runs, so a stack overflow on it
  /// is recorded (Crumbs' `pthread_create` runs the thread's start routine behind one that
  /// does). When false, threads get one only on their first breadcrumb or from
  /// `CrashHandler.prepareCurrentThread()`.
  public var alternateStacksForNewThreads = true
  /// How long a second crashing thread waits for the first one to finish and end the process
  /// before it ends the process itself.
  public var waitForFirstCrashMilliseconds = 3000
  /// Fault handlers that fix their own faults and return (the app's own, or a runtime's that
  /// Crumbs does not recognise), installed before Crumbs or after it and kept by a re-install.
  /// A fault the kernel raises (SIGSEGV, SIGBUS, SIGILL, SIGFPE) goes to them first, before
  /// anything is recorded — their "first chance", as crashpad's first-chance handler has — and
  /// a crash is recorded only if they give up, or return from the same fault again and again
  /// without fixing it (checked at the 8th return in a row). The handlers of libjvm, libcoreclr, libmono, wasmtime, Wasmer,
  /// WasmEdge, WAMR (libiwasm) and libsigsegv need no declaration. Any other handler that was
  /// there before Crumbs is called after the crash is recorded, so one that exits, or resets
  /// the action and raises, never loses the record. At most 16 functions are kept.
  public var firstChanceHandlers: [FirstChanceHandler] = []

  public init() {}

  var signalMask: UInt64 {
    var mask: UInt64 = 0
    for signal in signals + (catchesQuit ? [SIGQUIT] : []) where (1..<64).contains(signal) {
      mask |= 1 << UInt64(signal)
    }
    return mask
  }
}

/// A fault handler declared to fix its own faults and return (`CrashHandlerOptions.firstChanceHandlers`).
public struct FirstChanceHandler: Sendable, Hashable {
  enum Kind: Sendable, Hashable {
    case address(UInt)
    case module(String)
  }
  let kind: Kind

  /// The handler function at `address`: what `sigaction` was given (`sa_sigaction` or
  /// `sa_handler`).
  public static func function(at address: UnsafeRawPointer) -> FirstChanceHandler {
    FirstChanceHandler(kind: .address(UInt(bitPattern: address)))
  }

  /// An `SA_SIGINFO` handler function.
  public static func function(
    _ handler: @convention(c) (Int32, UnsafeMutablePointer<siginfo_t>?, UnsafeMutableRawPointer?) -> Void
  ) -> FirstChanceHandler {
    FirstChanceHandler(kind: .address(UInt(bitPattern: unsafeBitCast(handler, to: UnsafeRawPointer.self))))
  }

  /// A plain `sa_handler` function.
  public static func function(_ handler: @convention(c) (Int32) -> Void) -> FirstChanceHandler {
    FirstChanceHandler(kind: .address(UInt(bitPattern: unsafeBitCast(handler, to: UnsafeRawPointer.self))))
  }

  /// Every handler in a module whose file's base name begins with `name` ("libmyvm.so"); a
  /// name holding ':' or empty declares nothing.
  public static func module(_ name: String) -> FirstChanceHandler {
    FirstChanceHandler(kind: .module(name))
  }
}

/// Why the crash handler could not be installed.
public enum CrashHandlerError: Error, CustomStringConvertible, Equatable {
  /// The crash record file could not be created, sized or mapped (read-only or full disk...).
  case recordFile(SystemCallError)
  /// The options name no signal, or one that cannot be caught.
  case invalidSignals(String)
  /// The alternate signal stacks could not be mapped.
  case alternateStacks(Errno)
  /// sigaction refused.
  case sigaction(Errno)

  public var description: String {
    switch self {
    case .recordFile(let error): "cannot prepare the crash record file: \(error)"
    case .invalidSignals(let reason): "invalid signals: \(reason)"
    case .alternateStacks(let error): "cannot map alternate signal stacks: \(error)"
    case .sigaction(let error): "sigaction failed: \(error)"
    }
  }
}

/// The process-wide crash handler. All methods are thread-safe (serialized by a lock) and none
/// may be called from a signal handler.
public enum CrashHandler {
  /// What an installation holds: the ring it writes its final breadcrumb to, and the mapping of
  /// its record file.
  private struct Installation {
    var ring: BreadcrumbRing
    var record: UnsafeMutablePointer<crumbs_crash_record>
    var descriptor: Int32
    var options: CrashHandlerOptions
  }

  private static let installation = Mutex<Installation?>(nil)

  /// Bytes of a crash record file: the C struct rounded up to a page.
  public static let recordFileSize = Int(crumbs_crash_file_size())

  /// The crash record file that belongs to a ring file: `x.ring` → `x.crash`.
  public static func recordPath(forRing ringPath: String) -> String {
    (ringPath.hasSuffix(".ring") ? String(ringPath.dropLast(5)) : ringPath) + ".crash"
  }

  /// Installs the crash handler for `ring`: creates the ring's crash record file, takes the
  /// fatal signals (saving the previous actions, chained to after recording), gives this thread
  /// an alternate signal stack (threads created later get one at their start, older ones on
  /// their first breadcrumb), and records the loaded modules. Idempotent: installing again for the same ring only re-takes signals that
  /// another library replaced since (see `replacedSignals()`); installing for another ring moves
  /// the handler to it. Returns the path of the crash record file. `ring` may be closed later
  /// (or already be): the handler then still records crashes, and its fatal breadcrumb goes
  /// nowhere (see `BreadcrumbRing.close`).
  @discardableResult
  public static func install(
    ring: BreadcrumbRing, options: CrashHandlerOptions = CrashHandlerOptions()
  ) throws(CrashHandlerError) -> String {
    try install(ring: ring, options: options, guardingStacksLater: false)
  }

  /// `install`; with `guardingStacksLater` only the first few alternate stacks get their guard
  /// page now (65 madvise or mprotect calls cost about 0.1 ms), the others at
  /// `guardAlternateStacks()`, which CrumbsClient calls on its background thread. A stack handed
  /// out meanwhile works, unguarded until then.
  @discardableResult
  package static func install(
    ring: BreadcrumbRing, options: CrashHandlerOptions, guardingStacksLater: Bool
  ) throws(CrashHandlerError) -> String {
    let mask = options.signalMask
    let forbidden: UInt64 = (1 << UInt64(SIGKILL)) | (1 << UInt64(SIGSTOP))
    guard mask != 0, mask & forbidden == 0,
      (options.signals + (options.catchesQuit ? [SIGQUIT] : [])).allSatisfy({ (1..<64).contains($0) })
    else {
      throw .invalidSignals("\(options.signals) (need 1...63, not SIGKILL or SIGSTOP)")
    }
    let result: Result<String, CrashHandlerError> = installation.withLock { current in
      do throws(CrashHandlerError) {
        if let existing = current, existing.ring === ring {
          let path = currentRecordPath
          try activate(
            existing.record, path: path, ring: ring, options: options,
            guardingStacksLater: guardingStacksLater)
          current?.options = options
          return .success(path)
        }
        let previousPath = currentRecordPath
        let fresh = try createRecord(for: ring)
        do throws(CrashHandlerError) {
          try activate(
            fresh.record, path: fresh.path, ring: ring, options: options,
            guardingStacksLater: guardingStacksLater)
        } catch {
          release(fresh.record, descriptor: fresh.descriptor, path: fresh.path)
          throw error
        }
        if let previous = current {
          release(previous.record, descriptor: previous.descriptor, path: previousPath)
        }
        current = Installation(
          ring: ring, record: fresh.record, descriptor: fresh.descriptor, options: options)
        return .success(fresh.path)
      } catch {
        return .failure(error)
      }
    }
    return try result.get()
  }

  /// Sets the guard pages of the alternate stacks an install with `guardingStacksLater` left for
  /// later. Idempotent; any thread.
  package static func guardAlternateStacks() {
    crumbs_crash_guard_alternate_stacks()
  }

  /// The crash record file of the current installation, or nil when not installed. In a forked
  /// child: the child's own record (nil when the child could not make one).
  public static var recordPath: String? {
    installation.withLock { current in
      guard current != nil else { return nil }
      let path = currentRecordPath
      return path.isEmpty ? nil : path
    }
  }

  /// The record file the C handler writes ("" when none); callers hold the lock.
  private static var currentRecordPath: String { String(cString: crumbs_crash_record_path()) }

  /// Whether the handler is installed.
  public static var isInstalled: Bool {
    installation.withLock { $0 != nil }
  }

  /// Signals we installed whose action another library has replaced since (sorted). Installing
  /// again re-takes them. Once a crash began, the answer is what was replaced when it began: the
  /// handlers chained after the crash record (the Swift runtime's backtracer) change the actions
  /// while the process dies, and no crash is lost to that.
  public static func replacedSignals() -> [Int32] {
    installation.withLock { _ in replacedSignalsWithoutLocking() }
  }

  /// `replacedSignals()` without taking the installation lock: for exit hooks, which may run on
  /// a thread that interrupted a holder. The C mask is read atomically.
  package static func replacedSignalsWithoutLocking() -> [Int32] {
    SignalNames.signals(inMask: crumbs_crash_replaced_signals())
  }

  /// Gives the calling thread an alternate signal stack (so a stack overflow on it is recorded)
  /// and registers its exact stack bounds. Threads created after install get both at their
  /// start, and others on their first breadcrumb; call this from a thread that existed before
  /// install and may never append. Returns whether the thread now has an alternate stack.
  @discardableResult
  public static func prepareCurrentThread() -> Bool {
    installation.withLock { $0 == nil ? false : crumbs_crash_prepare_thread() }
  }

  /// Whether every thread created from now on, by any module of the process, gets an alternate
  /// signal stack at its start (see `CrashHandlerOptions.alternateStacksForNewThreads`): false
  /// when not installed, when turned off, or when the dynamic linker gives the process's modules
  /// another `pthread_create` than Crumbs'. True in a statically linked program, whose linker
  /// bound every call to Crumbs'.
  public static var coversNewThreads: Bool {
    installation.withLock { $0 == nil ? false : crumbs_crash_covers_new_threads() }
  }

  /// Updates the record's module table when libraries were loaded or unloaded since the last
  /// scan (cheap otherwise). Call after `dlopen`. Returns the number of modules recorded.
  @discardableResult
  public static func refreshModules(force: Bool = false) -> Int {
    installation.withLock { $0 == nil ? 0 : Int(crumbs_crash_refresh_modules(force)) }
  }

  /// Runs `body` while the handler is installed, holding the lock install, refresh and
  /// uninstall take (a live thread capture runs under it: crumbs_live_capture.h); nil when it
  /// is not installed.
  package static func whileInstalled<T: Sendable>(_ body: () -> T) -> T? {
    installation.withLock { $0 == nil ? nil : body() }
  }

  /// Restores every signal's previous action (unless another library replaced ours since: its
  /// handler stays), the installing thread's previous alternate stack, and removes the
  /// untouched record file. A crash being recorded on another thread meanwhile keeps the
  /// thread capture's signals and its record file (the next launch reports it). Idempotent.
  public static func uninstall() {
    installation.withLock { current in
      guard let existing = current else { return }
      let path = currentRecordPath
      let crashed = crumbs_crash_uninstall()
      release(existing.record, descriptor: existing.descriptor, path: crashed ? "" : path)
      current = nil
    }
  }

  // MARK: - Internals

  private static func createRecord(for ring: BreadcrumbRing) throws(CrashHandlerError) -> (
    path: String, record: UnsafeMutablePointer<crumbs_crash_record>, descriptor: Int32
  ) {
    let path = recordPath(forRing: ring.path)
    let size = recordFileSize
    do throws(SystemCallError) {
      let descriptor = try Syscall.open(path, O_RDWR | O_CREAT | O_TRUNC, mode: 0o600)
      do throws(SystemCallError) {
        try Syscall.allocate(descriptor, size: size, path: path)
        let base = try Syscall.mapShared(descriptor, size: size, path: path)
        Syscall.adviseRandomAccess(base, size: size)
        let record = base.bindMemory(to: crumbs_crash_record.self, capacity: 1)
        let bootID = SystemFacts.bootID
        ring.sessionID.bytes.withUnsafeBufferPointer { session in
          bootID.withUnsafeBufferPointer { boot in
            crumbs_crash_record_format(
              record, UInt32(bitPattern: Syscall.processID()), session.baseAddress,
              boot.baseAddress, SystemFacts.processStartBoottimeNanoseconds)
          }
        }
        return (path, record, descriptor)
      } catch {
        Syscall.close(descriptor)
        _ = try? Syscall.unlink(path)
        throw error
      }
    } catch {
      throw .recordFile(error)
    }
  }

  private static func activate(
    _ record: UnsafeMutablePointer<crumbs_crash_record>, path: String, ring: BreadcrumbRing,
    options: CrashHandlerOptions, guardingStacksLater: Bool
  ) throws(CrashHandlerError) {
    var config = crumbs_crash_config()
    // The installing thread's stack and three more: what threads appending in the first
    // milliseconds take first.
    config.eager_stack_guards = guardingStacksLater ? 4 : 0
    config.record = record
    config.signal_mask = options.signalMask
    config.altstack_size = UInt32(clamping: options.alternateStackSize)
    config.altstack_pool_count = UInt32(clamping: options.alternateStackPoolCount)
    config.wait_for_first_crash_ms = UInt32(clamping: max(1, options.waitForFirstCrashMilliseconds))
    config.skip_new_threads = options.alternateStacksForNewThreads ? 0 : 1
    // Published: the handle and its range now outlive any close, since a handler already
    // running on another thread may still write through them. A closed ring gives nil: crashes
    // are still recorded, without a fatal breadcrumb.
    config.ring = ring.publish()
    var handlers: [UInt64] = []
    var modules: [String] = []
    for declared in options.firstChanceHandlers {
      switch declared.kind {
      case .address(let address): handlers.append(UInt64(address))
      case .module(let name) where !name.isEmpty && !name.contains(":"): modules.append(name)
      case .module: continue
      }
    }
    let (status, error) = path.withCString { recordPath in
      handlers.withUnsafeBufferPointer { declaredHandlers in
        modules.joined(separator: ":").withCString { declaredModules in
          config.record_path = recordPath
          config.first_chance_handlers = declaredHandlers.baseAddress
          config.first_chance_handler_count = UInt32(clamping: declaredHandlers.count)
          config.first_chance_modules = declaredModules
          let status = crumbs_crash_install(&config)
          return (status, Errno(rawValue: Glibc.errno))
        }
      }
    }
    switch Int(status) {
    case Int(CRUMBS_CRASH_INSTALL_OK): return
    case Int(CRUMBS_CRASH_INSTALL_ALTSTACK_FAILED): throw .alternateStacks(error)
    case Int(CRUMBS_CRASH_INSTALL_SIGACTION_FAILED): throw .sigaction(error)
    case Int(CRUMBS_CRASH_INSTALL_BAD_SIGNALS): throw .invalidSignals("rejected by sigaction set-up")
    default:
      throw .recordFile(
        SystemCallError(call: "crumbs_crash_install", refusal: .other("unexpected status \(status)")))
    }
  }

  /// Lets go of a record file: closes and removes it, but never unmaps it. Once a record was
  /// handed to C, a handler already running on another thread may still be writing it; the
  /// mapping (348 KiB of address space, of an unlinked file) stays for the process's life.
  private static func release(
    _ record: UnsafeMutablePointer<crumbs_crash_record>, descriptor: Int32, path: String
  ) {
    Syscall.close(descriptor)
    // "": a forked child that has no record of its own (the inherited one is its parent's), or a
    // record a crash is being written into (it is the next launch's).
    if !path.isEmpty { _ = try? Syscall.unlink(path) }
  }
}

extension SystemFacts {
  /// When this process started, in CLOCK_BOOTTIME nanoseconds (field 22 of /proc/self/stat,
  /// in clock ticks since boot); 0 when unreadable. The handler subtracts it from the crash
  /// time to report the process uptime.
  package static var processStartBoottimeNanoseconds: UInt64 {
    guard let ticks = ProcessIdentity.ownStartTicks() else { return 0 }
    let perSecond = UInt64(max(1, sysconf(Int32(_SC_CLK_TCK))))
    return ticks * (1_000_000_000 / perSecond)
  }
}
