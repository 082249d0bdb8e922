// FuzzCrashRecordReader — libFuzzer target for CrashRecord.read(image:), the parser of crash
// record files that crashed processes leave behind (untrusted input: a handler killed half way,
// a torn page, a foreign file, a newer format).
//
// Entry points, in call order:
//   FuzzMain.run            dispatches on the arguments (shared: Fuzz/Support):
//     --make-seeds DIR      writes the seed corpus (an armed record, a filled one, a partial
//                           one, any real `.crash` files given after DIR, and damaged copies)
//     crumbs_fuzz_run       in a `-sanitize=fuzzer` build: libFuzzer's driver, calling fuzzOneInput
//     replay(files)         in a normal build: feeds each file given to fuzzOneInput
//   fuzzOneInput            read(image:) on the bytes as given, then on a copy padded or cut to
//                           the record size with the magic, version and sizes repaired, so
//                           mutations reach the field decoder instead of dying at the header
//
// The property checked: read(image:) returns a record or throws PersistedFileError, never traps,
// and what it returns respects the C capacities. Not signal-safe (an ordinary program).

import CFuzzDriver
import CrumbsRecorder
import CrumbsSignalPath
import FuzzSupport

#if canImport(Glibc)
  import Glibc
#endif

let recordSize = MemoryLayout<crumbs_crash_record>.size

/// One libFuzzer input. Any trap here is a finding.
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let input = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size)
  check(input)
  var repaired = Array(input.prefix(CrashHandler.recordFileSize))
  if repaired.count < CrashHandler.recordFileSize {
    repaired += [UInt8](repeating: 0, count: CrashHandler.recordFileSize - repaired.count)
  }
  repaired.withUnsafeMutableBytes { bytes in
    bytes.storeBytes(of: CRUMBS_CRASH_RECORD_MAGIC, toByteOffset: 0, as: UInt64.self)
    bytes.storeBytes(of: CRUMBS_CRASH_RECORD_VERSION, toByteOffset: 8, as: UInt32.self)
    bytes.storeBytes(of: CRUMBS_CRASH_HEADER_SIZE, toByteOffset: 12, as: UInt32.self)
    bytes.storeBytes(of: UInt64(recordSize), toByteOffset: 16, as: UInt64.self)
  }
  repaired.withUnsafeBytes { check($0) }
  return 0
}

/// Reads `image` and checks what the reader promises about any result.
func check(_ image: UnsafeRawBufferPointer) {
  let result = Result { () throws(PersistedFileError) in try CrashRecord.read(image: image) }
  switch result {
  case .success(let record):
    precondition(record.frames.count <= Int(CRUMBS_CRASH_MAX_FRAMES), "too many frames")
    precondition(record.registers.count <= Int(CRUMBS_CRASH_MAX_REGISTERS), "too many registers")
    precondition(record.modules.count <= Int(CRUMBS_CRASH_MAX_MODULES), "too many modules")
    for module in record.modules {
      precondition(module.buildID.count <= Int(CRUMBS_CRASH_BUILD_ID_SIZE), "build id too long")
      precondition(module.path.utf8.count <= Int(CRUMBS_CRASH_PATH_SIZE) * 3, "path too long")
    }
    precondition(record.signal.name.utf8.count <= 16 * 3 && record.threadName.utf8.count <= 16 * 3)
    if let table = record.threads {
      precondition(record.version >= 3, "a thread table before version 3")
      precondition(table.threads.count <= Int(CRUMBS_CRASH_MAX_THREADS), "too many threads")
      for thread in table.threads where thread.state != .crashing {
        precondition(thread.frames.count <= Int(CRUMBS_CRASH_THREAD_MAX_FRAMES), "too many thread frames")
        precondition(thread.frameMarks.count == thread.frames.count, "marks and frames differ")
        precondition(
          thread.registers.count <= Int(CRUMBS_CRASH_THREAD_MAX_REGISTERS), "too many thread registers")
        precondition(thread.name.utf8.count <= 16 * 3, "thread name too long")
      }
      for thread in table.threads {
        guard let wait = thread.wait else { continue }
        precondition(record.version >= 4, "a wait before version 4")
        precondition(wait.threadID == thread.id, "a wait on the wrong thread")
        precondition((wait.arguments?.count ?? 6) == 6, "not six arguments")
        precondition(
          wait.owner.map { owner in table.threads.contains { $0.id == owner } } ?? true, "an owner not listed"
        )
      }
    }
    precondition(
      (record.lockWords?.count ?? 0) <= Int(CRUMBS_CRASH_MAX_LOCK_CANDIDATES), "too many lock words")
  case .failure(let error):
    precondition(!error.reason.isEmpty, "an error without a reason")
  }
}

// MARK: - Seeds

/// A formatted record with `fill` applied to the C struct.
func record(_ fill: (inout crumbs_crash_record) -> Void) -> [UInt8] {
  var bytes = [UInt8](repeating: 0, count: CrashHandler.recordFileSize)
  bytes.withUnsafeMutableBytes { raw in
    let pointer = raw.baseAddress!.assumingMemoryBound(to: crumbs_crash_record.self)
    crumbs_crash_record_format(
      pointer, 4242, [UInt8](repeating: 0xAB, count: 16), [UInt8](repeating: 0x01, count: 16), 1_000_000)
    fill(&pointer.pointee)
  }
  return bytes
}

func setString<T>(_ field: inout T, _ text: String) {
  withUnsafeMutableBytes(of: &field) { bytes in
    let utf8 = Array(text.utf8.prefix(bytes.count - 1))
    bytes.copyBytes(from: utf8 + [0])
  }
}

func makeSeeds(in directory: String, realRecords: [String]) throws -> Int {
  mkdir(directory, 0o755)
  var written = 0
  func save(_ name: String, _ bytes: [UInt8]) throws {
    try FuzzMain.writeFile(directory + "/" + name, bytes)
    written += 1
  }
  let armed = record { _ in }
  try save("armed", armed)
  let complete = record { record in
    record.state = UInt32(CRUMBS_CRASH_COMPLETE.rawValue)
    record.signal_number = SIGSEGV
    record.signal_code = 1
    setString(&record.signal_name, "SIGSEGV")
    setString(&record.code_name, "SEGV_MAPERR")
    record.thread_id = 4242
    setString(&record.thread_name, "main")
    record.register_count = 23
    withUnsafeMutableBytes(of: &record.registers) {
      $0.storeBytes(of: UInt64(0x1234), toByteOffset: 16 * 8, as: UInt64.self)
    }
    record.frame_count = 3
    withUnsafeMutableBytes(of: &record.frames) { frames in
      for index in 0..<3 {
        frames.storeBytes(of: UInt64(0x5555_0000 + index * 16), toByteOffset: index * 8, as: UInt64.self)
      }
    }
    record.module_count = 2
    withUnsafeMutableBytes(of: &record.modules) { modules in
      let stride = MemoryLayout<crumbs_crash_module>.stride
      for index in 0..<2 {
        var module = crumbs_crash_module()
        module.load_bias = UInt64(0x5555_0000 + index * 0x10000)
        module.start = module.load_bias
        module.end = module.start + 0x8000
        module.text_start = module.start + 0x1000
        module.text_end = module.start + 0x4000
        module.build_id_size = 20
        setString(&module.path, index == 0 ? "/usr/bin/app" : "/lib/libc.so.6")
        modules.storeBytes(of: module, toByteOffset: index * stride, as: crumbs_crash_module.self)
      }
    }
    record.complete_marker = CRUMBS_CRASH_COMPLETE_MARKER
  }
  try save("complete", complete)
  // The thread table (version 3): the crashing thread, one captured, one that did not answer.
  let threads = record { record in
    record.state = UInt32(CRUMBS_CRASH_COMPLETE.rawValue)
    record.thread_id = 4242
    record.threads.threads_seen = 3
    record.threads.thread_count = 3
    record.threads.captured = 1
    record.threads.no_answer = 1
    withUnsafeMutableBytes(of: &record.threads.threads) { entries in
      let stride = MemoryLayout<crumbs_crash_thread>.stride
      for index in 0..<3 {
        var thread = crumbs_crash_thread()
        thread.tid = UInt32(4242 + index)
        thread.state =
          [CRUMBS_THREAD_CRASHING, CRUMBS_THREAD_CAPTURED, CRUMBS_THREAD_NO_ANSWER][index].rawValue
        setString(&thread.name, "worker-\(index)")
        if index == 1 {
          thread.register_count = 23
          thread.frame_count = 2
          withUnsafeMutableBytes(of: &thread.frames) {
            $0.storeBytes(of: UInt64(0x5555_1000), toByteOffset: 0, as: UInt64.self)
            $0.storeBytes(of: UInt64(0x5555_2000), toByteOffset: 8, as: UInt64.self)
          }
        }
        entries.storeBytes(of: thread, toByteOffset: index * stride, as: crumbs_crash_thread.self)
      }
    }
    record.complete_marker = CRUMBS_CRASH_COMPLETE_MARKER
  }
  try save("threads", threads)
  var damagedThreads = threads
  damagedThreads.withUnsafeMutableBytes { bytes in
    let table = MemoryLayout<crumbs_crash_record>.offset(of: \.threads)!
    let entry =
      table + MemoryLayout<crumbs_crash_thread_table>.offset(of: \.threads)!
      + MemoryLayout<crumbs_crash_thread>.stride
    bytes.storeBytes(
      of: UInt32(500), toByteOffset: entry + MemoryLayout<crumbs_crash_thread>.offset(of: \.frame_count)!,
      as: UInt32.self)
  }
  try save("damaged-thread-frames", damagedThreads)
  // The waits (version 4): thread 4243 in a PI futex lock on a word naming 4242, thread 4244 in
  // a glibc mutex wait whose owner field names 4243; one lock word in the crashing thread's r13.
  var waits = threads
  waits.withUnsafeMutableBytes { bytes in
    let table = MemoryLayout<crumbs_crash_record>.offset(of: \.waits)!
    let stride = MemoryLayout<crumbs_crash_thread_wait>.stride
    let lines = [
      (
        4243, "202 0x7f0000001000 0x86 0x0 0x0 0x3 0x6300 0x7ffd00001000 0x7f0000002000\n",
        [4242 | 0x8000_0000, 0, 0, 0]
      ),
      (4244, "202 0x7f0000003000 0x80 0x2 0x0 0x0 0x0 0x7ffd00002000 0x7f0000004000\n", [2, 1, 4243, 0]),
    ]
    for (index, (tid, line, words)) in lines.enumerated() {
      var wait = crumbs_crash_thread_wait()
      wait.tid = UInt32(tid)
      wait.flags = UInt32(CRUMBS_WAIT_TEXT_READ | CRUMBS_WAIT_FUTEX)
      wait.lock_address = index == 0 ? 0x7f00_0000_1000 : 0x7f00_0000_3000
      wait.lock_words = (UInt32(words[0]), UInt32(words[1]), UInt32(words[2]), UInt32(words[3]))
      wait.words_read = 16
      wait.text_length = UInt32(line.utf8.count)
      setString(&wait.text, line)
      bytes.storeBytes(
        of: wait,
        toByteOffset: table + MemoryLayout<crumbs_crash_wait_table>.offset(of: \.waits)! + index * stride,
        as: crumbs_crash_thread_wait.self)
    }
    bytes.storeBytes(
      of: UInt32(2), toByteOffset: table + MemoryLayout<crumbs_crash_wait_table>.offset(of: \.count)!,
      as: UInt32.self)
    var candidate = crumbs_crash_lock_candidate()
    candidate.address = 0x7f00_0000_5000
    candidate.word = 4243
    candidate.register_index = 5
    bytes.storeBytes(
      of: candidate, toByteOffset: table + MemoryLayout<crumbs_crash_wait_table>.offset(of: \.candidates)!,
      as: crumbs_crash_lock_candidate.self)
    bytes.storeBytes(
      of: UInt32(1),
      toByteOffset: table + MemoryLayout<crumbs_crash_wait_table>.offset(of: \.candidate_count)!,
      as: UInt32.self)
  }
  try save("waits", waits)
  var damagedWaits = waits
  damagedWaits.withUnsafeMutableBytes { bytes in
    let entry =
      MemoryLayout<crumbs_crash_record>.offset(of: \.waits)!
      + MemoryLayout<crumbs_crash_wait_table>.offset(of: \.waits)!
    bytes.storeBytes(
      of: UInt32(4000),
      toByteOffset: entry + MemoryLayout<crumbs_crash_thread_wait>.offset(of: \.text_length)!,
      as: UInt32.self)
  }
  try save("damaged-wait-text", damagedWaits)
  try save(
    "partial",
    record { record in
      record.state = UInt32(CRUMBS_CRASH_COMPLETE.rawValue)
      record.flags = UInt32(CRUMBS_CRASH_FLAG_PARTIAL)
      record.signal_number = SIGABRT
      record.nested_signal_number = SIGSEGV
      record.nested_fault_address = 8
      record.complete_marker = CRUMBS_CRASH_COMPLETE_MARKER
    })
  for (index, path) in realRecords.enumerated() {
    try save("real-\(index)", try FuzzMain.readFile(path))
  }
  func damaged(_ name: String, _ change: (inout [UInt8]) -> Void) throws {
    var bytes = complete
    change(&bytes)
    try save(name, bytes)
  }
  try damaged("damaged-cut") { $0.removeLast($0.count - 3000) }
  try damaged("damaged-magic") { $0[0] = UInt8(ascii: "X") }
  try damaged("damaged-version") { $0[8] = 7 }
  try damaged("damaged-frame-count") { bytes in
    let offset = MemoryLayout<crumbs_crash_record>.offset(of: \.frame_count)!
    bytes[offset + 1] = 0x40
  }
  try damaged("damaged-string-unterminated") { bytes in
    let offset = MemoryLayout<crumbs_crash_record>.offset(of: \.thread_name)!
    for index in 0..<16 { bytes[offset + index] = 0xFF }
  }
  return written
}

// MARK: - Main

FuzzMain.run(
  name: "FuzzCrashRecordReader", callback: { data, size in fuzzOneInput(data, size) },
  makeSeeds: { directory, real in try makeSeeds(in: directory, realRecords: real) },
  describe: { bytes in
    let result = bytes.withUnsafeBytes { image in
      Result { () throws(PersistedFileError) in try CrashRecord.read(image: image) }
    }
    switch result {
    case .success(let record):
      return
        "\(record.status.rawValue) signal \(record.signal.number), \(record.frames.count) frames, \(record.modules.count) modules"
        + (record.threads.map { ", \($0.threads.count) threads" } ?? "")
        + (record.threads.map { table in
          let waits = table.threads.compactMap(\.wait)
          return waits.isEmpty
            ? "" : ", \(waits.count) waits, \(waits.filter { $0.owner != nil }.count) owners"
        } ?? "")
    case .failure(let error):
      return "rejected (\(error.kind.rawValue)): \(error.reason)"
    }
  })
