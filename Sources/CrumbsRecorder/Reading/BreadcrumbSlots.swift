// BreadcrumbSlots.swift — a ring's breadcrumbs as a reader decodes them: each breadcrumb's
// fixed fields in a trivial entry, and its text (message, keys, values) as UTF-8 in one shared
// byte buffer, each a span of it. `Breadcrumb`s, with their Swift strings, are made from it only
// where they are handed out (`RingContents.breadcrumbs`, `breadcrumb(at:)`).
//
// Why: making a String for every message, key and value of a full ring (an allocation for each
// text over 15 bytes, an array for each breadcrumb's attributes, and their release later) was
// about a third of a ring read, and the report path needs none of them: redaction
// (Redaction.swift, `Redactor.contents`) and the trail's JSON Lines (BreadcrumbJSON.swift) work
// on the bytes in place.
//
// Entry points, in call order:
//   SlotDecoder.decode(_:position:lane:version:into:)   a slot's payload appended (RingReader)
//   sortByTime()                                        oldest to newest
//   breadcrumb(at:), breadcrumbs                        Breadcrumbs, for what hands them out
//   withText(_:_:), append(_:)                          the bytes of one span; a replaced text
//                                                       appended (the redactor then points the
//                                                       entry at it)
//
// The bytes are always valid UTF-8: a slot's text that is not is stored as `String(decoding:)`
// repairs it (U+FFFD), so a Breadcrumb made from a span holds exactly these bytes, and the JSON
// written from them is the one written from the Breadcrumb. Not signal-safe.

/// A ring's breadcrumbs, their text kept as bytes (see the file's comment).
package struct BreadcrumbSlots: Sendable {
  /// Where one text is in `bytes`.
  package struct Span: Sendable, Equatable {
    package var start: Int
    package var count: Int

    package init(start: Int, count: Int) {
      self.start = start
      self.count = count
    }
  }

  /// One breadcrumb's fields, its text as spans: a trivial value (no reference counting).
  package struct Entry: Sendable {
    package var id: UInt64
    package var ticks: UInt64
    package var wallTimeNanoseconds: UInt64 = 0
    package var monotonicNanoseconds: UInt64 = 0
    package var threadSequence: UInt32
    package var threadID: UInt32
    package var level: BreadcrumbLevel
    package var type: BreadcrumbType
    package var messageTruncated: Bool
    package var attributesTruncated: Bool
    package var fromSignalHandler: Bool
    package var message: Span
    /// Its attributes' key and value spans are `attributeSpans[firstAttribute * 2 ..< (firstAttribute
    /// + attributeCount) * 2]`, key first.
    package var firstAttribute: Int
    package var attributeCount: Int

    package var truncated: Bool { messageTruncated || attributesTruncated }
  }

  /// Every text, UTF-8: as read, each slot's payload from its message on (the attributes'
  /// length bytes between the texts, unused), and any repaired or redacted text after.
  package var bytes: [UInt8] = []
  /// Keys and values, two per attribute, entry after entry.
  package var attributeSpans: [Span] = []
  /// Oldest to newest once sorted.
  package var entries: [Entry] = []

  package init() {}

  /// Room for `count` breadcrumbs holding up to `textBytes` bytes of text in all.
  package init(reservingCapacity count: Int, textBytes: Int) {
    bytes.reserveCapacity(textBytes)
    entries.reserveCapacity(count)
    attributeSpans.reserveCapacity(count * 2)
  }

  /// `breadcrumbs`, their strings' bytes copied.
  package init(_ breadcrumbs: [Breadcrumb]) {
    entries.reserveCapacity(breadcrumbs.count)
    for breadcrumb in breadcrumbs {
      let message = append(breadcrumb.message)
      let first = attributeSpans.count / 2
      for attribute in breadcrumb.attributes {
        attributeSpans.append(append(attribute.key))
        attributeSpans.append(append(attribute.value))
      }
      entries.append(
        Entry(
          id: breadcrumb.id, ticks: breadcrumb.ticks, wallTimeNanoseconds: breadcrumb.wallTimeNanoseconds,
          monotonicNanoseconds: breadcrumb.monotonicNanoseconds, threadSequence: breadcrumb.threadSequence,
          threadID: breadcrumb.threadID, level: breadcrumb.level, type: breadcrumb.type,
          messageTruncated: breadcrumb.messageTruncated, attributesTruncated: breadcrumb.attributesTruncated,
          fromSignalHandler: breadcrumb.fromSignalHandler, message: message, firstAttribute: first,
          attributeCount: breadcrumb.attributes.count))
    }
  }

  package var count: Int { entries.count }
  package var isEmpty: Bool { entries.isEmpty }

  /// Appends `string`'s UTF-8 and returns where it is.
  package mutating func append(_ string: String) -> Span {
    let start = bytes.count
    bytes.append(contentsOf: string.utf8)
    return Span(start: start, count: bytes.count - start)
  }

  /// Appends `text` (valid UTF-8) and returns where it is.
  package mutating func append(_ text: UnsafeBufferPointer<UInt8>) -> Span {
    let start = bytes.count
    bytes.append(contentsOf: text)
    return Span(start: start, count: text.count)
  }

  /// The key span of entry `entry`'s attribute `index`; its value's is the next.
  package func keySpan(_ entry: Entry, _ index: Int) -> Int { (entry.firstAttribute + index) * 2 }

  /// Calls `body` with the bytes of `span`.
  package func withText<R>(_ span: Span, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
    try bytes.withUnsafeBufferPointer { all in
      try body(UnsafeBufferPointer(rebasing: all[span.start..<span.start + span.count]))
    }
  }

  /// The text of `span` as a String.
  package func string(_ span: Span) -> String {
    withText(span) { String(decoding: $0, as: UTF8.self) }
  }

  /// The value of entry `entry`'s first attribute whose key is `key`, as a String.
  package func value(_ entry: Entry, key: String) -> String? {
    var key = key
    return key.withUTF8 { wanted in
      for index in 0..<entry.attributeCount {
        let spanIndex = keySpan(entry, index)
        if withText(attributeSpans[spanIndex], { $0.elementsEqual(wanted) }) {
          return string(attributeSpans[spanIndex + 1])
        }
      }
      return nil
    }
  }

  /// The breadcrumb of entry `index`, its strings made from the bytes.
  package func breadcrumb(at index: Int) -> Breadcrumb {
    let entry = entries[index]
    var attributes: [Breadcrumb.Attribute] = []
    attributes.reserveCapacity(entry.attributeCount)
    for attribute in 0..<entry.attributeCount {
      let spanIndex = keySpan(entry, attribute)
      attributes.append(
        .init(key: string(attributeSpans[spanIndex]), value: string(attributeSpans[spanIndex + 1])))
    }
    return Breadcrumb(
      id: entry.id, threadSequence: entry.threadSequence, threadID: entry.threadID,
      wallTimeNanoseconds: entry.wallTimeNanoseconds, monotonicNanoseconds: entry.monotonicNanoseconds,
      ticks: entry.ticks, level: entry.level, type: entry.type, message: string(entry.message),
      attributes: attributes, messageTruncated: entry.messageTruncated,
      attributesTruncated: entry.attributesTruncated, fromSignalHandler: entry.fromSignalHandler)
  }

  /// Every breadcrumb, in order.
  package var breadcrumbs: [Breadcrumb] { entries.indices.map(breadcrumb(at:)) }

  /// Entries in time order: ticks, then thread and its sequence (then the order decoded).
  package mutating func sortByTime() {
    // Small keys sorted, then the entries gathered once: sorting the entries themselves (about
    // 100 bytes each) moved each of them many times, a quarter of a ring read.
    var keys = entries.withUnsafeBufferPointer { entries in
      entries.indices.map { index in
        (
          ticks: entries[index].ticks, thread: entries[index].threadID,
          sequence: entries[index].threadSequence, index: index
        )
      }
    }
    keys.sort { lhs, rhs in
      if lhs.ticks != rhs.ticks { return lhs.ticks < rhs.ticks }
      if lhs.thread != rhs.thread { return lhs.thread < rhs.thread }
      if lhs.sequence != rhs.sequence { return lhs.sequence < rhs.sequence }
      return lhs.index < rhs.index
    }
    if keys.enumerated().allSatisfy({ $0.offset == $0.element.index }) { return }
    entries = entries.withUnsafeBufferPointer { entries in keys.map { entries[$0.index] } }
  }
}
