// SystemCallError.swift — the error every wrapper in Syscalls+*.swift throws.

import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A failed system call — which call, on what, and the errno it left — or a call that worked
/// but whose result Crumbs refused (too large, not a regular file): then `errno` is nil and
/// `refusal` says why. No errno is ever made up.
public struct SystemCallError: Error, CustomStringConvertible, Equatable {
  /// Why a call that succeeded did not give what was needed.
  public enum Refusal: Sendable, Equatable, CustomStringConvertible {
    /// More bytes than the caller's limit.
    case tooLarge(limit: Int)
    /// Not a regular file (a FIFO, a device, a directory…): never read, it could block or lie.
    case notARegularFile
    /// A symbolic link where a file or folder of Crumbs' own should be: never followed, it could
    /// lead anywhere outside the Crumbs directory.
    case symbolicLink
    /// Anything else, in words.
    case other(String)

    public var description: String {
      switch self {
      case .tooLarge(let limit): "larger than the limit of \(limit) bytes"
      case .notARegularFile: "not a regular file"
      case .symbolicLink: "a symbolic link (never followed)"
      case .other(let text): text
      }
    }
  }

  /// The call that failed, e.g. `"open"`.
  public var call: String
  /// The path it worked on, when it had one.
  public var path: String?
  /// What errno said; nil when the call succeeded and its result was refused.
  public var errno: Errno?
  /// Why the result of a successful call was refused; nil when errno says what failed.
  public var refusal: Refusal?

  package init(call: String, path: String? = nil, errno: Errno) {
    self.call = call
    self.path = path
    self.errno = errno
  }

  package init(call: String, path: String? = nil, refusal: Refusal) {
    self.call = call
    self.path = path
    self.refusal = refusal
  }

  /// What went wrong, without the call and path: the errno's text or the refusal.
  public var cause: String { refusal?.description ?? errno.map { "\($0)" } ?? "unknown" }

  public var description: String {
    if let path { return "\(call)(\(path)): \(cause)" }
    return "\(call): \(cause)"
  }
}
