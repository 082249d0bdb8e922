// CrashRecord+Waits.swift — reading a record's `crumbs_crash_wait_table` (version 4): each other
// thread's wait (ThreadWaits.crashWait turns its syscall line and lock bytes into a ThreadWait)
// and the lock words the crashing thread's registers pointed at. The bytes are untrusted:
// `problem()` checks every count and length against its C capacity before `decode` reads.
// Not signal-safe.

import CrumbsSignalPath

extension CrashRecord {
  /// A word one of the crashing thread's registers pointed at whose low 30 bits name another
  /// thread of the record: the lock a trapped lock call asked for, when the register still held
  /// its address (crumbs_crash_lock_candidate).
  public struct LockWord: Sendable, Equatable, Codable {
    public var address: UInt64
    public var word: UInt32
    /// The register that held `address` ("r13").
    public var register: String
    /// The tid the word names (its low 30 bits, FUTEX_TID_MASK).
    public var owner: UInt32 { word & ThreadWaits.futexTIDMask }
  }
}

/// A `crumbs_crash_wait_table` at byte `base` of `image`.
struct WaitTableImage: PersistedImage {
  let image: UnsafeRawBufferPointer
  let base: Int

  func tableWord(_ path: KeyPath<crumbs_crash_wait_table, UInt32>) -> UInt32 {
    image.loadUnaligned(
      fromByteOffset: base + MemoryLayout<crumbs_crash_wait_table>.offset(of: path)!, as: UInt32.self)
  }
  func entryOffset<T>(_ index: Int, _ path: KeyPath<crumbs_crash_thread_wait, T>) -> Int {
    base + MemoryLayout<crumbs_crash_wait_table>.offset(of: \.waits)! + index
      * MemoryLayout<crumbs_crash_thread_wait>.stride + MemoryLayout<crumbs_crash_thread_wait>.offset(
        of: path)!
  }
  func entryWord(_ index: Int, _ path: KeyPath<crumbs_crash_thread_wait, UInt32>) -> UInt32 {
    image.loadUnaligned(fromByteOffset: entryOffset(index, path), as: UInt32.self)
  }
  func candidateOffset<T>(_ index: Int, _ path: KeyPath<crumbs_crash_lock_candidate, T>) -> Int {
    base + MemoryLayout<crumbs_crash_wait_table>.offset(of: \.candidates)! + index
      * MemoryLayout<crumbs_crash_lock_candidate>.stride
      + MemoryLayout<crumbs_crash_lock_candidate>.offset(of: path)!
  }

  /// What is wrong with the table's counts and lengths, or nil when nothing is. `image` must
  /// hold the whole struct from `base`.
  func problem() -> String? {
    let count = tableWord(\.count)
    guard count <= CRUMBS_CRASH_MAX_THREADS else {
      return "wait count \(count) > \(CRUMBS_CRASH_MAX_THREADS)"
    }
    let candidates = tableWord(\.candidate_count)
    guard candidates <= CRUMBS_CRASH_MAX_LOCK_CANDIDATES else {
      return "lock word count \(candidates) > \(CRUMBS_CRASH_MAX_LOCK_CANDIDATES)"
    }
    for index in 0..<Int(count) {
      let length = entryWord(index, \.text_length)
      let read = entryWord(index, \.words_read)
      guard length <= CRUMBS_CRASH_WAIT_TEXT_SIZE, read <= 16 else {
        return "wait \(index): \(length) bytes of text, \(read) bytes of lock words (at most "
          + "\(CRUMBS_CRASH_WAIT_TEXT_SIZE), 16)"
      }
    }
    return nil
  }

  /// Each entry's wait by tid (the first entry of a tid wins), owners believed only among `live`;
  /// and the lock words, registers named by `registerNames`. After `problem()` found nothing.
  func decode(live: Set<UInt32>, registerNames: [String]) -> (
    waits: [UInt32: ThreadWait], lockWords: [CrashRecord.LockWord], readNanoseconds: UInt64
  ) {
    var waits: [UInt32: ThreadWait] = [:]
    for index in 0..<Int(tableWord(\.count)) {
      let tid = entryWord(index, \.tid)
      guard tid != 0, waits[tid] == nil else { continue }
      let flags = entryWord(index, \.flags)
      let text = bytes(at: entryOffset(index, \.text), count: Int(entryWord(index, \.text_length)))
      let futex = flags & UInt32(CRUMBS_WAIT_FUTEX) != 0
      waits[tid] = ThreadWaits.crashWait(
        tid: tid, line: flags & UInt32(CRUMBS_WAIT_TEXT_READ) != 0 ? text[...] : nil,
        lockAddress: futex
          ? image.loadUnaligned(fromByteOffset: entryOffset(index, \.lock_address), as: UInt64.self) : nil,
        lockBytes: futex
          ? bytes(at: entryOffset(index, \.lock_words), count: Int(entryWord(index, \.words_read))) : [],
        live: live)
    }
    var lockWords: [CrashRecord.LockWord] = []
    for index in 0..<Int(tableWord(\.candidate_count)) {
      let register = Int(
        image.loadUnaligned(fromByteOffset: candidateOffset(index, \.register_index), as: UInt32.self))
      lockWords.append(
        CrashRecord.LockWord(
          address: image.loadUnaligned(fromByteOffset: candidateOffset(index, \.address), as: UInt64.self),
          word: image.loadUnaligned(fromByteOffset: candidateOffset(index, \.word), as: UInt32.self),
          register: register < registerNames.count ? registerNames[register] : "r\(register)"))
    }
    let read = image.loadUnaligned(
      fromByteOffset: base + MemoryLayout<crumbs_crash_wait_table>.offset(of: \.read_ns)!, as: UInt64.self)
    return (waits, lockWords, read)
  }
}
