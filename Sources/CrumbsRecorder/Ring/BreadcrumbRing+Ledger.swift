// BreadcrumbRing+Ledger.swift — operations (requests, jobs) open in the ring's in-flight ledger
// (crumbs_ledger.h): begin, rename, add an attribute, end. Each is one call into C, lock-free,
// with no allocation for a native (e.g. literal) name and no system call; a ring without a
// ledger (ledgerEntryCount 0), or closed, records nothing. The reader is LedgerReader.

import CrumbsSignalPath
import Synchronization

/// An operation open in a ring's ledger. Ending it twice, or after its ring closed, does nothing.
///
/// It holds the ring's C handle, not the ring object: its own calls (rename, addAttribute, end,
/// contents) touch no reference count, which two threads beginning and ending operations in one
/// ring would contend on. They are valid while the ring's memory is: for a published ring (a
/// client's, installed) for the rest of the process; otherwise while the caller keeps the ring.
public struct LedgerEntry: @unchecked Sendable, Equatable {
  @usableFromInline let handle: crumbs_ledger_handle
  /// The ring it is in; nil when not recorded.
  @usableFromInline let ring: UnsafePointer<crumbs_ring>?

  @usableFromInline init(_ handle: crumbs_ledger_handle, ring: UnsafePointer<crumbs_ring>? = nil) {
    self.handle = handle
    self.ring = handle.valid != 0 ? ring : nil
  }

  /// False when the ledger had no free entry (the operation is counted, not held), has none, or
  /// the ring was closed: later calls with it do nothing.
  public var isRecorded: Bool { handle.valid != 0 }

  public static func == (lhs: LedgerEntry, rhs: LedgerEntry) -> Bool {
    lhs.handle.valid == rhs.handle.valid && lhs.handle.index == rhs.handle.index
      && lhs.handle.generation == rhs.handle.generation && lhs.ring == rhs.ring
  }

  /// Renames the operation (e.g. to its route, known once routing is done). False when it is no
  /// longer open or its ring closed.
  @discardableResult
  public func rename(to name: String) -> Bool {
    guard let ring else { return false }
    var name = name
    return name.withUTF8 { utf8 in
      crumbs_ledger_set_name(
        ring, handle, UnsafeRawPointer(utf8.baseAddress)?.assumingMemoryBound(to: CChar.self), utf8.count)
    }
  }

  /// Adds a short attribute (at most four per operation; each side cut at 255 bytes and to what
  /// is left of 288). False when it is no longer open or its ring closed.
  @discardableResult
  public func addAttribute(key: String, value: String) -> Bool {
    guard let ring else { return false }
    var key = key
    var value = value
    return key.withUTF8 { keyBytes in
      value.withUTF8 { valueBytes in
        crumbs_ledger_add_attribute(
          ring, handle, UnsafeRawPointer(keyBytes.baseAddress)?.assumingMemoryBound(to: CChar.self),
          keyBytes.count, UnsafeRawPointer(valueBytes.baseAddress)?.assumingMemoryBound(to: CChar.self),
          valueBytes.count)
      }
    }
  }

  /// Ends the operation, even after its ring closed (the entry is freed in whatever memory it is
  /// in). False when it was not open (ended before, or never recorded).
  @inlinable @discardableResult
  public func end() -> Bool {
    guard let ring else { return false }
    return crumbs_ledger_end(ring, handle)
  }

  /// What the ledger holds for the operation now (name, ids, attributes); nil when it is no
  /// longer open, was never recorded, or a writer was busy in it every time it was read.
  public var contents: OpenOperation? {
    guard let ring, let layout = RingReader.liveLayout(ring) else { return nil }
    return LedgerReader.readLive(ring, handle: handle, layout: layout)
  }
}

extension BreadcrumbRing {
  /// Begins an operation named `name` (a route, `POST /v1/orders/:id`, not a path with ids; cut at
  /// 128 bytes), of `kind`, in the trace `trace` (its span id is the operation's own), a child
  /// of `parentSpanID` (16 hex digits) when given.
  public func beginOperation(
    _ name: String, kind: OpenOperation.Kind = .server, trace: TraceContext? = nil,
    parentSpanID: String? = nil
  ) -> LedgerEntry {
    beginOperation(
      name, kind: kind, ids: trace.flatMap(TraceIDs.init), parentSpanID: TraceIDs.spanID(hex: parentSpanID))
  }

  /// `beginOperation` with ids as numbers (`parentSpanID` 0: none), what CrumbsTracer calls for
  /// every span: no hex is parsed or made.
  @usableFromInline package func beginOperation(
    _ name: String, kind: OpenOperation.Kind, ids: TraceIDs?, parentSpanID: UInt64
  ) -> LedgerEntry {
    guard let ring = openHandle else { return LedgerEntry(crumbs_ledger_handle()) }
    // Trace id, span id and parent span id, each in W3C byte order (the hex digits' order).
    var words = (
      ids?.traceHigh.bigEndian ?? 0, ids?.traceLow.bigEndian ?? 0, ids?.spanID.bigEndian ?? 0,
      parentSpanID.bigEndian
    )
    let hasParent = ids != nil && parentSpanID != 0
    var name = name
    return name.withUTF8 { utf8 in
      withUnsafeBytes(of: &words) { raw in
        let base = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
        var operation = crumbs_ledger_operation(
          name: UnsafeRawPointer(utf8.baseAddress)?.assumingMemoryBound(to: CChar.self),
          name_length: utf8.count,
          trace_id: ids != nil ? base : nil, span_id: ids != nil ? base + 16 : nil,
          parent_span_id: hasParent ? base + 24 : nil, kind: kind.raw)
        return LedgerEntry(crumbs_ledger_begin(ring, &operation), ring: ring)
      }
    }
  }

  /// The open operation of the span `ids` names (`exact`), else the one of its trace begun last
  /// (crumbs_ledger_find): its entry and its span id. Nil when no operation of the trace is
  /// open, or the ring has no ledger or is closed. One pass over the table, a few loads for each
  /// entry: for a report made in a span, not for every span.
  package func findOperation(_ ids: TraceIDs) -> (entry: LedgerEntry, spanID: UInt64, exact: Bool)? {
    guard let ring = openHandle else { return nil }
    var words = (ids.traceHigh.bigEndian, ids.traceLow.bigEndian, ids.spanID.bigEndian)
    let match = withUnsafeBytes(of: &words) { raw in
      let base = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
      return crumbs_ledger_find(ring, base, base + 16)
    }
    guard match.handle.valid != 0 else { return nil }
    let spanID = withUnsafeBytes(of: match.span_id) { UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)) }
    return (LedgerEntry(match.handle, ring: ring), spanID, match.exact != 0)
  }

  /// Renames an open operation (`LedgerEntry.rename(to:)`); false also once this ring closed.
  @discardableResult
  public func renameOperation(_ entry: LedgerEntry, to name: String) -> Bool {
    openHandle != nil && entry.rename(to: name)
  }

  /// Adds a short attribute to an open operation (`LedgerEntry.addAttribute(key:value:)`); false
  /// also once this ring closed.
  @discardableResult
  public func addOperationAttribute(_ entry: LedgerEntry, key: String, value: String) -> Bool {
    openHandle != nil && entry.addAttribute(key: key, value: value)
  }

  /// What the ledger holds for an open operation now (`LedgerEntry.contents`); nil also once
  /// this ring closed.
  public func openOperation(_ entry: LedgerEntry) -> OpenOperation? {
    openHandle != nil ? entry.contents : nil
  }

  /// The operations open in the ledger now, oldest first, read while writers run (lock-free:
  /// each entry copied with its seqlock); nil when the ring has none or is closed. Costs one load
  /// per free entry and a copy of each open one: for a watchdog or a dump, not a hot path.
  public func openOperations() -> LedgerContents? {
    guard let ring = openHandle else { return nil }
    return RingReader.readLiveLedger(ring)
  }

  /// Ends an operation: it is no longer open. False when it was not (ended before, or never
  /// recorded).
  @discardableResult
  public func endOperation(_ entry: LedgerEntry) -> Bool {
    // Through the handle even when closed: the entry is freed in whatever memory it is in.
    withExtendedLifetime(self) { entry.end() }
  }

  /// Whether the handle was given to C (`install`, the crash handler): its memory then stays for
  /// the rest of the process, and a LedgerEntry needs nothing to keep it.
  @inlinable package var isPublished: Bool { lifecycle.load(ordering: .relaxed) & Self.publishedBit != 0 }
}
