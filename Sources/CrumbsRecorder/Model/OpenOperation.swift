// OpenOperation.swift — what the in-flight ledger says was open: one operation (a request, a
// job), and the ledger as a whole (LedgerContents). Made by LedgerReader from a ring file or
// from the live mapping; carried into reports. Not signal-safe (it allocates).

import CrumbsSignalPath

/// One operation open in the in-flight ledger when it was read (at a death: still running when
/// the process died).
public struct OpenOperation: Sendable, Equatable, Codable {
  /// What the operation is (OpenTelemetry's span kinds, and `job`).
  public enum Kind: String, Sendable, Codable {
    case `internal`, server, consumer, job, unknown

    init(raw: UInt8) {
      switch UInt32(raw) {
      case CRUMBS_LEDGER_KIND_INTERNAL.rawValue: self = .internal
      case CRUMBS_LEDGER_KIND_SERVER.rawValue: self = .server
      case CRUMBS_LEDGER_KIND_CONSUMER.rawValue: self = .consumer
      case CRUMBS_LEDGER_KIND_JOB.rawValue: self = .job
      default: self = .unknown
      }
    }

    var raw: UInt8 {
      switch self {
      case .internal, .unknown: UInt8(CRUMBS_LEDGER_KIND_INTERNAL.rawValue)
      case .server: UInt8(CRUMBS_LEDGER_KIND_SERVER.rawValue)
      case .consumer: UInt8(CRUMBS_LEDGER_KIND_CONSUMER.rawValue)
      case .job: UInt8(CRUMBS_LEDGER_KIND_JOB.rawValue)
      }
    }
  }

  /// The operation's name as last set (e.g. a route, `GET /v1/orders/:id`), repaired where it is
  /// not UTF-8.
  public var name: String
  public var kind: Kind
  /// Its trace id and its own span id, when it was begun with them.
  public var trace: TraceContext?
  /// The span it is a child of (16 lowercase hex digits), when given.
  public var parentSpanID: String?
  public var startWallNanoseconds: UInt64
  public var startMonotonicNanoseconds: UInt64
  /// The thread that began it (a kernel tid).
  public var threadID: UInt32
  public var attributes: [Breadcrumb.Attribute]
  public var nameTruncated: Bool
  /// An attribute was cut or left out.
  public var attributesTruncated: Bool
  /// Its start in the ring's own clock ticks, as the entry holds it (0 when not read from a
  /// ledger): with `threadID`, what tells one open operation from another across reads. The
  /// times above are converted through the ring's latest clock anchor, which moves them by
  /// nanoseconds each time the ring recalibrates. Not coded.
  package var startTicks: UInt64 = 0

  enum CodingKeys: String, CodingKey {
    case name, kind, trace, parentSpanID, startWallNanoseconds, startMonotonicNanoseconds, threadID
    case attributes, nameTruncated, attributesTruncated
  }

  public init(
    name: String, kind: Kind, trace: TraceContext?, parentSpanID: String?, startWallNanoseconds: UInt64,
    startMonotonicNanoseconds: UInt64, threadID: UInt32, attributes: [Breadcrumb.Attribute],
    nameTruncated: Bool = false, attributesTruncated: Bool = false
  ) {
    self.name = name
    self.kind = kind
    self.trace = trace
    self.parentSpanID = parentSpanID
    self.startWallNanoseconds = startWallNanoseconds
    self.startMonotonicNanoseconds = startMonotonicNanoseconds
    self.threadID = threadID
    self.attributes = attributes
    self.nameTruncated = nameTruncated
    self.attributesTruncated = attributesTruncated
  }
}

/// The in-flight ledger of a ring as read: the operations open, oldest first, and what it could
/// not tell.
public struct LedgerContents: Sendable, Equatable, Codable {
  /// Open operations, oldest first.
  public var open: [OpenOperation]
  /// How many operations the ledger holds at once.
  public var capacity: Int
  /// Operations begun while every entry was taken: open at some point, never recorded.
  public var overflow: UInt64
  /// Entries being written when they were read (a writer that died halfway, or, live, one busy
  /// twice in a row): not trusted, only counted.
  public var unreadable: Int
  /// Why nothing was read from a ledger the header names (its own header damaged); nil when it
  /// was read.
  public var damage: String?

  public init(
    open: [OpenOperation] = [], capacity: Int = 0, overflow: UInt64 = 0, unreadable: Int = 0,
    damage: String? = nil
  ) {
    self.open = open
    self.capacity = capacity
    self.overflow = overflow
    self.unreadable = unreadable
    self.damage = damage
  }
}
