// BreadcrumbTarget.swift — where automatic producers (memory pressure, lifecycle, swift-log) write.
//
// Entry points, in call order:
//   BreadcrumbTarget.installedRing / .ring(_:)   pick the process-wide ring or a given one
//   BreadcrumbTarget.append(...)                 one breadcrumb with key/value pairs
//   BreadcrumbTarget.compose(...)                one breadcrumb whose attributes are written one by
//                                                one by the caller (no array, no dictionary): the
//                                                allocation-free path of the swift-log handler
//   BreadcrumbTarget.markMemoryWarning()         the session's "memory warning received" flag
//
// The appends are the ring's own lock-free, allocation-free append (crumbs_ring_append.h).
// Not for signal handlers (Swift); the signal path appends in C.

import CrumbsSignalPath

/// Where a producer of breadcrumbs writes: the process-wide ring (`BreadcrumbRing.install`),
/// looked up at each append, or one given ring.
public struct BreadcrumbTarget: Sendable {
  @usableFromInline let ring: BreadcrumbRing?

  /// The ring installed at the time of each append; appends are dropped while none is.
  public static var installedRing: BreadcrumbTarget { BreadcrumbTarget(ring: nil) }

  /// A given ring, whether or not it is installed; appends are dropped once it is closed.
  public static func ring(_ ring: BreadcrumbRing) -> BreadcrumbTarget { BreadcrumbTarget(ring: ring) }

  @usableFromInline init(ring: BreadcrumbRing?) { self.ring = ring }

  /// Appends one breadcrumb (see `BreadcrumbRing.append`). Lock-free, no allocation for native
  /// strings.
  @inlinable
  public func append(
    _ message: String, level: BreadcrumbLevel, type: BreadcrumbType,
    attributes: BreadcrumbAttributes = [:]
  ) {
    // nil: the installed ring, looked up in C (see appendBreadcrumb).
    appendBreadcrumb(
      to: ring.map { UnsafePointer($0.handle) }, message: message, level: level, type: type,
      attributes: attributes)
    _fixLifetime(ring)
  }

  /// Whether a breadcrumb of `level` and `type` would be kept now (a ring is there and its
  /// filters pass it). Lets a producer skip formatting what would be dropped.
  @inlinable
  public func accepts(level: BreadcrumbLevel, type: BreadcrumbType) -> Bool {
    guard let handle = cRing else { return false }
    defer { withExtendedLifetime(ring) {} }
    return crumbs_ring_accepts(handle, level.rawValue, type.rawValue)
  }

  /// Appends one breadcrumb whose attributes `body` adds one at a time. `attributeBytes` is
  /// about what they will need (2 + key + value bytes each): the message leaves them room up to
  /// half the slot. Returns false (and does not call `body`) when no ring takes it.
  /// Lock-free, no allocation of its own.
  @inlinable
  @discardableResult
  public func compose(
    _ message: String, level: BreadcrumbLevel, type: BreadcrumbType, attributeBytes: Int,
    _ body: (inout BreadcrumbAttributeWriter) -> Void
  ) -> Bool {
    guard let handle = cRing else { return false }
    defer { withExtendedLifetime(ring) {} }
    var writer = BreadcrumbAttributeWriter()
    guard crumbs_ring_begin(handle, level.rawValue, type.rawValue, 0, &writer.slot) else {
      return false
    }
    withUTF8Bytes(of: message) { bytes, count in
      crumbs_slot_put_message(&writer.slot, bytes, count, max(0, attributeBytes))
    }
    body(&writer)
    crumbs_ring_commit(&writer.slot)
    return true
  }

  /// Sets the session's "memory warning received" flag in the target ring's header.
  public func markMemoryWarning() {
    guard let handle = cRing else { return }
    defer { withExtendedLifetime(ring) {} }
    crumbs_ring_set_session_flags(handle, UInt32(CRUMBS_SESSION_MEMORY_WARNING))
  }

  /// The ring's handle, nil when it is closed or none is installed. Callers keep `ring` alive
  /// while they use it.
  @usableFromInline var cRing: UnsafePointer<crumbs_ring>? {
    if let ring { return ring.openHandle }
    return crumbs_installed_ring()
  }
}

/// Adds attributes to a breadcrumb being composed (`BreadcrumbTarget.compose`). At most 16
/// attributes; what does not fit the slot is cut and the breadcrumb flagged.
public struct BreadcrumbAttributeWriter {
  @usableFromInline var slot = crumbs_slot_writer()

  @usableFromInline init() {}

  /// Adds one key/value pair. No allocation for native strings.
  @inlinable
  public mutating func add(_ key: String, _ value: String) {
    withUTF8Bytes(of: key) { keyBytes, keyCount in
      withUTF8Bytes(of: value) { valueBytes, valueCount in
        crumbs_slot_put_attribute(&slot, keyBytes, keyCount, valueBytes, valueCount)
      }
    }
  }

  /// Adds one pair from raw UTF-8 bytes.
  @inlinable
  public mutating func add(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
    crumbs_slot_put_attribute(&slot, key.baseAddress, key.count, value.baseAddress, value.count)
  }
}
