// ConsentFile.swift — the directory's record of consent, read by whoever delivers from it: the
// client (CrumbsClient+Hooks) and `crumbs collect`, which cannot ask the app's handler
// (docs/collector.md).
//
// The `consent` file holds one line:
//   (no file)      no consent handler was ever configured here: reports may leave
//   "required\n"   a client with a consent handler ran here and no standing consent was given:
//                  only that client, asking its handler, sends; the collector sends nothing
//   "always\n"     the user answered `.always`: everything may leave, from either
// `required` is written when a handler is configured (at start) or set; it is never written
// over `always`. A handler removed later (`setConsentHandler(nil)`) leaves the file as it is:
// data gathered under a consent regime stays under it until the user consents.
// Not signal-safe.

import CrumbsPlatform

/// What a Crumbs directory says about consent (the `consent` file).
package enum ConsentFile {
  package enum State: Equatable, Sendable {
    /// No consent handler was ever configured for this directory.
    case notRequired
    /// A handler is (or was) configured, and the user gave no standing consent.
    case required
    /// The user answered `.always`.
    case granted
  }

  package static func path(_ directory: String) -> String { directory + "/consent" }

  /// The directory's state; an unreadable or unknown file counts as `required` (the safe side).
  package static func state(_ directory: String) -> State {
    guard Syscall.fileExists(path(directory)) else { return .notRequired }
    guard let bytes = try? Syscall.readFile(path(directory), limit: 64) else { return .required }
    return String(decoding: bytes, as: UTF8.self) == "always\n" ? .granted : .required
  }

  /// Records that a consent handler is configured, unless the user already consented for good.
  package static func markRequired(_ directory: String) throws(SystemCallError) {
    guard state(directory) != .granted else { return }
    try Syscall.writeFileAtomically(path(directory), Array("required\n".utf8))
  }

  /// Records standing consent (`.always`).
  package static func grant(_ directory: String) throws(SystemCallError) {
    try Syscall.writeFileAtomically(path(directory), Array("always\n".utf8))
  }
}
