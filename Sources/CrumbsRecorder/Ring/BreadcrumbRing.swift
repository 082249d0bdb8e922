// BreadcrumbRing.swift — the Swift face of the hot path.
//
// Entry points, in call order:
//   RingDirectory.createRing / BreadcrumbRing.create   map a new ring file (0600, flock'ed)
//   BreadcrumbRing.install                             make it the process-wide ring
//   BreadcrumbRing.append / addBreadcrumb(...)         the hot path (inlined: BreadcrumbAttributes.swift)
//   BreadcrumbRing.snapshot                            read it live while writers run
//   BreadcrumbRing.close(clean:)                       mark clean, retire the mapping
//
// The append itself is C (crumbs_ring_append.h, called through crumbs_ring_add_utf8), shared with
// the crash handler; BreadcrumbAttributes.swift hands it the UTF-8 bytes of Swift strings.
//
// Lifetime. The handle and the mapping are reached by appends through this object (any thread,
// any time), by BreadcrumbTarget, by the process-wide pointer (crumbs_installed_ring) and by the
// crash handler, and none of them can say when it is done. So:
//   - `lifecycle` is one atomic word: `closedBit` (the first `close` sets it and does the work;
//     every call after it is a no-op) and `publishedBit` (the handle was given to C: `install`
//     or `CrashHandler.install`; set only while open).
//   - `close` frees and unmaps nothing. It uninstalls the ring if it is still the process-wide
//     one, marks it clean, syncs it, then retires the mapping: crumbs_ring_retire moves, in one
//     mremap, anonymous memory holding a copy of the header and lane table over the file
//     mapping. At every instant the range is mapped with this ring's geometry, so an append that
//     loaded the handle before the close (from whichever path) finishes in bounds, into memory
//     no one reads; the file gets no late write and is released, flock included, when its
//     descriptor is closed.
//   - Memory goes back only in `deinit`, and only for a ring never published: no reference to
//     the object is left, so no append through it is in flight (each use of `handle` keeps the
//     object alive around it), and C never saw the pointer. A published ring's handle (40 bytes,
//     malloc) and its address range (the file's size, backed only by the copied tables: a page
//     or two) are leaked on purpose for the rest of the process, since some reader may hold them.
// Rejected: an in-flight counter (two contended atomics on every append, and a close that
// waits); keeping the file mapping (it holds the file and its flock until the process exits);
// an anonymous mapping laid over the file with MAP_FIXED (zeroed lane table: a late append
// would index past the range until the table is restored).
//
// Fork. An open ring is tracked (crumbs_fork.h): a forked child gets a ring file of its own,
// mapped over this one's range, so this object, the installed ring and the crash handler write
// the child's file in the child without knowing. That is why `path` and `sessionID` are read
// from the C description and the header, not kept here: in a child they name the child's.
// What a child leaves when it ends without a crash, the parent removes (ForkedSessionReaper).

import CrumbsPlatform
import CrumbsSignalPath
import Synchronization
import SystemPackage

#if canImport(Glibc)
  import Glibc
#endif

/// How a ring is shaped and filtered.
public struct RingOptions: Sendable, Equatable {
  /// Bytes per slot: a power of two from 64 to 4096. A slot holds a 32-byte header, the message
  /// and the attributes; what does not fit is cut and flagged.
  public var slotSize: Int = 256
  /// About how many slots (rounded per lane to powers of two; `BreadcrumbRing.slotCount` says).
  public var slotCount: Int = 4096
  /// One `importantShare`-th of the slots is kept for `warning` and above.
  public var importantShare: Int = 8
  /// Breadcrumbs below this level are dropped at append time.
  public var minimumLevel: BreadcrumbLevel = .debug
  /// Types recorded; `nil` records all.
  public var enabledTypes: Set<BreadcrumbType>? = nil
  /// How many operations (requests, jobs) the in-flight ledger holds open at once: 0 (none) or
  /// a power of two from 8 to 65536. Each takes 512 bytes of the ring file (256 KiB for 512);
  /// an operation begun while all are open is counted, not held.
  public var ledgerEntryCount: Int = 512
  /// Recorded in the header, e.g. for the next launch to find its own rings.
  public var appName: String? = nil
  /// Recorded in the header: the version a crash of this session is reported with when the
  /// session left no session file (CrumbsClient writes one after `start` returns).
  public var appVersion: String? = nil
  /// Recorded in the header: the resource the environment gives the session, as a JSON object of
  /// strings of at most `environmentResourceCapacity - 1` bytes (CrumbsClient makes it), for a
  /// crash that comes before the session file is written. Longer text is not recorded.
  package var environmentResource: String? = nil
  /// The header's room for `environmentResource`, its NUL included.
  package static let environmentResourceCapacity = MemoryLayout.size(
    ofValue: crumbs_ring_header().environment_resource)

  /// The most slots a ring may be asked for (`slotCount`), whatever its slot size: 2^20, a
  /// quarter GiB at the default 256-byte slots, 256 times the default ring.
  public static let maxSlotCount = 1 << 20
  /// The largest ring file, in bytes, whatever its shape: what a reader reads whole
  /// (RingReader.read(file:) refuses more).
  public static let maxFileSize = 1 << 30
  /// The most slots a ring made from `maxSlotCount` can hold once planned: the plan rounds each
  /// lane to a power of two, so its general lanes hold at most `maxSlotCount` and its important
  /// lanes (at least a half share) at most half that. A reader refuses a header declaring more:
  /// no client made it, and decoding it would cost work no report needs.
  public static let maxPlannedSlotCount = maxSlotCount + maxSlotCount / 2

  public init() {}
}

/// Why a ring could not be created.
public enum RingCreationError: Error, CustomStringConvertible, Equatable {
  case invalidOptions(String)
  case system(SystemCallError)

  public var description: String {
    switch self {
    case .invalidOptions(let reason): "invalid ring options: \(reason)"
    case .system(let error): "cannot create ring: \(error)"
    }
  }
}

/// A mapped ring file that this process writes.
///
/// Thread safety: every method may be called from any thread at any time, concurrently with
/// `close` too; `append` is lock-free and never allocates. After `close` every call is a no-op
/// (`snapshot` returns nothing, `isInstalled` is false), and an append already under way when
/// `close` runs finishes harmlessly into retired memory, never into freed memory or the file.
/// A ring that was installed or given to the crash handler keeps its small C handle and its
/// address range for the rest of the process (see the design comment of BreadcrumbRing.swift).
public final class BreadcrumbRing: @unchecked Sendable {
  /// The ring file (in a forked child: the child's own, see `BreadcrumbRing.swift`).
  public var path: String {
    let followed = withUnsafePointer(to: &file.pointee.path) {
      $0.withMemoryRebound(to: CChar.self, capacity: Int(CRUMBS_RING_FILE_PATH_SIZE)) {
        String(cString: $0)
      }
    }
    return followed.isEmpty ? createdPath : followed
  }
  /// The session this ring belongs to (in a forked child: the child's own).
  public var sessionID: SessionID {
    withUnsafeBytes(of: handle.pointee.header.pointee.session_id) { SessionID(bytes: $0)! }
  }
  /// Slots in the ring, all lanes.
  public let slotCount: Int
  /// Bytes per slot.
  public let slotSize: Int

  /// The C handle: pointers into the mapping. Written once before the object exists; freed in
  /// `deinit` only if never published to C, else never.
  @usableFromInline let handle: UnsafeMutablePointer<crumbs_ring>
  private let base: UnsafeMutableRawPointer
  private let mappedSize: Int
  /// The path given at creation (kept for one longer than the fork handler can follow).
  private let createdPath: String
  /// What the fork handler needs: the handle, the size, the flock'ed descriptor and the path,
  /// which it rewrites in a forked child. Tracked while open; freed in `deinit`.
  private let file: UnsafeMutablePointer<crumbs_ring_file>
  /// `closedBit` | `publishedBit`.
  @usableFromInline let lifecycle = Atomic<UInt32>(0)
  @inlinable static var closedBit: UInt32 { 1 }
  @inlinable static var publishedBit: UInt32 { 2 }

  /// The sessions of the rings this process has open (created, not yet closed). A reader in this
  /// process that finds one of its own rings' locks held (by a child another thread just spawned,
  /// which holds copies of every descriptor until its exec) knows from this whether it is closed.
  /// An array, not a Set: a few entries at most, and a first `Set<SessionID>` on the caller's
  /// thread of `create` makes the runtime look up SessionID's Hashable conformance through every
  /// loaded image (a fifth of a millisecond with Foundation loaded).
  package static let openInThisProcess = Mutex<[SessionID]>([])

  /// What a ring file at `path` is called while it is being made: a name no reader or claimer
  /// of leftover rings looks at (see `create`).
  public static func creatingPath(_ path: String) -> String { path + creatingSuffix }
  public static let creatingSuffix = ".creating"

  /// Creates a ring file at `path` (which must not exist; its session id makes it unique),
  /// sized, reserved on disk and locked.
  ///
  /// The file is made under `creatingPath(path)`, locked, sized and formatted there, and only
  /// then renamed to `path` unless `path` exists (crumbs_file_publish): a ring under its real
  /// name is always complete and always locked by a live writer, so another process claiming
  /// leftover rings at this moment can never take it (it used to, between the O_EXCL create and
  /// the flock). A creator killed before the rename
  /// leaves a `.creating` file that RingDirectory removes once its lock is free.
  public static func create(
    at path: String, options: RingOptions = RingOptions(), sessionID: SessionID = SessionID()
  ) throws(RingCreationError) -> BreadcrumbRing {
    try create(at: path, options: options, sessionID: sessionID, cgroupLater: false)
  }

  /// `create`, and with `cgroupLater` the header's memory cgroup and its OOM-kill count are left
  /// unknown for `recordCgroup()` to fill in: reading them costs a tenth of a millisecond, which
  /// CrumbsClient.start spends on its background thread instead of the caller's.
  package static func create(
    at path: String, options: RingOptions, sessionID: SessionID, cgroupLater: Bool
  ) throws(RingCreationError) -> BreadcrumbRing {
    var plan = crumbs_ring_plan_result()
    let planned = crumbs_ring_plan(
      UInt32(clamping: options.slotSize), UInt32(clamping: options.slotCount),
      UInt32(clamping: Syscall.onlineCPUCount()), UInt32(clamping: options.importantShare), &plan)
    switch Int(planned) {
    case Int(CRUMBS_PLAN_OK): break
    case Int(CRUMBS_PLAN_BAD_SLOT_SIZE):
      throw .invalidOptions("slot size \(options.slotSize) is not a power of two in 64...4096")
    default:
      throw .invalidOptions("slot count \(options.slotCount) is not in 64...\(RingOptions.maxSlotCount)")
    }
    guard
      Int(crumbs_ring_plan_ledger(&plan, UInt32(clamping: options.ledgerEntryCount))) == Int(CRUMBS_PLAN_OK)
    else {
      throw .invalidOptions(
        "ledger entry count \(options.ledgerEntryCount) is neither 0 nor a power of two in "
          + "\(CRUMBS_LEDGER_MIN_ENTRIES)...\(CRUMBS_LEDGER_MAX_ENTRIES)")
    }
    guard options.slotCount <= RingOptions.maxSlotCount else {
      throw .invalidOptions("slot count \(options.slotCount) is not in 64...\(RingOptions.maxSlotCount)")
    }
    guard plan.file_size <= UInt64(RingOptions.maxFileSize) else {
      throw .invalidOptions(
        "\(plan.slot_count) slots of \(plan.slot_size) bytes make a \(plan.file_size)-byte ring, more than "
          + "\(RingOptions.maxFileSize)")
    }
    do throws(SystemCallError) {
      let creating = creatingPath(path)
      let descriptor = try Syscall.open(creating, O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
      do throws(SystemCallError) {
        guard try Syscall.tryLockExclusive(descriptor, path: creating) else {
          throw SystemCallError(call: "flock", path: creating, errno: .wouldBlock)
        }
        let size = Int(plan.file_size)
        try Syscall.allocate(descriptor, size: size, path: creating)
        let base = try Syscall.mapShared(descriptor, size: size, path: creating)
        // Formatting touches two pages; appends touch one slot's page at a time.
        Syscall.adviseRandomAccess(base, size: size)
        var identity = crumbs_ring_identity()
        let writer = ProcessIdentity.current
        identity.pid = UInt32(bitPattern: writer.pid)
        identity.writer_start_ticks = writer.startTicks
        identity.writer_pid_namespace = writer.pidNamespace
        withUnsafeMutableBytes(of: &identity.session_id) { $0.copyBytes(from: sessionID.bytes) }
        withUnsafeMutableBytes(of: &identity.boot_id) { $0.copyBytes(from: SystemFacts.bootID) }
        let executable = SystemFacts.executablePath
        let cgroup = cgroupLater ? "" : SystemFacts.memoryCgroup() ?? ""
        identity.cgroup_oom_kills_at_start =
          cgroupLater ? UInt64.max : SystemFacts.cgroupOOMKills(cgroup: cgroup) ?? UInt64.max
        // Cut, JSON would not parse: what does not fit is not recorded at all.
        let resource = options.environmentResource.flatMap {
          $0.utf8.count < RingOptions.environmentResourceCapacity ? $0 : nil
        }
        (options.appName ?? "").withCString { appName in
          (options.appVersion ?? "").withCString { appVersion in
            executable.withCString { executablePath in
              cgroup.withCString { cgroupPath in
                (resource ?? "").withCString { environmentResource in
                  identity.app_name = appName
                  identity.app_version = appVersion
                  identity.executable = executablePath
                  identity.cgroup = cgroupPath
                  identity.environment_resource = environmentResource
                  crumbs_ring_format(base, &plan, &identity, SystemFacts.cpuCounterIsReliable)
                  crumbs_ring_record_limits(base)
                }
              }
            }
          }
        }
        // A file already at `path` is an error (EEXIST), never replaced.
        let published = crumbs_file_publish(creating, path)
        guard published == 0 else {
          _ = munmap(base, size)
          throw SystemCallError(call: "rename", path: path, errno: Errno(rawValue: published))
        }
        let handle = UnsafeMutablePointer<crumbs_ring>.allocate(capacity: 1)
        crumbs_ring_attach(handle, base)
        let file = UnsafeMutablePointer<crumbs_ring_file>.allocate(capacity: 1)
        crumbs_ring_file_init(file, handle, UInt64(size), descriptor, path)
        let ring = BreadcrumbRing(path: path, handle: handle, base: base, mappedSize: size, file: file)
        ring.setFilter(minimumLevel: options.minimumLevel, enabledTypes: options.enabledTypes)
        // Full table (64 open rings): a forked child would not follow this one; the handler's
        // and exit hook's pid checks still keep it from ending this session (crumbs_fork.h).
        _ = crumbs_fork_track(file)
        openInThisProcess.withLock { $0.append(sessionID) }
        ForkedSessionReaper.track(ring)
        return ring
      } catch {
        Syscall.close(descriptor)
        _ = try? Syscall.unlink(creating)
        throw error
      }
    } catch {
      throw .system(error)
    }
  }

  private init(
    path: String, handle: UnsafeMutablePointer<crumbs_ring>, base: UnsafeMutableRawPointer,
    mappedSize: Int, file: UnsafeMutablePointer<crumbs_ring_file>
  ) {
    self.createdPath = path
    self.handle = handle
    self.base = base
    self.mappedSize = mappedSize
    self.file = file
    self.slotCount = Int(handle.pointee.header.pointee.slot_count)
    self.slotSize = Int(handle.pointee.slot_size)
  }

  deinit {
    close(clean: true)
    // Untracked by the close: the fork handler no longer sees the description.
    file.deallocate()
    // No reference is left, so nothing appends through this object; if C never saw the handle
    // either, nothing can reach the memory.
    if lifecycle.load(ordering: .acquiring) & Self.publishedBit == 0 {
      Syscall.unmap(base, size: mappedSize)
      handle.deallocate()
    }
  }

  /// The handle while the ring is open, nil once closed. A relaxed load: seeing "open" just
  /// before a close is harmless, as retired memory stays valid. Callers keep the ring alive
  /// while they use the pointer.
  @inlinable var openHandle: UnsafePointer<crumbs_ring>? {
    lifecycle.load(ordering: .relaxed) & Self.closedBit == 0 ? UnsafePointer(handle) : nil
  }

  /// Marks the handle as given to C (from then on it and the range are never freed) and returns
  /// it; nil once closed. For `install` and the crash handler.
  func publish() -> UnsafePointer<crumbs_ring>? {
    var current = lifecycle.load(ordering: .relaxed)
    while current & Self.closedBit == 0 {
      let (exchanged, original) = lifecycle.compareExchange(
        expected: current, desired: current | Self.publishedBit, ordering: .sequentiallyConsistent)
      if exchanged { return UnsafePointer(handle) }
      current = original
    }
    return nil
  }

  /// Appends one breadcrumb. Lock-free, no system call, safe from any thread; a message and up to
  /// `BreadcrumbAttributes.inlineCount` attributes written as a literal cost no allocation and no
  /// reference counting (see `BreadcrumbAttributes`). A message or attribute that does not fit
  /// the slot is cut at a character boundary and the record is flagged. Does nothing once the
  /// ring is closed.
  @inlinable @inline(__always)
  public func append(
    _ message: String, level: BreadcrumbLevel = .info, type: BreadcrumbType = .manual,
    attributes: BreadcrumbAttributes = [:]
  ) {
    // No check of `lifecycle` here: C checks the handle's closed flag (see crumbs_ring.closed).
    appendBreadcrumb(
      to: UnsafePointer(handle), message: message, level: level, type: type, attributes: attributes)
    // The handle is only good while this object lives: no release before the append is done.
    _fixLifetime(self)
  }

  /// Records in the header the process's memory cgroup and its OOM-kill count now, for a ring
  /// made with `cgroupLater` (the next launch compares the count to tell an OOM kill). Does
  /// nothing once the ring is closed.
  package func recordCgroup() {
    guard let ring = openHandle else { return }
    let cgroup = SystemFacts.memoryCgroup() ?? ""
    let kills = SystemFacts.cgroupOOMKills(cgroup: cgroup) ?? UInt64.max
    cgroup.withCString { crumbs_ring_set_cgroup(ring, $0, kills) }
  }

  /// Makes this ring the process-wide ring: the one `addBreadcrumb`, the C entry point
  /// `crumbs_add_breadcrumb` and signal breadcrumbs write to. Idempotent; does nothing once
  /// the ring is closed. From then on the ring's handle and range live as long as the process.
  ///
  /// Unless `markingCleanOnExit` is false it also arms the clean-exit hook
  /// (`Lifecycle.markCleanExitOnExit`): `exit()`, returning from `main` included, appends
  /// "process exiting" with the status and marks the installed ring clean, so the next launch
  /// reports no crash for a process that ended well without closing its ring by hand. A process
  /// killed by a signal runs no exit hook and keeps the ending the handlers wrote. Returns false
  /// only when the hook was asked for and could not be registered (the ring is installed all
  /// the same).
  @discardableResult
  public func install(markingCleanOnExit: Bool = true) -> Bool {
    guard let ring = publish() else { return true }
    crumbs_ring_install(ring)
    // A close that ran since `publish` may have looked for this install before it happened:
    // take it back. Both sides are sequentially consistent (closed bit, then uninstall; install,
    // then closed bit), so one of them sees the other.
    if lifecycle.load(ordering: .sequentiallyConsistent) & Self.closedBit != 0 {
      crumbs_ring_uninstall_if(ring)
      return true
    }
    return markingCleanOnExit ? Lifecycle.markCleanExitOnExit(true) : true
  }

  /// Whether this ring is the process-wide ring.
  public var isInstalled: Bool {
    crumbs_installed_ring() == UnsafePointer(handle)
  }

  /// Records that the session received a memory-pressure warning (kept in the header, read by
  /// the next launch as `hasReceivedMemoryWarningInLastSession` and as OOM evidence). Does
  /// nothing once the ring is closed.
  public func markMemoryWarning() {
    guard let ring = openHandle else { return }
    crumbs_ring_set_session_flags(ring, UInt32(CRUMBS_SESSION_MEMORY_WARNING))
  }

  /// Changes the append-time filters (any thread, takes effect at once). Does nothing once the
  /// ring is closed.
  public func setFilter(minimumLevel: BreadcrumbLevel, enabledTypes: Set<BreadcrumbType>?) {
    guard let ring = openHandle else { return }
    let mask = enabledTypes.map { $0.reduce(UInt32(0)) { $0 | (1 << UInt32($1.rawValue)) } } ?? 0
    // An empty set would read as "all" (0): keep a bit no type uses instead.
    crumbs_ring_set_filter(ring, minimumLevel.rawValue, enabledTypes?.isEmpty == true ? 1 << 31 : mask)
  }

  /// A consistent copy of what the ring holds now, oldest to newest, while writers keep going.
  /// Once the ring is closed: no breadcrumbs and an unknown header (read the file instead).
  public func snapshot() -> RingContents {
    guard let ring = openHandle else {
      return RingContents(
        header: .unknown, breadcrumbs: [], counts: SlotCounts(), timesAreCalibrated: false)
    }
    return RingReader.readLive(ring)
  }

  /// Marks the ring clean (`clean: true`, nothing to report next launch) or leaves it marked
  /// running, uninstalls it if it is the process-wide ring, syncs it, retires the mapping and
  /// closes the file. The first call does this, from any thread; later ones do nothing. Frees
  /// nothing: see the design comment of BreadcrumbRing.swift.
  public func close(clean: Bool = true) {
    close(ending: clean ? .clean : nil)
  }

  /// Closes the ring like `close(clean:)`, its session ended as stopped by `signal` (what the
  /// next launch reports as `terminated_by_signal`, as if the signal's default action had killed
  /// the process): for a graceful shutdown that a SIGTERM asked for.
  public func close(terminatedBy signal: Int32) {
    close(ending: .terminatedBy(signal))
  }

  private enum End {
    case clean
    case terminatedBy(Int32)
  }

  private func close(ending end: End?) {
    let before = lifecycle.bitwiseOr(Self.closedBit, ordering: .sequentiallyConsistent).oldValue
    guard before & Self.closedBit == 0 else { return }
    crumbs_ring_mark_closed(handle)
    crumbs_ring_uninstall_if(handle)
    // A child forked from now on does not follow a ring that is going away.
    crumbs_fork_untrack(file)
    let closing = sessionID
    Self.openInThisProcess.withLock { open in open.removeAll { $0 == closing } }
    switch end {
    case .clean: crumbs_ring_set_state(handle, UInt32(CRUMBS_RING_CLEAN.rawValue))
    case .terminatedBy(let signal): _ = crumbs_ring_mark_terminated_by_signal(handle, signal)
    case nil: break
    }
    Syscall.msync(base, size: mappedSize)
    // On failure the file mapping stays: as safe, only the file stays held until exit.
    _ = crumbs_ring_retire(handle, mappedSize)
    // -1 in a forked child whose fork handler could not follow the ring (it closed its copy).
    if file.pointee.descriptor >= 0 { Syscall.close(file.pointee.descriptor) }
    file.pointee.descriptor = -1
  }
}

/// Appends one breadcrumb to the process-wide ring (see `BreadcrumbRing.install`); does nothing
/// when none is installed. Lock-free, no system call, safe from any thread; costs what
/// `BreadcrumbRing.append` costs.
@inlinable @inline(__always)
public func addBreadcrumb(
  _ message: String, level: BreadcrumbLevel = .info, type: BreadcrumbType = .manual,
  attributes: BreadcrumbAttributes = [:]
) {
  appendBreadcrumb(to: nil, message: message, level: level, type: type, attributes: attributes)
}

/// Calls `body` with the string's UTF-8 bytes without a heap copy for native strings.
@inlinable
package func withUTF8Bytes<Result>(
  of string: String, _ body: (UnsafeRawPointer?, Int) -> Result
) -> Result {
  if let result = string.utf8.withContiguousStorageIfAvailable({
    body(UnsafeRawPointer($0.baseAddress), $0.count)
  }) {
    return result
  }
  var copy = string
  return copy.withUTF8 { body(UnsafeRawPointer($0.baseAddress), $0.count) }
}
