// BreadcrumbAttributes.swift — a breadcrumb's key/value pairs, and how an append hands them to C.
//
// Entry points, in call order:
//   BreadcrumbAttributes(dictionaryLiteral:)   what `attributes: ["k": v]` builds at a call site
//   appendBreadcrumb(to:message:…)             the append every Swift entry inlines (BreadcrumbRing
//                                              .append, addBreadcrumb, BreadcrumbTarget.append):
//                                              each string's UTF-8 as pointer and length, then one
//                                              call to crumbs_ring_add_utf8 (C, out of line)
//   appendBreadcrumbSlowly(…)                  the rare rest, out of line: more than `inlineCount`
//                                              pairs, or a string whose bytes are not in Swift's own
//                                              storage
//
// Why it is shaped like this (measured, see Benchmarks/README.md):
//   - The dictionary literal's array is read only at constant indices, and each string only as
//     its two words of bits (StringBits), so in a release build the optimizer removes the array
//     and every copy of the strings in it: no allocation, no retain or release — a run-time value
//     costs what a literal does. What brings them back (each tried): iterating the pairs (even
//     `forEach`), giving the array to a function that is not inlined (even on a path a literal
//     never takes: pairs past `inlineCount` are copied out by index instead), storing the pairs
//     in a struct of four or more `String` fields, or any atomic access between the literal and
//     the reads (so the closed check is in C). A retain and release of a small string cost about
//     7 ns here, a third of the whole append.
//   - The C entry takes lengths, so nothing is measured twice; being out of line, it keeps each
//     call site to a few hundred bytes instead of the whole append (ConsumerCallSites measures it).
//   - A string's UTF-8 comes from its bits: a small string (up to 15 bytes) holds its bytes in
//     its own two words, which sit in a stack tuple during the call; a native or literal string
//     points at its storage. This is the layout the standard library's own inlinable code (for
//     example `utf8.withContiguousStorageIfAvailable`) compiles into every client; any other form
//     (a shared or foreign string) is left to the slow path, which uses public API only. The bits
//     are pinned by `StringBitsTests`.
// Lifetimes: every string stays alive until crumbs_ring_add_utf8 returns (`_fixLifetime` after
// the call), so a temporary built in the literal (`["id": "\(id)"]`) is released only then.
// Not signal-safe (Swift); the signal path appends in C.

import CrumbsSignalPath

/// The attributes of one breadcrumb, written as a dictionary literal at the call site:
/// `ring.append("GET /cart", type: .http, attributes: ["http.route": route, "status": "200"])`.
///
/// Pairs keep their order; keys may repeat. A breadcrumb keeps at most 16 pairs and cuts what does
/// not fit its slot (and is then flagged truncated). Up to `inlineCount` pairs written as a
/// literal cost no allocation and no reference counting, whatever their values; more pairs, or a
/// value made elsewhere and passed in, take a slower path that may allocate.
public struct BreadcrumbAttributes: ExpressibleByDictionaryLiteral, Sendable {
  /// How many pairs the allocation-free path takes.
  @inlinable public static var inlineCount: Int { 8 }

  @usableFromInline let pairs: [(String, String)]

  @inlinable
  public init(dictionaryLiteral elements: (String, String)...) {
    pairs = elements
  }

  /// Attributes from any sequence of pairs (a `KeyValuePairs`, a sorted dictionary…).
  public init(_ pairs: some Sequence<(key: String, value: String)>) {
    self.pairs = pairs.map { ($0.key, $0.value) }
  }

  /// The number of pairs.
  public var count: Int { pairs.count }

  /// The pairs, in order.
  public var elements: [(key: String, value: String)] { pairs.map { (key: $0.0, value: $0.1) } }
}

/// The two words of a `String` on a 64-bit little-endian platform, as the standard library lays
/// them out (stdlib/public/core/StringObject.swift): `countAndFlags` (count in bits 0–47,
/// bit 60 "tail-allocated": the UTF-8 starts 32 bytes after the object's address) and `object`
/// (bit 61 "small": up to 15 bytes stored in the two words themselves, their count in bits
/// 56–59; bit 60 "not fast UTF-8"; bits 0–59 the address).
@usableFromInline @frozen
struct StringBits {
  @usableFromInline var countAndFlags: UInt64
  @usableFromInline var object: UInt64

  /// The bits of `string`: a trivial copy that owns nothing (the string must outlive their use).
  @inlinable @inline(__always)
  init(_ string: String) {
    #if _pointerBitWidth(_64) && _endian(little)
      self = unsafeBitCast(string, to: StringBits.self)
    #else
      self.init()  // never decodable: every append takes the slow path
    #endif
  }

  /// The empty small string's bits.
  @inlinable @inline(__always)
  init() {
    countAndFlags = 0
    object = 0xE000_0000_0000_0000
  }

  /// All zero: what fills the unused entries of the append's tuple, never read (zero, so the
  /// fill is a few vector stores).
  @inlinable @inline(__always)
  static var unused: StringBits {
    var bits = StringBits()
    bits.object = 0
    return bits
  }

  /// Whether the bytes can be found from the bits alone: a small string, or a tail-allocated one
  /// (native or literal) with fast UTF-8.
  @inlinable @inline(__always)
  var isDecodable: Bool {
    #if _pointerBitWidth(_64) && _endian(little)
      return object & (1 << 61) != 0
        || (countAndFlags & (1 << 60) != 0 && object & (1 << 60) == 0)
    #else
      return false
    #endif
  }
}

extension UnsafePointer where Pointee == StringBits {
  /// The UTF-8 bytes of the string whose bits are stored here; `decodable` becomes false (and the
  /// result is meaningless) when the bits do not say where they are. A small string's bytes are
  /// these very words, so the pointer is valid as long as this memory is.
  @inlinable @inline(__always)
  func utf8(_ decodable: inout Bool) -> (bytes: UnsafePointer<CChar>?, count: Int) {
    let bits = pointee
    decodable = decodable && bits.isDecodable
    if bits.object & (1 << 61) != 0 {
      let small = UnsafeRawPointer(self).assumingMemoryBound(to: CChar.self)
      return (bytes: small, count: Int(truncatingIfNeeded: (bits.object >> 56) & 0xF))
    }
    let address = UInt(truncatingIfNeeded: bits.object & 0x0FFF_FFFF_FFFF_FFFF) &+ 32
    let stored = UnsafePointer<CChar>(bitPattern: address)
    return (bytes: stored, count: Int(truncatingIfNeeded: bits.countAndFlags & 0xFFFF_FFFF_FFFF))
  }

  /// The pair whose key's bits are here and value's next.
  @inlinable @inline(__always)
  func utf8Attribute(_ decodable: inout Bool) -> crumbs_utf8_attribute {
    let key = utf8(&decodable)
    let value = (self + 1).utf8(&decodable)
    return crumbs_utf8_attribute(
      key: key.bytes, key_length: key.count, value: value.bytes, value_length: value.count)
  }
}

/// Appends one breadcrumb to `ring`, or with nil to the process-wide ring (looked up in C, as a
/// closed ring's flag is checked there: an atomic access here, between the literal's array and
/// its reads, would keep the optimizer from removing the array). The shared body of every Swift
/// append. Lock-free, no allocation and no reference counting for up to
/// `BreadcrumbAttributes.inlineCount` pairs of native strings (see the design comment of
/// BreadcrumbAttributes.swift).
@inlinable @inline(__always)
package func appendBreadcrumb(
  to ring: UnsafePointer<crumbs_ring>?, message: String, level: BreadcrumbLevel, type: BreadcrumbType,
  attributes: BreadcrumbAttributes
) {
  let pairs = attributes.pairs
  let count = pairs.count
  // Up to two pairs (most call sites): tuples sized for two, filled without a zero first. Every
  // byte of a tuple handed to C is stored on every call, so the eight-pair shape below costs a
  // call with two pairs 28 more stores (zeros: the unused bits and spans), about as many as the C
  // append's own; these CPUs retire one store a cycle. With a literal the count is a constant and
  // only one of the two shapes stays in the call site.
  if count <= 2 {
    var strings = (
      StringBits(message),
      count > 0 ? StringBits(pairs[0].0) : .unused, count > 0 ? StringBits(pairs[0].1) : .unused,
      count > 1 ? StringBits(pairs[1].0) : .unused, count > 1 ? StringBits(pairs[1].1) : .unused
    )
    withUnsafePointer(to: &strings) { tuple in
      let bits = UnsafeRawPointer(tuple).assumingMemoryBound(to: StringBits.self)
      var decodable = true
      let text = bits.utf8(&decodable)
      let empty = crumbs_utf8_attribute()
      var spans = (
        count > 0 ? (bits + 1).utf8Attribute(&decodable) : empty,
        count > 1 ? (bits + 3).utf8Attribute(&decodable) : empty
      )
      guard decodable else {
        appendBreadcrumbSlowly(to: ring, strings: bits, count: count, rest: [], level: level, type: type)
        return
      }
      withUnsafePointer(to: &spans) { spans in
        addUTF8(
          to: ring, level, type, text,
          UnsafeRawPointer(spans).assumingMemoryBound(to: crumbs_utf8_attribute.self), count)
      }
    }
    _fixLifetime(attributes)
    _fixLifetime(message)
    return
  }
  // Message, then key and value of each pair; the unused tail is zeros, never read. Written out
  // for each index: constant indices are what lets the optimizer drop the literal's array.
  var strings = (
    StringBits(message),
    count > 0 ? StringBits(pairs[0].0) : .unused, count > 0 ? StringBits(pairs[0].1) : .unused,
    count > 1 ? StringBits(pairs[1].0) : .unused, count > 1 ? StringBits(pairs[1].1) : .unused,
    count > 2 ? StringBits(pairs[2].0) : .unused, count > 2 ? StringBits(pairs[2].1) : .unused,
    count > 3 ? StringBits(pairs[3].0) : .unused, count > 3 ? StringBits(pairs[3].1) : .unused,
    count > 4 ? StringBits(pairs[4].0) : .unused, count > 4 ? StringBits(pairs[4].1) : .unused,
    count > 5 ? StringBits(pairs[5].0) : .unused, count > 5 ? StringBits(pairs[5].1) : .unused,
    count > 6 ? StringBits(pairs[6].0) : .unused, count > 6 ? StringBits(pairs[6].1) : .unused,
    count > 7 ? StringBits(pairs[7].0) : .unused, count > 7 ? StringBits(pairs[7].1) : .unused
  )
  withUnsafePointer(to: &strings) { tuple in
    let bits = UnsafeRawPointer(tuple).assumingMemoryBound(to: StringBits.self)
    var decodable = true
    let text = bits.utf8(&decodable)
    let empty = crumbs_utf8_attribute()
    var spans = (empty, empty, empty, empty, empty, empty, empty, empty)
    if count > 0 { spans.0 = (bits + 1).utf8Attribute(&decodable) }
    if count > 1 { spans.1 = (bits + 3).utf8Attribute(&decodable) }
    if count > 2 { spans.2 = (bits + 5).utf8Attribute(&decodable) }
    if count > 3 { spans.3 = (bits + 7).utf8Attribute(&decodable) }
    if count > 4 { spans.4 = (bits + 9).utf8Attribute(&decodable) }
    if count > 5 { spans.5 = (bits + 11).utf8Attribute(&decodable) }
    if count > 6 { spans.6 = (bits + 13).utf8Attribute(&decodable) }
    if count > 7 { spans.7 = (bits + 15).utf8Attribute(&decodable) }
    guard decodable && count <= BreadcrumbAttributes.inlineCount else {
      // Pairs past the inline ones are copied out by index: the literal's array stays local.
      var rest: [(String, String)] = []
      var index = BreadcrumbAttributes.inlineCount
      while index < count {
        rest.append(pairs[index])
        index += 1
      }
      appendBreadcrumbSlowly(
        to: ring, strings: bits, count: min(count, BreadcrumbAttributes.inlineCount), rest: rest,
        level: level, type: type)
      return
    }
    withUnsafePointer(to: &spans) { spans in
      addUTF8(
        to: ring, level, type, text,
        UnsafeRawPointer(spans).assumingMemoryBound(to: crumbs_utf8_attribute.self), count)
    }
  }
  _fixLifetime(attributes)
  _fixLifetime(message)
}

/// One call into C: to `ring`, or to the installed ring for nil.
@inlinable @inline(__always)
func addUTF8(
  to ring: UnsafePointer<crumbs_ring>?, _ level: BreadcrumbLevel, _ type: BreadcrumbType,
  _ message: (bytes: UnsafePointer<CChar>?, count: Int), _ attributes: UnsafePointer<crumbs_utf8_attribute>,
  _ count: Int
) {
  if let ring {
    _ = crumbs_ring_add_utf8(
      ring, level.rawValue, type.rawValue, 0, message.bytes, message.count, attributes, count)
  } else {
    _ = crumbs_add_breadcrumb_utf8(
      level.rawValue, type.rawValue, message.bytes, message.count, attributes, count)
  }
}

/// The append for what the inline path leaves: strings given as the bits it laid out (message,
/// then `count` key/value pairs) of which at least one is not decodable.
@usableFromInline @inline(never)
func appendBreadcrumbSlowly(
  to ring: UnsafePointer<crumbs_ring>?, strings: UnsafePointer<StringBits>, count: Int,
  rest: [(String, String)], level: BreadcrumbLevel, type: BreadcrumbType
) {
  // Balanced: a String made from bits is borrowed and copied by the compiler where it needs one.
  let message = unsafeBitCast(strings[0], to: String.self)
  let pairs =
    (0..<count).map {
      (
        unsafeBitCast(strings[1 + 2 * $0], to: String.self),
        unsafeBitCast(strings[2 + 2 * $0], to: String.self)
      )
    } + rest
  appendBreadcrumbSlowly(to: ring, message: message, level: level, type: type, attributes: pairs)
}

/// The general append: any number of pairs, any kind of string. A string whose bytes the bits do
/// not locate is copied into a native one first. Allocates.
@usableFromInline @inline(never)
func appendBreadcrumbSlowly(
  to ring: UnsafePointer<crumbs_ring>?, message: String, level: BreadcrumbLevel, type: BreadcrumbType,
  attributes: [(String, String)]
) {
  // One more pair than a slot keeps, so the breadcrumb is flagged as cut.
  let used = min(attributes.count, Int(CRUMBS_MAX_ATTRIBUTES) + 1)
  var strings = [message]
  strings.reserveCapacity(1 + 2 * used)
  for (key, value) in attributes.prefix(used) {
    strings.append(key)
    strings.append(value)
  }
  for index in strings.indices where !StringBits(strings[index]).isDecodable {
    strings[index] = String(decoding: Array(strings[index].utf8), as: UTF8.self)
  }
  strings.withUnsafeBufferPointer { buffer in
    let bits = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: StringBits.self)
    var decodable = true
    let text = bits.utf8(&decodable)
    let spans = (0..<used).map { (bits + 1 + 2 * $0).utf8Attribute(&decodable) }
    // Native copies always decode, except where the bits cannot be read at all (not a 64-bit
    // little-endian platform): there, through public API, one string at a time is all it takes.
    guard decodable else {
      appendPortably(to: ring, strings: Array(buffer), level: level, type: type)
      return
    }
    addUTF8(to: ring, level, type, text, spans, used)
  }
}

/// The append without reading any string's bits: composes the slot one string at a time.
func appendPortably(
  to ring: UnsafePointer<crumbs_ring>?, strings: [String], level: BreadcrumbLevel, type: BreadcrumbType
) {
  guard let ring = ring ?? crumbs_installed_ring() else { return }
  var writer = crumbs_slot_writer()
  guard crumbs_ring_begin(ring, level.rawValue, type.rawValue, 0, &writer) else { return }
  var attributeBytes = 0
  for index in stride(from: 1, to: strings.count, by: 2) {
    attributeBytes += 2 + strings[index].utf8.count + strings[index + 1].utf8.count
  }
  withUTF8Bytes(of: strings[0]) { crumbs_slot_put_message(&writer, $0, $1, attributeBytes) }
  for index in stride(from: 1, to: strings.count, by: 2) {
    withUTF8Bytes(of: strings[index]) { key, keyCount in
      withUTF8Bytes(of: strings[index + 1]) { value, valueCount in
        crumbs_slot_put_attribute(&writer, key, keyCount, value, valueCount)
      }
    }
  }
  crumbs_ring_commit(&writer)
}
