import CrumbsSignalPath

/// How severe a breadcrumb is. Raw values are the C `crumbs_level` values stored in ring slots.
///
/// `warning` and above are kept in a reserved part of the ring, so a flood of `debug` and `info`
/// never evicts the last important breadcrumbs.
public enum BreadcrumbLevel: UInt8, Sendable, CaseIterable, Comparable, Codable {
  case debug = 0
  case info = 1
  case warning = 2
  case error = 3
  case fatal = 4

  public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

  /// The lowercase name used in JSON and on the command line.
  public var name: String { staticName.description }

  /// `name` as a literal (ASCII, nothing to escape in JSON), for writers of raw bytes.
  package var staticName: StaticString {
    switch self {
    case .debug: "debug"
    case .info: "info"
    case .warning: "warning"
    case .error: "error"
    case .fatal: "fatal"
    }
  }

  /// Parses `name`.
  public init?(name: String) {
    guard let level = Self.allCases.first(where: { $0.name == name }) else { return nil }
    self = level
  }

  /// The C value, for code that talks to the signal path.
  static func cValue(_ level: crumbs_level) -> UInt8 { UInt8(level.rawValue) }
}

/// What a breadcrumb is about. Raw values are the C `crumbs_type` values stored in ring slots.
public enum BreadcrumbType: UInt8, Sendable, CaseIterable, Codable {
  case manual = 0
  case log = 1
  case navigation = 2
  case http = 3
  case system = 4
  case user = 5
  case configuration = 6

  /// The lowercase name used in JSON and on the command line.
  public var name: String { staticName.description }

  /// `name` as a literal (ASCII, nothing to escape in JSON), for writers of raw bytes.
  package var staticName: StaticString {
    switch self {
    case .manual: "manual"
    case .log: "log"
    case .navigation: "navigation"
    case .http: "http"
    case .system: "system"
    case .user: "user"
    case .configuration: "configuration"
    }
  }

  /// Parses `name`.
  public init?(name: String) {
    guard let type = Self.allCases.first(where: { $0.name == name }) else { return nil }
    self = type
  }
}
