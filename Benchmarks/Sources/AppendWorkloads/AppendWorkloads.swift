// AppendWorkloads.swift — the appends every benchmark runner measures, defined once.
//
// Entry points, in call order:
//   Workloads()                          maps a ring (BreadcrumbRing.create), an installed ring
//                                        and the C baseline in TMPDIR (files unlinked at once, so
//                                        a killed run leaves nothing behind; the mappings live on)
//   Workloads.run(kind, count:)          `count` appends of the benchmark breadcrumb, the way
//                                        `kind` says (AppendKind)
//   Workloads.check()                    the rings really hold the benchmark breadcrumb
//   TwoThreadRunner                      the same loop on this thread and one more, at once
//
// The loops are ordinary (non-inlinable) functions of this module, built `-c release`: the ring's
// `append` and `addBreadcrumb` are @inlinable and the baseline's append is a C `static inline`, so
// each is inlined here exactly as it would be in an application calling it.

import CBaselineAppend
import Crumbs
import CrumbsSignalPath
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The breadcrumb every benchmark appends: a 62-byte message and two short attributes.
public enum BenchmarkBreadcrumb {
  /// The message (62 bytes of UTF-8).
  public static let message = "GET /api/v1/orders/8c2f41e0 answered 200 in 12 ms (cache miss)"
  /// The attributes, as the call sites spell them: `["method": "GET", "status": "200"]`.
  public static let attributes: [(key: String, value: String)] = [("method", "GET"), ("status", "200")]

  /// The same message built at run time, as applications build theirs: a native heap string.
  public static func runtimeMessage() -> String {
    let order = String(0x8c2f_41e0, radix: 16)
    return "GET /api/v1/orders/\(order) answered \(runtimeStatus()) in 12 ms (cache miss)"
  }

  /// The status value built at run time ("200", a small string).
  public static func runtimeStatus() -> String { String(100 + Int(getpid() > 0 ? 100 : 0)) }

  /// Bytes one append writes into its slot: the 32-byte slot header, the payload's two u16
  /// lengths, the message, and per attribute two length bytes, the key and the value (120).
  public static let encodedSize: Int =
    32 + 4 + message.utf8.count + attributes.reduce(0) { $0 + 2 + $1.key.utf8.count + $1.value.utf8.count }
}

/// Where scratch files go: $TMPDIR, or /tmp.
public func temporaryDirectory() -> String {
  if let directory = getenv("TMPDIR").map({ String(cString: $0) }), !directory.isEmpty {
    return directory
  }
  return "/tmp"
}

/// A file name in `temporaryDirectory()` unique to this process and call.
func scratchPath(_ stem: String) -> String {
  let serial = scratchFileSerial.add(1, ordering: .relaxed).newValue
  return "\(temporaryDirectory())/crumbs-bench-\(getpid())-\(serial)-\(stem)"
}
private let scratchFileSerial = Atomic<Int>(0)

/// A default ring (4096 slots of 256 bytes: 1 MiB of slots) created with
/// `BreadcrumbRing.create(at:)` in TMPDIR, its file unlinked at once.
public final class RingFixture: Sendable {
  /// The ring.
  public let ring: BreadcrumbRing

  /// Creates the ring; `install` makes it the process-wide ring used by `addBreadcrumb`.
  public init(install: Bool = false) throws {
    let path = scratchPath("ring")
    ring = try BreadcrumbRing.create(at: path)
    unlink(path)
    if install { ring.install() }
  }
}

/// Why the baseline could not be mapped.
public struct BaselineError: Error, CustomStringConvertible {
  /// The errno value crumbs_baseline_open returned.
  public let errno: Int32
  public var description: String { "cannot map the baseline ring: errno \(errno)" }
}

/// The C baseline: a MAP_SHARED file of the ring's size (4096 slots of 256 bytes) with one shared
/// counter, and the record it copies: `BenchmarkBreadcrumb.encodedSize` bytes, the same number
/// an append writes.
public final class BaselineFixture: @unchecked Sendable {
  /// The mapping. Read-only after init; appends change only the mapped memory.
  public let ring: UnsafeMutablePointer<crumbs_baseline_ring>
  /// The record copied by each append (owned here, never freed: fixtures live for the process).
  public let record: UnsafeMutableRawPointer
  /// Its length.
  public let recordLength = BenchmarkBreadcrumb.encodedSize

  public init() throws {
    let path = scratchPath("baseline")
    ring = .allocate(capacity: 1)
    let failure = crumbs_baseline_open(ring, path, 4096, 256)
    guard failure == 0 else { throw BaselineError(errno: failure) }
    unlink(path)
    record = .allocate(byteCount: 256, alignment: 16)
    for index in 0..<256 {
      record.storeBytes(of: UInt8(truncatingIfNeeded: index &* 31), toByteOffset: index, as: UInt8.self)
    }
  }
}

/// The ledger's C floor (CBaselineAppend's crumbs_bench_ledger_floor): an operation begun and
/// ended on one 512-byte entry of a MAP_SHARED mapping (the baseline ring's slots): claim, ids
/// and name copied, publish, free.
public final class LedgerFloor: @unchecked Sendable {
  let baseline: BaselineFixture
  let ids: UnsafeMutableRawPointer

  public init() throws {
    baseline = try BaselineFixture()
    ids = .allocate(byteCount: 32, alignment: 8)
    ids.initializeMemory(as: UInt8.self, repeating: 0x5a, count: 32)
  }

  /// `count` operations named `name`, begun and ended.
  @inline(never) public func run(name: String, count: Int) {
    name.withCString { text in
      crumbs_bench_ledger_floor(baseline.ring.pointee.slots!, text, strlen(text), ids, UInt64(count))
    }
  }
}

/// The ways the benchmarks append the one benchmark breadcrumb (62-byte message, two attributes).
public enum AppendKind: String, CaseIterable, Sendable {
  /// The C floor: fetch_add + copy of the same bytes + release store (CBaselineAppend).
  case baseline
  /// The C floor plus one read of the clock the ring reads (RDTSC on x86_64), stored in the
  /// slot: the least a ring whose entries carry their time does (not a goal's floor; it says
  /// how much of the distance to the floor the clock alone takes on this CPU).
  case stampedBaseline = "floor-with-clock"
  /// `ring.append("GET /api/…", level: .info, type: .http, attributes: ["method": "GET",
  /// "status": "200"])`: every string a literal.
  case literal
  /// The same call as applications usually write it: the message and the `status` value are
  /// strings built at run time (`let message = "GET /api/v1/orders/\(id) answered …"`).
  case runtime
  /// `addBreadcrumb(…)` with run-time values, through the installed ring.
  case global
  /// The C entry that takes lengths, `crumbs_add_breadcrumb_utf8`: the ring without Swift.
  case cEntry = "c-entry"

  /// Whether the kind is one of the C floors (no breadcrumb to check in a ring).
  public var isFloor: Bool { self == .baseline || self == .stampedBaseline }

  /// What the kind measures, for tables.
  public var label: String {
    switch self {
    case .baseline: "C floor (fetch_add + 120 B copy + release store)"
    case .stampedBaseline: "C floor + one clock read (RDTSC), for comparison"
    case .literal: "ring.append, all literals"
    case .runtime: "ring.append, run-time message and value"
    case .global: "addBreadcrumb, run-time message and value"
    case .cEntry: "C entry crumbs_add_breadcrumb_utf8"
    }
  }
}

/// Everything the append benchmarks write to, made once per process.
public final class Workloads: Sendable {
  public let baseline: BaselineFixture
  public let ring: RingFixture
  public let installedRing: RingFixture
  /// The run-time message and status (`BenchmarkBreadcrumb.runtimeMessage()` and `runtimeStatus()`).
  public let message: String
  public let status: String

  public init() throws {
    baseline = try BaselineFixture()
    ring = try RingFixture()
    installedRing = try RingFixture(install: true)
    message = BenchmarkBreadcrumb.runtimeMessage()
    status = BenchmarkBreadcrumb.runtimeStatus()
  }

  /// `count` appends of `kind`.
  public func run(_ kind: AppendKind, count: Int) {
    switch kind {
    case .baseline: appendToBaseline(baseline, stamped: false, count: count)
    case .stampedBaseline: appendToBaseline(baseline, stamped: true, count: count)
    case .literal: appendLiterals(ring.ring, count: count)
    case .runtime: appendRuntimeValues(ring.ring, message: message, status: status, count: count)
    case .global:
      withExtendedLifetime(installedRing) {
        addBreadcrumbsRuntimeValues(message: message, status: status, count: count)
      }
    case .cEntry: withExtendedLifetime(installedRing) { addBreadcrumbsFromC(count: count) }
    }
  }

  /// Whether both rings' newest breadcrumb is exactly the benchmark breadcrumb (message,
  /// attributes, level, type, not cut), after one append of each kind: otherwise the figures
  /// would measure something else.
  public func check() -> Bool {
    for kind in AppendKind.allCases where !kind.isFloor {
      run(kind, count: 1)
      let fixture = kind == .global || kind == .cEntry ? installedRing : ring
      guard let newest = fixture.ring.snapshot().breadcrumbs.last,
        newest.message == BenchmarkBreadcrumb.message,
        newest.attributes.map({ "\($0.key)=\($0.value)" }) == ["method=GET", "status=200"],
        !newest.truncated, newest.level == .info, newest.type == .http
      else { return false }
    }
    return true
  }
}

/// `count` appends of the benchmark breadcrumb to `ring`, every string a literal.
@inline(never)
public func appendLiterals(_ ring: BreadcrumbRing, count: Int) {
  for _ in 0..<count {
    ring.append(
      "GET /api/v1/orders/8c2f41e0 answered 200 in 12 ms (cache miss)", level: .info, type: .http,
      attributes: ["method": "GET", "status": "200"])
  }
}

/// `count` appends as applications usually write them: the message and the `status` value are
/// run-time strings (`message` and `status` come from `BenchmarkBreadcrumb.runtimeMessage()` and
/// `runtimeStatus()`), `"method": "GET"` is a literal.
@inline(never)
public func appendRuntimeValues(_ ring: BreadcrumbRing, message: String, status: String, count: Int) {
  for _ in 0..<count {
    ring.append(message, level: .info, type: .http, attributes: ["method": "GET", "status": status])
  }
}

/// `count` calls of the global `addBreadcrumb` with run-time values, as `appendRuntimeValues`.
@inline(never)
public func addBreadcrumbsRuntimeValues(message: String, status: String, count: Int) {
  for _ in 0..<count {
    addBreadcrumb(message, level: .info, type: .http, attributes: ["method": "GET", "status": status])
  }
}

/// `count` appends of the benchmark breadcrumb through the C entry point that takes lengths,
/// `crumbs_add_breadcrumb_utf8` (the installed ring): the ring's own cost without the Swift
/// wrapper, for comparison.
@inline(never)
public func addBreadcrumbsFromC(count: Int) {
  withUnsafeTemporaryAllocation(of: crumbs_utf8_attribute.self, capacity: 2) { attributes in
    attributes[0] = crumbs_utf8_attribute(
      key: cMethodKey, key_length: 6, value: cMethodValue, value_length: 3)
    attributes[1] = crumbs_utf8_attribute(
      key: cStatusKey, key_length: 6, value: cStatusValue, value_length: 3)
    for _ in 0..<count {
      _ = crumbs_add_breadcrumb_utf8(1, 3, cMessage, 62, attributes.baseAddress, 2)
    }
  }
}
// NUL-terminated copies for the C entry point, made once (never freed).
nonisolated(unsafe) private let cMessage = strdup(BenchmarkBreadcrumb.message)!
nonisolated(unsafe) private let cMethodKey = strdup("method")!
nonisolated(unsafe) private let cMethodValue = strdup("GET")!
nonisolated(unsafe) private let cStatusKey = strdup("status")!
nonisolated(unsafe) private let cStatusValue = strdup("200")!

/// `count` baseline appends; `stamped`: each with the clock read (crumbs_baseline_append_stamped).
@inline(never)
public func appendToBaseline(_ baseline: BaselineFixture, stamped: Bool, count: Int) {
  let ring = UnsafePointer(baseline.ring)
  let record = UnsafeRawPointer(baseline.record)
  let length = baseline.recordLength
  if stamped {
    for _ in 0..<count { crumbs_baseline_append_stamped(ring, record, length) }
  } else {
    for _ in 0..<count { crumbs_baseline_append(ring, record, length) }
  }
}

/// Monotonic nanoseconds (CLOCK_MONOTONIC).
public func monotonicNanoseconds() -> UInt64 {
  var now = timespec()
  clock_gettime(CLOCK_MONOTONIC, &now)
  return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}
