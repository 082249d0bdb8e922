/// One breadcrumb as a reader decoded it: from a ring slot, or from a report's trail read back
/// (`StoredReport.trailBreadcrumbs()`, the destinations and `ReportDraft`).
public struct Breadcrumb: Sendable, Equatable, Codable {
  /// Unique within its ring: the lane in the high 16 bits, the lane position below.
  public var id: UInt64
  /// The writing thread's sequence number: orders one thread's breadcrumbs exactly.
  public var threadSequence: UInt32
  /// Kernel thread id of the writer.
  public var threadID: UInt32
  /// Wall-clock time, nanoseconds since the Unix epoch (derived from the ring's clock anchors).
  public var wallTimeNanoseconds: UInt64
  /// CLOCK_MONOTONIC time, nanoseconds (same boot as the ring's writer).
  public var monotonicNanoseconds: UInt64
  /// Raw clock ticks as stored (see `crumbs_clock_kind`).
  public var ticks: UInt64
  public var level: BreadcrumbLevel
  public var type: BreadcrumbType
  public var message: String
  /// Key/value pairs in the order they were given.
  public var attributes: [Attribute]
  /// The message is not what was appended: it did not fit its slot and was cut at a character
  /// boundary, or its bytes were not valid UTF-8 and were repaired (U+FFFD).
  public var messageTruncated: Bool
  /// Some attributes were cut, left out, or repaired like the message.
  public var attributesTruncated: Bool
  /// Appended from inside a signal handler.
  public var fromSignalHandler: Bool

  /// One key/value pair.
  public struct Attribute: Sendable, Equatable, Codable {
    public var key: String
    public var value: String
    public init(key: String, value: String) {
      self.key = key
      self.value = value
    }
  }

  /// Whether any part was cut or repaired.
  public var truncated: Bool { messageTruncated || attributesTruncated }

  /// A breadcrumb with every field given: what a reader decoded (a ring slot, a trail's line),
  /// or one an app puts into a report's trail (`ReportDraft`).
  public init(
    id: UInt64, threadSequence: UInt32, threadID: UInt32, wallTimeNanoseconds: UInt64,
    monotonicNanoseconds: UInt64, ticks: UInt64, level: BreadcrumbLevel, type: BreadcrumbType,
    message: String,
    attributes: [Attribute], messageTruncated: Bool, attributesTruncated: Bool, fromSignalHandler: Bool
  ) {
    self.id = id
    self.threadSequence = threadSequence
    self.threadID = threadID
    self.wallTimeNanoseconds = wallTimeNanoseconds
    self.monotonicNanoseconds = monotonicNanoseconds
    self.ticks = ticks
    self.level = level
    self.type = type
    self.message = message
    self.attributes = attributes
    self.messageTruncated = messageTruncated
    self.attributesTruncated = attributesTruncated
    self.fromSignalHandler = fromSignalHandler
  }
}
