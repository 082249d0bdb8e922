// CrumbsDirectory+Consent.swift — the directory's record of consent, read by whoever delivers
// from it (CrumbsDirectory.delivery): the client (CrumbsClient+Hooks) and `crumbs collect`,
// which cannot ask the app's handler (docs/collector.md).
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

extension CrumbsDirectory {
  /// What the directory says about consent (the `consent` file).
  package enum Consent: Equatable, Sendable {
    /// No consent handler was ever configured for this directory.
    case notRequired
    /// A handler is (or was) configured, and the user gave no standing consent.
    case required
    /// The user answered `.always`.
    case granted
  }

  /// The directory's consent; an unreadable or unknown file counts as `required` (the safe
  /// side).
  package var consent: Consent {
    let file = path(.consent)
    guard Syscall.fileExists(file) else { return .notRequired }
    guard let bytes = try? Syscall.readFile(file, limit: 64) else { return .required }
    return String(decoding: bytes, as: UTF8.self) == "always\n" ? .granted : .required
  }

  /// Records that a consent handler is configured, unless the user already consented for good.
  package func markConsentRequired() throws(SystemCallError) {
    guard consent != .granted else { return }
    try Syscall.writeFileAtomically(path(.consent), Array("required\n".utf8))
  }

  /// Records standing consent (`.always`).
  package func grantConsent() throws(SystemCallError) {
    try Syscall.writeFileAtomically(path(.consent), Array("always\n".utf8))
  }
}
