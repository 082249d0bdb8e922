// CrashRecord+ThreadTable.swift — reading a `crumbs_crash_thread_table` (crumbs_crash_record.h)
// wherever it lies: inside a crash record file (CrashRecord+Decoding.swift), or in the buffer a
// live capture filled (LiveThreadCapture). One decoder for the C structs, through their own
// offsets; and the byte access both readers share (PersistedImage).
//
// A record's bytes are untrusted: `problem()` checks every count against its C capacity before
// `decode` reads anything. Not signal-safe.

import CrumbsSignalPath

/// Bytes laid out as the C structs of crumbs_crash_record.h, read through the structs' own
/// offsets (never re-declared here). Every read stays inside `image` once the caller checked
/// the sizes.
protocol PersistedImage {
  var image: UnsafeRawBufferPointer { get }
}

extension PersistedImage {
  /// A NUL-terminated (or field-long) UTF-8 string of `capacity` bytes at `start`.
  func string(at start: Int, capacity: Int) -> String {
    let field = UnsafeRawBufferPointer(rebasing: image[start..<start + capacity])
    let end = field.firstIndex(of: 0) ?? capacity
    return String(decoding: field[..<end], as: UTF8.self)
  }
  /// The bytes a C array field holds (`char name[16]` → 16): capacities come from the header.
  static func capacity<Root, Field>(of field: KeyPath<Root, Field>) -> Int { MemoryLayout<Field>.size }
  func bytes(at start: Int, count: Int) -> [UInt8] { Array(image[start..<start + count]) }
  func words(at start: Int, count: Int) -> [UInt64] {
    (0..<count).map { image.loadUnaligned(fromByteOffset: start + $0 * 8, as: UInt64.self) }
  }

  static func named(_ values: [UInt64], _ names: [String]) -> [CrashRecord.Register] {
    values.enumerated().map { index, value in
      CrashRecord.Register(name: index < names.count ? names[index] : "r\(index)", value: value)
    }
  }

  static func stop(_ raw: UInt32) -> CrashRecord.BacktraceStop {
    switch raw {
    case UInt32(CRUMBS_BACKTRACE_END_OF_CHAIN.rawValue): .endOfChain
    case UInt32(CRUMBS_BACKTRACE_OUT_OF_BOUNDS.rawValue): .outOfBounds
    case UInt32(CRUMBS_BACKTRACE_NOT_ASCENDING.rawValue): .notAscending
    case UInt32(CRUMBS_BACKTRACE_MISALIGNED.rawValue): .misaligned
    case UInt32(CRUMBS_BACKTRACE_FULL.rawValue): .full
    case UInt32(CRUMBS_BACKTRACE_NO_STACK_BOUNDS.rawValue): .noStackBounds
    default: .unknown
    }
  }

  static func source(_ raw: UInt32) -> CrashRecord.StackSource {
    switch raw {
    case UInt32(CRUMBS_STACK_REGISTERED.rawValue): .registered
    case UInt32(CRUMBS_STACK_PROC_MAPS.rawValue): .procMaps
    default: .unknown
    }
  }
}

extension CrashRecord {
  /// The name a record's `arch` (crumbs_crash_arch) goes by, and its registers' names in the
  /// order the handler copies them (crumbs_context.c).
  static func architecture(_ raw: UInt32) -> (name: String, registerNames: [String]) {
    switch raw {
    case UInt32(CRUMBS_CRASH_ARCH_X86_64.rawValue):
      (
        "x86_64",
        [
          "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rdi", "rsi", "rbp", "rbx", "rdx",
          "rax", "rcx", "rsp", "rip", "eflags", "csgsfs", "err", "trapno", "oldmask", "cr2",
        ]
      )
    case UInt32(CRUMBS_CRASH_ARCH_AARCH64.rawValue):
      ("aarch64", (0...30).map { "x\($0)" } + ["sp", "pc", "pstate", "fault_address", "esr"])
    default: ("unknown", [])
    }
  }

  /// This process's crumbs_crash_arch, as crumbs_crash_record_format writes it.
  static var runningArchitecture: UInt32 {
    #if arch(x86_64)
      UInt32(CRUMBS_CRASH_ARCH_X86_64.rawValue)
    #elseif arch(arm64)
      UInt32(CRUMBS_CRASH_ARCH_AARCH64.rawValue)
    #else
      0
    #endif
  }
}

/// A `crumbs_crash_thread_table` at byte `base` of `image`.
struct ThreadTableImage: PersistedImage {
  let image: UnsafeRawBufferPointer
  let base: Int

  /// What is wrong with the table's counts (at most their C capacities), or nil when nothing is.
  /// `image` must hold the whole struct from `base`.
  func problem() -> String? {
    let count = tableWord(\.thread_count)
    guard count <= CRUMBS_CRASH_MAX_THREADS else {
      return "thread count \(count) > \(CRUMBS_CRASH_MAX_THREADS)"
    }
    for index in 0..<Int(count) {
      let registers = threadWord(index, \.register_count)
      let frames = threadWord(index, \.frame_count)
      guard registers <= CRUMBS_CRASH_THREAD_MAX_REGISTERS, frames <= CRUMBS_CRASH_THREAD_MAX_FRAMES else {
        return "thread \(index): \(registers) registers, \(frames) frames (at most "
          + "\(CRUMBS_CRASH_THREAD_MAX_REGISTERS), \(CRUMBS_CRASH_THREAD_MAX_FRAMES))"
      }
    }
    return nil
  }

  func tableOffset<T>(_ path: KeyPath<crumbs_crash_thread_table, T>) -> Int {
    base + MemoryLayout<crumbs_crash_thread_table>.offset(of: path)!
  }
  func tableWord(_ path: KeyPath<crumbs_crash_thread_table, UInt32>) -> UInt32 {
    image.loadUnaligned(fromByteOffset: tableOffset(path), as: UInt32.self)
  }
  func threadOffset<T>(_ index: Int, _ path: KeyPath<crumbs_crash_thread, T>) -> Int {
    tableOffset(\.threads) + index * MemoryLayout<crumbs_crash_thread>.stride
      + MemoryLayout<crumbs_crash_thread>.offset(of: path)!
  }
  func threadWord(_ index: Int, _ path: KeyPath<crumbs_crash_thread, UInt32>) -> UInt32 {
    image.loadUnaligned(fromByteOffset: threadOffset(index, path), as: UInt32.self)
  }
  func threadWord(_ index: Int, _ path: KeyPath<crumbs_crash_thread, UInt64>) -> UInt64 {
    image.loadUnaligned(fromByteOffset: threadOffset(index, path), as: UInt64.self)
  }

  static func state(_ raw: UInt32) -> CrashRecord.Thread.State {
    switch raw {
    case UInt32(CRUMBS_THREAD_CRASHING.rawValue): .crashing
    case UInt32(CRUMBS_THREAD_CAPTURED.rawValue): .captured
    case UInt32(CRUMBS_THREAD_NO_ANSWER.rawValue): .noAnswer
    case UInt32(CRUMBS_THREAD_NOT_ASKED.rawValue): .notAsked
    case UInt32(CRUMBS_THREAD_ALSO_CRASHED.rawValue): .alsoCrashed
    case UInt32(CRUMBS_THREAD_REQUESTING.rawValue): .requesting
    default: .unknown
    }
  }

  /// The table's threads (nil when it lists none), after `problem()` found nothing. `crashing`
  /// is a crash record's own thread, which entry 0 names without repeating its registers and
  /// frames; nil for a live capture's table.
  func decode(crashing: CrashRecord.Thread?, registerNames names: [String]) -> CrashRecord.ThreadTable? {
    let count = Int(tableWord(\.thread_count))
    guard count > 0 else { return nil }
    var threads: [CrashRecord.Thread] = []
    threads.reserveCapacity(count)
    for index in 0..<count {
      let state = Self.state(threadWord(index, \.state))
      let name = string(
        at: threadOffset(index, \.name), capacity: Self.capacity(of: \crumbs_crash_thread.name))
      if index == 0 && state == .crashing, var thread = crashing {
        if thread.name.isEmpty { thread.name = name }
        threads.append(thread)
        continue
      }
      let frameCount = Int(threadWord(index, \.frame_count))
      let values = words(
        at: threadOffset(index, \.registers), count: Int(threadWord(index, \.register_count)))
      let signal = image.loadUnaligned(fromByteOffset: threadOffset(index, \.signal_number), as: Int32.self)
      let asked = image.loadUnaligned(fromByteOffset: threadOffset(index, \.asked_with), as: Int32.self)
      let paused: UInt64 = threadWord(index, \.paused_ns)
      let notSignalled = CrashRecord.Thread.NotSignalled(rawValue: threadWord(index, \.not_signalled))
      let blockedCall = image.loadUnaligned(
        fromByteOffset: threadOffset(index, \.blocked_syscall), as: Int32.self)
      threads.append(
        CrashRecord.Thread(
          id: threadWord(index, \.tid), name: name, state: state,
          signal: state == .alsoCrashed ? signal : nil, askedWith: asked != 0 ? asked : nil,
          registers: Self.named(values, names),
          frames: words(at: threadOffset(index, \.frames), count: frameCount),
          frameMarks: bytes(at: threadOffset(index, \.frame_marks), count: frameCount),
          backtraceStop: Self.stop(threadWord(index, \.backtrace_stop)),
          stackLow: threadWord(index, \.stack_low), stackHigh: threadWord(index, \.stack_high),
          stackSource: Self.source(threadWord(index, \.stack_source)),
          pausedNanoseconds: paused != 0 ? paused : nil,
          notSignalled: notSignalled.isEmpty ? nil : notSignalled,
          blockedSystemCall: notSignalled.contains(.inSystemCall) ? blockedCall : nil))
    }
    return CrashRecord.ThreadTable(
      threads: threads, seen: tableWord(\.threads_seen), captured: tableWord(\.captured),
      noAnswer: tableWord(\.no_answer),
      captureSignal: image.loadUnaligned(fromByteOffset: tableOffset(\.capture_signal), as: Int32.self),
      captureNanoseconds: image.loadUnaligned(
        fromByteOffset: tableOffset(\.capture_duration_ns), as: UInt64.self),
      deadlineNanoseconds: image.loadUnaligned(fromByteOffset: tableOffset(\.deadline_ns), as: UInt64.self),
      flags: tableWord(\.flags))
  }
}
