// FuzzRingReader — libFuzzer target for RingReader.read(image:), the parser of ring files that
// crashed or killed processes leave behind (untrusted input: a torn page, a foreign file, a newer
// format).
//
// Entry points, in call order:
//   FuzzMain.run            dispatches on the arguments (shared: Fuzz/Support):
//     --make-seeds DIR      writes the seed corpus (real rings made with BreadcrumbRing, plus a
//                           few damaged ones) into DIR
//     crumbs_fuzz_run       in a `-sanitize=fuzzer` build: libFuzzer's driver, calling fuzzOneInput
//     replay(files)         in a normal build: feeds each file given to fuzzOneInput, so a
//                           regression can be run by hand; no files: says "not a fuzzer build"
//   fuzzOneInput            read(image:) on the bytes as given, then on a copy whose slot
//                           checksums are recomputed, so mutations reach the payload decoder
//                           instead of dying at the checksum
//
// The property checked: read(image:) returns contents or throws PersistedFileError, never traps,
// and what it returns is self-consistent: among it the in-flight ledger (no more open operations
// than entries, none read from a ledger named damaged), the header's hang going on (OngoingHang), which
// is a hang that started, was seen at or after its start and reads whole, or damage named, never
// both; and a stop request or limit signal only ever one such signal. Not signal-safe (an
// ordinary program).

import CFuzzDriver
import CrumbsRecorder
import CrumbsSignalPath
import FuzzSupport

#if canImport(Glibc)
  import Glibc
#endif

/// One libFuzzer input. Any trap here is a finding.
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let input = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size)
  check(input)
  if let repaired = withRepairedChecksums(input) {
    repaired.withUnsafeBytes { check($0) }
  }
  return 0
}

/// Reads `image` and checks what the reader promises about any result.
func check(_ image: UnsafeRawBufferPointer) {
  do {
    let contents = try RingReader.read(image: image)
    let counts = contents.counts
    precondition(counts.valid == contents.breadcrumbs.count, "valid count disagrees with breadcrumbs")
    precondition(counts.valid + counts.torn + counts.empty == contents.header.slotCount, "slots lost")
    for breadcrumb in contents.breadcrumbs {
      precondition(breadcrumb.attributes.count <= Int(CRUMBS_MAX_ATTRIBUTES) * 16, "absurd attributes")
    }
    if let hang = contents.header.ongoingHang {
      precondition(hang.sinceWallNanoseconds != 0, "a hang that never started")
      precondition(hang.seenWallNanoseconds >= hang.sinceWallNanoseconds, "a hang seen before it began")
      precondition(contents.header.hangDamage == nil, "a hang and its damage at once")
      precondition(!hang.summary.isEmpty, "a hang the next launch cannot name")
    }
    if let ledger = contents.ledger {
      precondition(ledger.open.count <= ledger.capacity, "more open operations than entries")
      precondition(ledger.damage == nil || ledger.open.isEmpty, "a damaged ledger read anyway")
      for operation in ledger.open {
        precondition(operation.name.utf8.count <= Int(CRUMBS_LEDGER_NAME_MAX) * 3, "absurd name")
        precondition(operation.attributes.count <= Int(CRUMBS_LEDGER_MAX_ATTRIBUTES), "absurd attributes")
      }
    }
    let signs = contents.header.uncleanEndSigns
    if let stop = signs.stopRequest {
      precondition(UncleanEndSigns.stopSignals.contains(stop.signal), "a stop request no stop signal makes")
    }
    if let limit = signs.limitSignal {
      precondition(UncleanEndSigns.limitSignals.contains(limit.signal), "a limit signal no limit sends")
    }
  } catch {
    precondition(!error.reason.isEmpty, "an error without a reason")
  }
}

/// A copy of `image` in which every slot whose commit word says DONE gets the checksum its bytes
/// deserve; nil when the header is too damaged to find slots. Only the fields needed to walk the
/// slots are trusted, and each is bounds-checked here.
func withRepairedChecksums(_ image: UnsafeRawBufferPointer) -> [UInt8]? {
  guard image.count >= Int(CRUMBS_RING_HEADER_SIZE) else { return nil }
  let header = image.loadUnaligned(as: crumbs_ring_header.self)
  let slotSize = Int(header.slot_size)
  guard slotSize >= Int(CRUMBS_SLOT_MIN_SIZE), slotSize <= Int(CRUMBS_SLOT_MAX_SIZE),
    header.slots_offset < UInt64(image.count)
  else { return nil }
  var copy = Array(image)
  var offset = Int(header.slots_offset)
  copy.withUnsafeMutableBytes { bytes in
    while offset + slotSize <= bytes.count {
      let slot = UnsafeMutableRawBufferPointer(rebasing: bytes[offset..<offset + slotSize])
      let commit = slot.loadUnaligned(as: UInt64.self)
      if commit != 0, commit & 1 == 0,
        let checksum = SlotDecoder.checksum(
          UnsafeRawBufferPointer(slot), position: (commit >> 1) &- 1, version: header.version)
      {
        slot.storeBytes(of: checksum, toByteOffset: 24, as: UInt32.self)
      }
      offset += slotSize
    }
  }
  return copy
}

// MARK: - Seeds

/// Writes small real rings (smallest shapes, a few breadcrumbs, wrapped lanes, cut messages) and
/// a few damaged copies into `directory`. Returns the number of files written.
func makeSeeds(in directory: String) throws -> Int {
  mkdir(directory, 0o755)
  var written = 0
  func ring(
    _ name: String, slotSize: Int = 64, slotCount: Int = 64, state clean: Bool = false,
    _ fill: (BreadcrumbRing) -> Void
  ) throws -> [UInt8] {
    let path = directory + "/" + name
    unlink(path)
    var options = RingOptions()
    options.slotSize = slotSize
    options.slotCount = slotCount
    options.appName = "fuzz-seed"
    options.ledgerEntryCount = 8
    let ring = try BreadcrumbRing.create(at: path, options: options)
    fill(ring)
    ring.close(clean: clean)
    written += 1
    return try FuzzMain.readFile(path)
  }

  _ = try ring("empty-64x64-clean", state: true) { _ in }
  let few = try ring("few-64x64") { ring in
    ring.append("launch", level: .info, type: .system)
    ring.append("open", level: .debug, type: .navigation, attributes: ["screen": "home"])
    ring.append("GET /x", level: .warning, type: .http, attributes: ["status": "500", "ms": "12"])
  }
  _ = try ring("ledger-open-64x64") { ring in
    let trace = TraceContext(traceID: "4bf92f3577b34da6a3ce929d0e0e4736", spanID: "00f067aa0ba902b7")
    let request = ring.beginOperation("GET /v1/orders/:id", trace: trace, parentSpanID: "b7ad6b7169203331")
    ring.addOperationAttribute(request, key: "url.path", value: "/v1/orders/42")
    ring.addOperationAttribute(request, key: "user", value: "u-1")
    _ = ring.beginOperation("nightly export", kind: .job)
    ring.endOperation(ring.beginOperation("ended"))
    ring.append("beside the ledger", level: .info, type: .http)
  }
  _ = try ring("wrapped-64x64") { ring in
    for number in 0..<200 { ring.append("tick \(number)", level: .debug, attributes: ["n": "\(number)"]) }
    for number in 0..<21 { ring.append("warn \(number)", level: .warning, type: .log) }
  }
  _ = try ring("truncated-64x64") { ring in
    ring.append(String(repeating: "long message ", count: 10), level: .error)
    ring.append("short", attributes: ["key": String(repeating: "v", count: 60), "k2": "v2"])
  }
  _ = try ring("unicode-128x64", slotSize: 128) { ring in
    ring.append("café ☕️ 𝄞 ü", level: .info, type: .user, attributes: ["ключ": "значение"])
    ring.append("", level: .fatal, type: .configuration)
    for number in 0..<17 { ring.append("attr \(number)", attributes: ["a": "1", "b": "2", "c": "3"]) }
  }
  _ = try ring("wrapped-256x64-clean", slotSize: 256, state: true) { ring in
    for number in 0..<150 {
      ring.append(
        "request \(number) done", level: number % 9 == 0 ? .error : .info, type: .http,
        attributes: ["id": "\(number)", "path": "/api/v1/items"])
    }
  }

  // A hang going on (issue 23): the watchdog's record in the header, which the next launch reads.
  let hung = try ring("hang-64x64") { ring in
    ring.append("GET /slow", level: .info, type: .http)
    ring.recordHang(
      watch: "event-loop-1", sinceWallNanoseconds: 1_700_000_000_000_000_000,
      frames: "EventLoop.run() ← Thread.main")
    ring.refreshHang(seenWallNanoseconds: 1_700_000_031_000_000_000)
  }
  func damagedHang(_ name: String, _ change: (inout [UInt8]) -> Void) throws {
    var bytes = hung
    change(&bytes)
    try FuzzMain.writeFile(directory + "/" + name, bytes)
    written += 1
  }
  let field = { (path: PartialKeyPath<crumbs_ring_header>) in
    MemoryLayout<crumbs_ring_header>.offset(of: path)!
  }
  try damagedHang("damaged-hang-torn") { $0[field(\.hang_sequence)] |= 1 }
  try damagedHang("damaged-hang-watch-no-nul") { bytes in
    for index in 0..<64 { bytes[field(\.hang_watch) + index] = UInt8(ascii: "w") }
  }
  try damagedHang("damaged-hang-watch-not-utf8") { $0[field(\.hang_watch)] = 0xFF }
  try damagedHang("damaged-hang-seen-before-since") { bytes in
    bytes.withUnsafeMutableBytes {
      $0.storeBytes(of: 1_699_999_999_000_000_000, toByteOffset: field(\.hang_seen_wall_ns), as: UInt64.self)
    }
  }

  // What explains an unclean end (issue 24): a stop request and a SIGXCPU the process outlived,
  // as the signal-breadcrumb handler notes them (one word each), and the limits at start (made
  // by BreadcrumbRing.create); then a word naming a signal it may not hold (damage: none).
  func signalSeen(_ signal: Int32, _ wallNanoseconds: UInt64) -> UInt64 {
    (wallNanoseconds / 1_000_000) << 8 | UInt64(signal)
  }
  var ended = few
  ended.withUnsafeMutableBytes {
    $0.storeBytes(
      of: signalSeen(SIGTERM, 1_700_000_000_000_000_000), toByteOffset: field(\.stop_request), as: UInt64.self
    )
    $0.storeBytes(
      of: signalSeen(SIGXCPU, 1_700_000_001_000_000_000), toByteOffset: field(\.limit_signal), as: UInt64.self
    )
  }
  try FuzzMain.writeFile(directory + "/ends-64x64", ended)
  written += 1
  ended.withUnsafeMutableBytes {
    $0.storeBytes(
      of: signalSeen(SIGKILL, 1_700_000_000_000_000_000), toByteOffset: field(\.stop_request), as: UInt64.self
    )
  }
  try FuzzMain.writeFile(directory + "/damaged-stop-request-signal", ended)
  written += 1

  // Damaged copies of `few`: the reader must count or reject these, never trap.
  let slotsOffset = Int(few.withUnsafeBytes { $0.loadUnaligned(as: crumbs_ring_header.self).slots_offset })
  func damaged(_ name: String, _ change: (inout [UInt8]) -> Void) throws {
    var bytes = few
    change(&bytes)
    try FuzzMain.writeFile(directory + "/" + name, bytes)
    written += 1
  }
  try damaged("damaged-cut-in-slots") { $0.removeLast($0.count - slotsOffset - 100) }
  try damaged("damaged-cut-in-header") { $0.removeLast($0.count - 200) }
  try damaged("damaged-payload-byte") { $0[slotsOffset + 40] ^= 0x5A }
  try damaged("damaged-commit-writing") { $0[slotsOffset] |= 1 }
  try damaged("damaged-wrong-magic") { $0[0] = UInt8(ascii: "X") }
  try damaged("damaged-future-version") { $0[8] = 9 }
  try damaged("damaged-lane-count") { $0[24] = 3 }
  return written
}

// MARK: - Main

FuzzMain.run(
  name: "FuzzRingReader", callback: { data, size in fuzzOneInput(data, size) },
  makeSeeds: { directory, _ in try makeSeeds(in: directory) },
  describe: { bytes in
    let result = bytes.withUnsafeBytes { image in
      Result { () throws(PersistedFileError) in try RingReader.read(image: image) }
    }
    switch result {
    case .success(let contents):
      let counts = contents.counts
      let hang =
        contents.header.ongoingHang.map { "; during \($0.summary)" }
        ?? contents.header.hangDamage.map { "; hang damaged: \($0)" } ?? ""
      return
        "ring: \(counts.valid) valid, \(counts.torn) torn, \(counts.overwritten) overwritten, \(counts.empty) empty"
        + hang
    case .failure(let error):
      return "rejected (\(error.kind.rawValue)): \(error.reason)"
    }
  })
