// CrashRecord.swift — a crash record as the crash handler left it: the model the next launch
// reports from. Reading one from a file or from bytes is CrashRecord+Decoding.swift (Reading/).
// Not signal-safe.
import CrumbsSignalPath

#if canImport(Glibc)
  import Glibc
#endif

/// A crash record as the crash handler left it.
public struct CrashRecord: Sendable, Equatable, Codable {
  /// What the handler got to.
  public enum Status: String, Sendable, Equatable, Codable {
    /// Formatted at install, never written: the process did not crash (or has not yet).
    case noCrash
    /// The handler started and did not finish: the fields written so far are kept.
    case incomplete
    /// The handler finished.
    case complete
    /// The handler itself crashed; a minimal record was finished (see `nestedSignal`).
    case partial
  }

  /// Where the stack bounds used by the backtrace came from.
  public enum StackSource: String, Sendable, Equatable, Codable {
    case unknown, registered, procMaps
  }

  /// Why the frame-pointer walk stopped.
  public enum BacktraceStop: String, Sendable, Equatable, Codable {
    case endOfChain, outOfBounds, notAscending, misaligned, full, noStackBounds, unknown
  }

  /// Signal details.
  public struct Signal: Sendable, Equatable, Codable {
    public var number: Int32
    /// "SIGSEGV", or "" for a signal the handler has no name for.
    public var name: String
    /// si_code.
    public var code: Int32
    /// "SEGV_MAPERR", "SI_USER", ... or "".
    public var codeName: String
    /// si_errno.
    public var errno: Int32
    /// si_addr for faults (0 for a null dereference); 0 for sent signals.
    public var faultAddress: UInt64
    /// Who sent it (kill, sigqueue, tgkill), when sent.
    public var senderPID: Int32?
    public var senderUID: UInt32?
  }

  /// One named register.
  public struct Register: Sendable, Equatable, Codable {
    public var name: String
    public var value: UInt64
  }

  /// An uncaught C++ exception, as the terminate handler saw it before `abort()`.
  public struct UncaughtException: Sendable, Equatable, Codable {
    /// The exception's type as `type_info::name()` gives it: mangled (`St13runtime_error`).
    public var mangledType: String
    /// `what()`, for a `std::exception`.
    public var what: String?
    /// The type name or `what()` was cut to fit the record.
    public var truncated: Bool
  }

  /// One thread of the crashed process (version 3 records).
  public struct Thread: Sendable, Equatable, Codable {
    /// What became of it (crumbs_crash_thread_state).
    public enum State: String, Sendable, Equatable, Codable {
      /// The thread that crashed: the record's own registers and frames.
      case crashing
      /// Stopped by the capture signal; registers and frames from where it was.
      case captured
      /// Asked, but did not answer before the deadline (the signal blocked, the thread stopped,
      /// or not scheduled in time): id and name only.
      case noAnswer
      /// Not asked (the capture signal had been taken by another library): id and name only.
      case notAsked
      /// Crashed too, while the first crashing thread was recording: its own fault's frames.
      case alsoCrashed
      /// The thread that took a live capture (`ThreadSnapshot`; never in a crash record): its
      /// frames are its own walk from where it asked, every one a return address.
      case requesting
      case unknown
    }
    public var id: UInt32
    public var name: String
    public var state: State
    /// The signal of a thread that crashed too (`alsoCrashed`).
    public var signal: Int32?
    /// The signal that asked it (the capture signal, or SIGPROF for a thread blocking that, as
    /// Dispatch's workers do); nil when none was sent (stopped, or both blocked).
    public var askedWith: Int32? = nil
    public var registers: [Register]
    /// frames[0] is the PC where it stopped, then return addresses, innermost first.
    public var frames: [UInt64]
    /// One CRUMBS_FRAME_* set per frame (how it was found).
    public var frameMarks: [UInt8]
    public var backtraceStop: BacktraceStop
    public var stackLow: UInt64
    public var stackHigh: UInt64
    public var stackSource: StackSource
    /// A live capture's: how long it stayed parked, from entering the capture handler to its
    /// release; nil in crash records (and for a thread read where it blocks, never parked).
    public var pausedNanoseconds: UInt64? = nil
    /// Why no signal asked it (nil: asked, or no reason recorded).
    public var notSignalled: NotSignalled? = nil
    /// `.inSystemCall`: the number of the system call it was blocked in (as the kernel numbers
    /// them on this architecture).
    public var blockedSystemCall: Int32? = nil
    /// What it was blocked in when the crash handler listed it (version 4 records; nil before,
    /// and for the crashing thread): its system call and, in a futex wait, the lock's owner.
    public var wait: ThreadWait? = nil

    /// Why the capture sent a thread no signal (crumbs_crash_record.h, CRUMBS_NOT_SIGNALLED_*).
    public struct NotSignalled: OptionSet, Sendable, Equatable, Hashable, Codable {
      public var rawValue: UInt32
      public init(rawValue: UInt32) { self.rawValue = rawValue }
      /// It runs under a seccomp filter: the capture handler's own system calls could kill it or
      /// the process. `.notAsked` unless `.inSystemCall` too.
      public static let seccomp = NotSignalled(rawValue: UInt32(CRUMBS_NOT_SIGNALLED_SECCOMP))
      /// It was blocked in a system call: frames walked from where it blocks, its call not
      /// interrupted (a live capture only; no registers).
      public static let inSystemCall = NotSignalled(rawValue: UInt32(CRUMBS_NOT_SIGNALLED_IN_SYSCALL))
      /// It blocked both signals that could ask it.
      public static let blocksSignals = NotSignalled(rawValue: UInt32(CRUMBS_NOT_SIGNALLED_BLOCKS_SIGNALS))
      /// It was stopped or traced.
      public static let stopped = NotSignalled(rawValue: UInt32(CRUMBS_NOT_SIGNALLED_STOPPED))
      /// No signal was ours to send (the capture signal taken, SIGPROF someone else's).
      public static let noSignal = NotSignalled(rawValue: UInt32(CRUMBS_NOT_SIGNALLED_NO_SIGNAL))

      /// Each reason set, as a report names it ("seccomp", "in_system_call", …), in bit order.
      public var names: [String] {
        let all: [(NotSignalled, String)] = [
          (.seccomp, "seccomp"), (.inSystemCall, "in_system_call"), (.blocksSignals, "blocks_signals"),
          (.stopped, "stopped"), (.noSignal, "no_signal"),
        ]
        return all.filter { contains($0.0) }.map(\.1)
      }
    }
  }

  /// Every thread at crash time, as the handler captured it (version 3 records).
  public struct ThreadTable: Sendable, Equatable, Codable {
    /// The crashing thread first, then the others in /proc/self/task order.
    public var threads: [Thread]
    /// Threads listed at crash time: more than `threads.count` when the table was full.
    public var seen: UInt32
    public var captured: UInt32
    public var noAnswer: UInt32
    /// The real-time signal that asked them (0: none could be installed).
    public var captureSignal: Int32
    /// From the first request to the release of the parked threads.
    public var captureNanoseconds: UInt64
    /// How long the handler waited at most for answers.
    public var deadlineNanoseconds: UInt64
    /// Raw CRUMBS_THREADS_* bits.
    public var flags: UInt32
    public var listingFailed: Bool { flags & UInt32(CRUMBS_THREADS_LISTING_FAILED) != 0 }
    public var deadlinePassed: Bool { flags & UInt32(CRUMBS_THREADS_DEADLINE_PASSED) != 0 }
    public var signalTaken: Bool { flags & UInt32(CRUMBS_THREADS_SIGNAL_TAKEN) != 0 }
    /// The handler crashed while walking the threads' stacks: the table ends early.
    public var interrupted: Bool { flags & UInt32(CRUMBS_THREADS_INTERRUPTED) != 0 }
    /// SIGPROF asked the threads that block the capture signal.
    public var usedSIGPROF: Bool { flags & UInt32(CRUMBS_THREADS_USED_SIGPROF) != 0 }
    /// Nothing was chained after the crash handler: the threads that answered ended at once
    /// instead of being released to run until the process died.
    public var threadsEnded: Bool { flags & UInt32(CRUMBS_THREADS_ENDED) != 0 }
    /// A core dump was to be written or a tracer was attached: the threads that answered stayed
    /// parked until the fatal signal took the process, so the core shows them all.
    public var threadsKeptForDump: Bool { flags & UInt32(CRUMBS_THREADS_KEPT_FOR_DUMP) != 0 }
    /// Handlers were chained after the crash handler (the Swift runtime's backtracer): the
    /// threads that answered stayed parked until the process died, running none of the app's
    /// code while those handlers ran.
    public var threadsKeptForChain: Bool { flags & UInt32(CRUMBS_THREADS_KEPT_FOR_CHAIN) != 0 }
    /// A live capture was running when the crash came: the handler waited for it to finish.
    public var waitedForLiveCapture: Bool { flags & UInt32(CRUMBS_THREADS_WAITED_FOR_LIVE) != 0 }
    /// The crashing thread crashed inside its own live capture: the handler released that
    /// capture's threads and asked them all again.
    public var tookOverLiveCapture: Bool { flags & UInt32(CRUMBS_THREADS_TOOK_OVER_LIVE) != 0 }
    /// A live capture held the threads longer than the handler waits: only the crashing thread
    /// is listed.
    public var liveCaptureBusy: Bool { flags & UInt32(CRUMBS_THREADS_BUSY) != 0 }
  }

  public var status: Status
  public var version: UInt32
  public var pid: Int32
  public var sessionID: SessionID
  public var bootID: [UInt8]
  public var installWallNanoseconds: UInt64

  public var signal: Signal
  public var threadID: UInt32
  public var threadName: String
  /// Threads that entered the handler (more than one: concurrent crashes; the first recorded).
  public var threadsCrashed: UInt32

  public var crashWallNanoseconds: UInt64
  public var crashMonotonicNanoseconds: UInt64
  public var processUptimeNanoseconds: UInt64
  public var freeMemoryBytes: UInt64
  public var totalMemoryBytes: UInt64
  /// Measured inside the handler: entry to just before the complete marker.
  public var handlerDurationNanoseconds: UInt64

  /// The signal that hit the handler itself (status `.partial`).
  public var nestedSignal: Int32?
  public var nestedSignalCode: Int32?
  public var nestedFaultAddress: UInt64?

  /// "x86_64", "aarch64" or "unknown".
  public var architecture: String
  public var registers: [Register]

  /// frames[0] is the faulting PC, then return addresses, innermost first.
  public var frames: [UInt64]
  /// How each of `frames` was found (same count). Empty marks: read from a frame record (or the
  /// faulting PC). A record written before the marks existed has them all empty; its
  /// `stackScanned` says only that some frame was guessed.
  public var frameMarks: [FrameMarks]
  public var backtraceStop: BacktraceStop
  /// x86_64: the word at [sp]; aarch64: LR. The caller's return address when the fault was in a
  /// frameless leaf or a call through a bad pointer.
  public var leafReturnCandidate: UInt64
  public var stackLow: UInt64
  public var stackHigh: UInt64
  public var stackSource: StackSource

  /// The module table as the handler had it (written at install and by `refreshModules()`).
  public var modules: [LoadedModule]

  /// The Swift runtime's fatal-error message, as it printed it ("file:line: Fatal error: text",
  /// without the final newline); nil when it said nothing (a release-build trap, a C crash).
  public var swiftFatalMessage: String?
  /// `swiftFatalMessage` was cut to fit the record.
  public var swiftFatalMessageTruncated: Bool
  /// The uncaught C++ exception that led to `std::terminate` and `abort()`, if any.
  public var uncaughtException: UncaughtException?

  /// Every thread at crash time, the crashing one first; nil before version 3 or when the
  /// handler listed none.
  public var threads: ThreadTable?

  /// Raw CRUMBS_CRASH_FLAG_* bits.
  public var flags: UInt32

  /// The crash signals whose action another library set after install and Crumbs had not taken
  /// back (`replaced_signals`, written when it happened, whether or not the process crashed
  /// after): a crash on one of them reached that library's handler first, or only.
  public var replacedSignals: [Int32] = []
  /// The last fault given to a handler known to recover before anything was recorded (the
  /// first chance, `first_chance`: written whether or not the process crashed after); nil when
  /// none was given.
  public var firstChance: FirstChanceMark? = nil
  /// Words the crashing thread's registers pointed at that name another thread of the record
  /// (version 4): the lock a trapped lock call asked for, when a register still held it.
  public var lockWords: [LockWord]? = nil
  /// How long the handler spent reading the threads' waits (version 4).
  public var waitReadNanoseconds: UInt64? = nil
  /// The crash is a fault a first-chance handler returned from again and again without fixing
  /// it (CRUMBS_CRASH_FLAG_FIRST_CHANCE_LOOPED).
  public var firstChanceLooped: Bool { flags & UInt32(CRUMBS_CRASH_FLAG_FIRST_CHANCE_LOOPED) != 0 }
  /// Returns in a row from one fault, the pc unchanged, at which the crash handler first checks
  /// whether the handler given the first chance fixed it (a loop is recorded then).
  public static let firstChanceRepeats = Int(CRUMBS_CRASH_FIRST_CHANCE_REPEATS)
  public var isPartial: Bool { flags & UInt32(CRUMBS_CRASH_FLAG_PARTIAL) != 0 }
  public var modulesStale: Bool { flags & UInt32(CRUMBS_CRASH_FLAG_MODULES_STALE) != 0 }
  public var modulesTorn: Bool { flags & UInt32(CRUMBS_CRASH_FLAG_MODULES_TORN) != 0 }
  /// The handler added modules at crash time (see `Module.foundAtCrash`).
  public var modulesAddedAtCrash: Bool {
    flags & UInt32(CRUMBS_CRASH_FLAG_MODULES_ADDED_AT_CRASH) != 0
  }
  public var ranOnAlternateStack: Bool {
    flags & UInt32(CRUMBS_CRASH_FLAG_ON_ALTERNATE_STACK) != 0
  }
  public var leafFrameInserted: Bool {
    flags & UInt32(CRUMBS_CRASH_FLAG_LEAF_FRAME_INSERTED) != 0
  }
  /// Frames were recovered by scanning the stack (see CRUMBS_CRASH_FLAG_STACK_SCANNED).
  public var stackScanned: Bool { flags & UInt32(CRUMBS_CRASH_FLAG_STACK_SCANNED) != 0 }
  public var concurrentCrash: Bool {
    flags & UInt32(CRUMBS_CRASH_FLAG_CONCURRENT_CRASH) != 0
  }

  /// The module whose code holds `address`, if any.
  public func module(containing address: UInt64) -> LoadedModule? {
    modules.first { $0.textContains(address) }
  }
}

/// The first chance's mark (`crumbs_crash_first_chance`): the last fault the crash handler gave
/// a handler known to recover (declared by the app, or a recognised runtime's) before recording
/// anything.
public struct FirstChanceMark: Sendable, Equatable, Codable {
  /// First chances that had not returned to the crash handler when the process ended: above 0
  /// in a record without a crash, the process ended inside one (the handler exited, or left by
  /// longjmp and the process ended later without a clean exit).
  public var inProgress: UInt32
  /// The thread, signal, si_code, program counter and fault address of the last one given.
  public var threadID: UInt32
  public var signal: Int32
  public var signalCode: Int32
  public var pc: UInt64
  public var faultAddress: UInt64
  /// The handler's address (its module: `CrashRecord.module(containing:)`).
  public var handler: UInt64
  public var wallNanoseconds: UInt64
  /// Returns in a row from that same fault with the pc unchanged.
  public var repeats: UInt32
  /// First chances given in the whole process.
  public var count: UInt64
  /// A thread was writing the fields when the process ended: they may be torn.
  public var maybeTorn: Bool
}

/// How the crash handler found one frame (`crumbs_crash_record.frame_marks`, the CRUMBS_FRAME_*
/// bits). Empty: read from a frame record, or the faulting PC itself: certain.
public struct FrameMarks: OptionSet, Sendable, Hashable, Codable {
  public let rawValue: UInt8
  public init(rawValue: UInt8) { self.rawValue = rawValue }
  /// Found by scanning the stack for return addresses: it may be a stale one.
  public static let guessed = FrameMarks(rawValue: UInt8(CRUMBS_FRAME_GUESSED))
  /// Recovered with the module's .eh_frame call frame information (no frame record held it).
  public static let cfi = FrameMarks(rawValue: UInt8(CRUMBS_FRAME_CFI))
  /// The resume point of a Swift async caller, from the task's async context chain: an exact
  /// address (a function's start), not a return address.
  public static let async = FrameMarks(rawValue: UInt8(CRUMBS_FRAME_ASYNC))
  /// The caller's return address taken from [sp] / LR after a call through a bad pointer or a
  /// fault in a function that keeps no frame.
  public static let inserted = FrameMarks(rawValue: UInt8(CRUMBS_FRAME_INSERTED))
}
