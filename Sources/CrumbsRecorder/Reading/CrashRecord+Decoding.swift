// CrashRecord+Decoding.swift — reading a crash record file after the fact.
//
// Entry points, in call order:
//   CrashRecord.read(file:)    a `<session>.crash` file left by a process (crashed or not)
//   CrashRecord.read(image:)   the same from bytes in memory (what the fuzzer drives)
//     → validate               magic, version, sizes, state, counts: before any field is used
//     → decode                 every field through the C struct's own offsets
//
// The layout is `crumbs_crash_record` (crumbs_crash_record.h); nothing here re-declares it: the
// offsets come from MemoryLayout of the imported C struct. The bytes are untrusted (a torn page,
// a foreign file, a newer version): every count is checked against its C capacity, every string
// is cut at its field's end, and nothing traps. Version 1 records (before `message` was
// appended) are still read: they have no fatal message and no uncaught exception; version 2
// records (before the thread table) have no `threads`. Not signal-safe.

import CrumbsPlatform
import CrumbsSignalPath

#if canImport(Glibc)
  import Glibc
#endif

extension CrashRecord {
  /// Whether the crash record file at `path` is armed and untouched: its session ended without
  /// a crash (status `.noCrash`). Reads the first two kilobytes, not the whole record. False when
  /// it cannot tell (unreadable, not a record): such a file is left to a full read.
  package static func isUntouched(file path: String) -> Bool {
    guard let descriptor = try? Syscall.openUntrustedFile(path, O_RDONLY) else { return false }
    defer { Syscall.close(descriptor) }
    guard let state = MemoryLayout<crumbs_crash_record>.offset(of: \.state),
      let marker = MemoryLayout<crumbs_crash_record>.offset(of: \.complete_marker),
      let bytes = try? Syscall.read(descriptor, at: 0, count: marker + 8, path: path),
      bytes.count == marker + 8
    else { return false }
    return bytes.withUnsafeBytes { image in
      image.loadUnaligned(as: UInt64.self) == CRUMBS_CRASH_RECORD_MAGIC
        && image.loadUnaligned(fromByteOffset: state, as: UInt32.self) == UInt32(CRUMBS_CRASH_ARMED.rawValue)
        && image.loadUnaligned(fromByteOffset: marker, as: UInt64.self) == 0
    }
  }

  /// Reads a crash record file.
  public static func read(file path: String) throws(PersistedFileError) -> CrashRecord {
    try PersistedFile.read(path, as: .crashRecord, limit: 1 << 20, image: read(image:))
  }

  /// Reads a crash record from a file image in memory. Never traps on any input.
  public static func read(image: UnsafeRawBufferPointer) throws(PersistedFileError) -> CrashRecord {
    let fields = try RecordFields(validating: image)
    return fields.decode()
  }
}

/// Byte access to an image through the C struct's offsets, after validation.
private struct RecordFields: PersistedImage {
  typealias C = crumbs_crash_record
  let image: UnsafeRawBufferPointer
  /// Version 2 and later: `message` is there.
  var hasMessage = false
  /// Version 3 and later: `threads` is there.
  var hasThreads = false
  /// Version 4 and later: `waits` is there.
  var hasWaits = false

  init(validating image: UnsafeRawBufferPointer) throws(PersistedFileError) {
    self.image = image
    guard image.count >= 8 else {
      throw failure(.unrecognized, "\(image.count) bytes: too short for a crash record")
    }
    guard image.loadUnaligned(as: UInt64.self) == CRUMBS_CRASH_RECORD_MAGIC else {
      throw failure(.unrecognized, "wrong magic: not a Crumbs crash record")
    }
    guard image.count >= Int(CRUMBS_CRASH_HEADER_SIZE) else {
      throw failure(.truncated, "\(image.count) bytes: shorter than the record header")
    }
    let version = u32(\C.version)
    guard version >= 1 && version <= CRUMBS_CRASH_RECORD_VERSION else {
      if version > CRUMBS_CRASH_RECORD_VERSION {
        throw failure(.unsupported, "version \(version) is newer than this reader")
      }
      throw failure(.corrupt, "version \(version) is not a valid version")
    }
    guard u32(\C.header_size) == CRUMBS_CRASH_HEADER_SIZE else {
      throw failure(.corrupt, "header size \(u32(\C.header_size)) ≠ \(CRUMBS_CRASH_HEADER_SIZE)")
    }
    // Version 1 ends before `message`, version 2 before `threads`, version 3 before `waits`.
    let expected =
      switch version {
      case 1: Int(CRUMBS_CRASH_RECORD_V1_SIZE)
      case 2: Int(CRUMBS_CRASH_RECORD_V2_SIZE)
      case 3: Int(CRUMBS_CRASH_RECORD_V3_SIZE)
      default: MemoryLayout<C>.size
      }
    let total = u64(\C.total_size)
    guard total == UInt64(expected) else {
      throw failure(.corrupt, "total size \(total) ≠ \(expected) (version \(version))")
    }
    guard image.count >= expected else {
      throw failure(.truncated, "\(image.count) bytes: shorter than the record (\(total))")
    }
    hasMessage = version >= 2
    hasThreads = version >= 3
    hasWaits = version >= 4
    let state = u32(\C.state)
    guard (UInt32(CRUMBS_CRASH_ARMED.rawValue)...UInt32(CRUMBS_CRASH_COMPLETE.rawValue)).contains(state)
    else {
      throw failure(.corrupt, "state \(state) is not a crash record state")
    }
    guard u32(\C.register_count) <= CRUMBS_CRASH_MAX_REGISTERS else {
      throw failure(.corrupt, "register count \(u32(\C.register_count)) > \(CRUMBS_CRASH_MAX_REGISTERS)")
    }
    guard u32(\C.frame_count) <= CRUMBS_CRASH_MAX_FRAMES else {
      throw failure(.corrupt, "frame count \(u32(\C.frame_count)) > \(CRUMBS_CRASH_MAX_FRAMES)")
    }
    guard u32(\C.module_count) <= CRUMBS_CRASH_MAX_MODULES else {
      throw failure(.corrupt, "module count \(u32(\C.module_count)) > \(CRUMBS_CRASH_MAX_MODULES)")
    }
    if hasThreads, let problem = threadTable.problem() { throw failure(.corrupt, problem) }
    if hasWaits, let problem = waitTable.problem() { throw failure(.corrupt, problem) }
    let marker = u64(\C.complete_marker)
    guard marker == 0 || marker == CRUMBS_CRASH_COMPLETE_MARKER else {
      throw failure(.corrupt, "complete marker is neither 0 nor the marker")
    }
  }

  /// The thread table (version 3 and later).
  var threadTable: ThreadTableImage { ThreadTableImage(image: image, base: offset(\C.threads)) }
  /// The waits at crash time (version 4 and later).
  var waitTable: WaitTableImage { WaitTableImage(image: image, base: offset(\C.waits)) }

  func failure(_ kind: PersistedFileError.Kind, _ reason: String) -> PersistedFileError {
    PersistedFileError(kind, reason, format: .crashRecord)
  }

  func offset<T>(_ path: KeyPath<C, T>) -> Int { MemoryLayout<C>.offset(of: path)! }
  func u64(_ path: KeyPath<C, UInt64>) -> UInt64 {
    image.loadUnaligned(fromByteOffset: offset(path), as: UInt64.self)
  }
  func u32(_ path: KeyPath<C, UInt32>) -> UInt32 {
    image.loadUnaligned(fromByteOffset: offset(path), as: UInt32.self)
  }
  func i32(_ path: KeyPath<C, Int32>) -> Int32 {
    image.loadUnaligned(fromByteOffset: offset(path), as: Int32.self)
  }

  /// `length` (clamped to `capacity`) bytes of UTF-8 at `start`; a text that was cut may end
  /// inside a character, whose leftover bytes are dropped rather than shown as U+FFFD.
  func text(at start: Int, length: UInt32, capacity: Int, cut: Bool) -> String {
    var bytes = self.bytes(at: start, count: min(Int(length), capacity))
    if cut {
      // Back off to the start of the last sequence and keep it only if it is complete.
      var lead = bytes.count
      while lead > 0 && bytes.count - lead < 3 && bytes[lead - 1] & 0xC0 == 0x80 { lead -= 1 }
      if lead > 0 {
        let first = bytes[lead - 1]
        let needed = first < 0x80 ? 1 : first >= 0xF0 ? 4 : first >= 0xE0 ? 3 : first >= 0xC0 ? 2 : 1
        if bytes.count - (lead - 1) < needed { bytes.removeSubrange((lead - 1)...) }
      }
    }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// The Swift runtime's message and the uncaught C++ exception (version 2 and later).
  func messages() -> (swift: String?, swiftCut: Bool, exception: CrashRecord.UncaughtException?) {
    guard hasMessage else { return (nil, false, nil) }
    let base = offset(\C.message)
    func field<T>(_ path: KeyPath<crumbs_crash_message, T>) -> Int {
      base + MemoryLayout<crumbs_crash_message>.offset(of: path)!
    }
    func word(_ path: KeyPath<crumbs_crash_message, UInt32>) -> UInt32 {
      image.loadUnaligned(fromByteOffset: field(path), as: UInt32.self)
    }
    let truncated = UInt32(CRUMBS_CRASH_MESSAGE_TRUNCATED)
    let swiftFlags = word(\.swift_flags)
    let swiftCut = swiftFlags & truncated != 0
    var swift: String? = nil
    if word(\.swift_length) > 0 {
      let text = self.text(
        at: field(\.swift_message), length: word(\.swift_length),
        capacity: Int(CRUMBS_CRASH_SWIFT_MESSAGE_SIZE), cut: swiftCut)
      let trimmed = text.hasSuffix("\n") ? String(text.dropLast()) : text
      swift = trimmed.isEmpty ? nil : trimmed
    }
    let cxxFlags = word(\.cxx_flags)
    var exception: CrashRecord.UncaughtException? = nil
    if cxxFlags & UInt32(CRUMBS_CRASH_CXX_EXCEPTION) != 0 {
      let typeCut = cxxFlags & truncated != 0
      let whatCut = cxxFlags & UInt32(CRUMBS_CRASH_CXX_WHAT_TRUNCATED) != 0
      exception = CrashRecord.UncaughtException(
        mangledType: text(
          at: field(\.cxx_type), length: word(\.cxx_type_length),
          capacity: Int(CRUMBS_CRASH_CXX_TYPE_SIZE), cut: typeCut),
        what: cxxFlags & UInt32(CRUMBS_CRASH_CXX_HAS_WHAT) != 0
          ? text(
            at: field(\.cxx_what), length: word(\.cxx_what_length),
            capacity: Int(CRUMBS_CRASH_CXX_WHAT_SIZE), cut: whatCut) : nil,
        truncated: typeCut || whatCut)
    }
    return (swift, swiftCut, exception)
  }
  func decode() -> CrashRecord {
    let flags = u32(\C.flags)
    let marker = u64(\C.complete_marker)
    let state = u32(\C.state)
    let status: CrashRecord.Status
    if state == UInt32(CRUMBS_CRASH_ARMED.rawValue) && marker == 0 {
      status = .noCrash
    } else if marker == CRUMBS_CRASH_COMPLETE_MARKER {
      status = flags & UInt32(CRUMBS_CRASH_FLAG_PARTIAL) != 0 ? .partial : .complete
    } else {
      status = .incomplete
    }
    let hasSender = flags & UInt32(CRUMBS_CRASH_FLAG_HAS_SENDER) != 0
    let signalNumber = i32(\C.signal_number)
    let signal = CrashRecord.Signal(
      number: signalNumber,
      name: string(at: offset(\C.signal_name), capacity: Self.capacity(of: \C.signal_name)),
      code: i32(\C.signal_code),
      codeName: string(at: offset(\C.code_name), capacity: Self.capacity(of: \C.code_name)),
      errno: i32(\C.signal_errno),
      faultAddress: u64(\C.fault_address),
      senderPID: hasSender ? i32(\C.sender_pid) : nil,
      senderUID: hasSender ? u32(\C.sender_uid) : nil)

    let registerValues = words(at: offset(\C.registers), count: Int(u32(\C.register_count)))
    let (architecture, names) = CrashRecord.architecture(u32(\C.arch))
    let registers = Self.named(registerValues, names)
    let stop = Self.stop(u32(\C.backtrace_stop))
    let stackSource = Self.source(u32(\C.stack_source))

    let moduleStride = MemoryLayout<crumbs_crash_module>.stride
    let modulesStart = offset(\C.modules)
    let modules = (0..<Int(u32(\C.module_count))).map { index -> LoadedModule in
      let base = modulesStart + index * moduleStride
      func moduleWord(_ path: KeyPath<crumbs_crash_module, UInt64>) -> UInt64 {
        image.loadUnaligned(
          fromByteOffset: base + MemoryLayout<crumbs_crash_module>.offset(of: path)!, as: UInt64.self)
      }
      let buildIDSize = image.loadUnaligned(
        fromByteOffset: base + MemoryLayout<crumbs_crash_module>.offset(of: \.build_id_size)!,
        as: UInt32.self)
      let buildIDStart = base + MemoryLayout<crumbs_crash_module>.offset(of: \.build_id)!
      let moduleFlags = image.loadUnaligned(
        fromByteOffset: base + MemoryLayout<crumbs_crash_module>.offset(of: \.flags)!, as: UInt32.self)
      return LoadedModule(
        path: string(
          at: base + MemoryLayout<crumbs_crash_module>.offset(of: \.path)!,
          capacity: Int(CRUMBS_CRASH_PATH_SIZE)),
        loadBias: moduleWord(\.load_bias),
        buildID: bytes(at: buildIDStart, count: Int(min(buildIDSize, CRUMBS_CRASH_BUILD_ID_SIZE))),
        start: moduleWord(\.start), end: moduleWord(\.end),
        textStart: moduleWord(\.text_start), textEnd: moduleWord(\.text_end),
        foundAtCrash: moduleFlags & UInt32(CRUMBS_CRASH_MODULE_FOUND_AT_CRASH) != 0,
        unloaded: moduleFlags & UInt32(CRUMBS_CRASH_MODULE_UNLOADED) != 0)
    }

    let partial = flags & UInt32(CRUMBS_CRASH_FLAG_PARTIAL) != 0
    let said = messages()
    let frames = words(at: offset(\C.frames), count: Int(u32(\C.frame_count)))
    let crashing = CrashRecord.Thread(
      id: u32(\C.thread_id),
      name: string(at: offset(\C.thread_name), capacity: Self.capacity(of: \C.thread_name)), state: .crashing,
      signal: signalNumber, registers: registers, frames: frames,
      frameMarks: bytes(at: offset(\C.frame_marks), count: frames.count), backtraceStop: stop,
      stackLow: u64(\C.stack_low), stackHigh: u64(\C.stack_high), stackSource: stackSource)
    var threads = hasThreads ? threadTable.decode(crashing: crashing, registerNames: names) : nil
    let waits =
      hasWaits && threads != nil
      ? waitTable.decode(live: Set(threads?.threads.map(\.id) ?? []), registerNames: names) : nil
    if let waits, var table = threads {
      for index in table.threads.indices { table.threads[index].wait = waits.waits[table.threads[index].id] }
      threads = table
    }
    return CrashRecord(
      status: status,
      version: u32(\C.version),
      pid: Int32(bitPattern: u32(\C.pid)),
      sessionID: SessionID(bytes: bytes(at: offset(\C.session_id), count: 16))!,
      bootID: bytes(at: offset(\C.boot_id), count: 16),
      installWallNanoseconds: u64(\C.install_wall_ns),
      signal: signal,
      threadID: u32(\C.thread_id),
      threadName: string(at: offset(\C.thread_name), capacity: Self.capacity(of: \C.thread_name)),
      threadsCrashed: u32(\C.threads_crashed),
      crashWallNanoseconds: u64(\C.crash_wall_ns),
      crashMonotonicNanoseconds: u64(\C.crash_monotonic_ns),
      processUptimeNanoseconds: u64(\C.process_uptime_ns),
      freeMemoryBytes: u64(\C.free_memory_bytes),
      totalMemoryBytes: u64(\C.total_memory_bytes),
      handlerDurationNanoseconds: u64(\C.handler_duration_ns),
      nestedSignal: partial ? i32(\C.nested_signal_number) : nil,
      nestedSignalCode: partial ? i32(\C.nested_signal_code) : nil,
      nestedFaultAddress: partial ? u64(\C.nested_fault_address) : nil,
      architecture: architecture,
      registers: registers,
      frames: frames,
      frameMarks: bytes(at: offset(\C.frame_marks), count: frames.count).map(FrameMarks.init(rawValue:)),
      backtraceStop: stop,
      leafReturnCandidate: u64(\C.leaf_return_candidate),
      stackLow: u64(\C.stack_low),
      stackHigh: u64(\C.stack_high),
      stackSource: stackSource,
      modules: modules,
      swiftFatalMessage: said.swift,
      swiftFatalMessageTruncated: said.swiftCut,
      uncaughtException: said.exception,
      threads: threads,
      flags: flags,
      replacedSignals: SignalNames.signals(inMask: u64(\C.replaced_signals)),
      firstChance: firstChance(),
      lockWords: waits?.lockWords,
      waitReadNanoseconds: waits?.readNanoseconds)
  }

  /// The first chance's mark, nil when none was given (zeros: a file written before it existed
  /// has them too).
  func firstChance() -> FirstChanceMark? {
    let count = u64(\C.first_chance.count)
    guard count > 0 else { return nil }
    return FirstChanceMark(
      inProgress: u32(\C.first_chance.calling), threadID: u32(\C.first_chance.thread_id),
      signal: i32(\C.first_chance.signal_number), signalCode: i32(\C.first_chance.signal_code),
      pc: u64(\C.first_chance.pc), faultAddress: u64(\C.first_chance.fault_address),
      handler: u64(\C.first_chance.handler), wallNanoseconds: u64(\C.first_chance.wall_ns),
      repeats: u32(\C.first_chance.repeats), count: count, maybeTorn: u32(\C.first_chance.writing) != 0)
  }
}
