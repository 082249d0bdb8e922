// SessionMetadata.swift — what a session said about itself while it ran, kept next to its ring
// as `rings/<session>.session.json` (RingDirectory.sessionFilePath(forRing:)), so that the next
// launch reports the session's crash or abnormal end with that session's release, attributes
// and attachments, not its own, can say when another handler had taken a crash signal, and
// redacts the report with the session's own redaction rules (Redaction.swift).
//
// Entry points, in call order:
//   SessionMetadata(sessionID:appVersion:)   what the client knows at start
//   encoded()                                the file's bytes: JSON, at most `maxFileSize` (what
//                                            does not fit is left out and counted in `omitted`)
//   [CrumbsClient writes them with Syscall.writeFileAtomically each time a field changes: at
//    start, setAttribute, add/removeAttachment, when it finds a crash signal's handler
//    replaced, and once the background work has measured the session's resource]
//   SessionMetadata.read(file:)              the next launch (PostMortemProcessor)
//
// Written by ordinary code only, never in a signal handler: a crash leaves the last complete
// file. Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder
import FoundationEssentials

#if canImport(Glibc)
  import Glibc
#endif

/// The persisted metadata of one session.
package struct SessionMetadata: Decodable, Sendable, Equatable {
  /// The format this code writes; a file with a larger number is not read.
  package static let currentFormat = 1
  /// The largest file written or read.
  package static let maxFileSize = 64 * 1024

  package var format = SessionMetadata.currentFormat
  package var sessionID: String
  /// `service.version` of the session.
  package var appVersion: String?
  /// The app's attributes (`setAttribute`, `setUser`) as last set, typed (AttributeValue: its
  /// JSON keeps 4.0 a double; files from before typed attributes hold strings).
  package var attributes: [String: AttributeValue] = [:]
  /// Paths of the files attached to every report (`addAttachment(path:)`), as last set.
  package var attachments: [String] = []
  /// Crash signals whose handler another handler had replaced when last checked (names, e.g.
  /// `SIGSEGV`): a crash on one of them leaves no crash record.
  package var replacedCrashSignals: [String] = []
  /// Attributes and attachments left out of the file to keep it under `maxFileSize`.
  package var omitted = 0
  /// The session's OTel resource as measured while it ran (the machine's facts, the parent
  /// process, the executable's build ID, the OTEL_* environment's attributes): a crash is
  /// reported with these, not with what the reading launch would measure. Nil until the
  /// background work recorded them (and in files written before this field existed).
  package var resource: [String: String]?
  /// The session's redaction rules (`CrumbsConfiguration.redaction`): whoever processes its end
  /// (the next launch, `crumbs collect`) redacts its report with them. Nil in files written
  /// before this field existed: the processor's own rules then apply.
  package var redaction: Redaction?
  /// Pool seats the hang watchdog found blocked in a system call past its threshold during the
  /// session (each block once); nil while none was.
  package var blockedPoolSeats: Int? = nil

  package init(sessionID: SessionID, appVersion: String?, redaction: Redaction? = nil) {
    self.sessionID = sessionID.description
    self.appVersion = appVersion
    self.redaction = redaction
  }

  /// The JSON bytes of the file, at most `maxFileSize`: attributes (by key) and attachments are
  /// kept while they fit, and the rest is counted in `omitted` (an app version of tens of
  /// kilobytes alone would not fit, and the reader would call the file damaged). Written by
  /// hand with `jsonQuoted`: this runs on the caller's thread of `start` and `setAttribute`,
  /// where JSONEncoder's tens of microseconds would be most of the cost.
  package func encoded() -> [UInt8] {
    var head = "{\"format\":\(format),\"sessionID\":" + jsonQuoted(sessionID)
    if let appVersion { head += ",\"appVersion\":" + jsonQuoted(appVersion) }
    if let blockedPoolSeats { head += ",\"blockedPoolSeats\":\(blockedPoolSeats)" }
    head += ",\"replacedCrashSignals\":[" + Self.commaSeparated(replacedCrashSignals.map(jsonQuoted)) + "]"
    if let redaction {
      head +=
        ",\"redaction\":{\"keys\":[" + Self.commaSeparated(redaction.keys.map(jsonQuoted))
        + "],\"valuePatterns\":[" + Self.commaSeparated(redaction.valuePatterns.map(jsonQuoted))
        + "],\"shortensHomeDirectories\":\(redaction.shortensHomeDirectories)"
        + ",\"redactsURLCredentials\":\(redaction.redactsURLCredentials)}"
    }
    var resourceOmitted = 0
    if let resource {
      // The machine's facts are well under a kilobyte; an environment's attributes could be
      // anything, so the resource takes at most half the file.
      let entries = resource.keys.sorted().map { jsonQuoted($0) + ":" + jsonQuoted(resource[$0]!) }
      var kept: [String] = []
      var size = 0
      for entry in entries {
        if size + entry.utf8.count + 1 > Self.maxFileSize / 2 {
          resourceOmitted += 1
          continue
        }
        size += entry.utf8.count + 1
        kept.append(entry)
      }
      head += ",\"resource\":{" + Self.commaSeparated(kept) + "}"
    }
    // Each entry is sized as written; 64 bytes are kept for the punctuation and `omitted`.
    var size = head.utf8.count + 64
    var omitted = self.omitted + resourceOmitted
    func kept(_ entries: [String]) -> [String] {
      entries.filter { entry in
        let fits = size + entry.utf8.count + 1 <= Self.maxFileSize
        if fits { size += entry.utf8.count + 1 } else { omitted += 1 }
        return fits
      }
    }
    let keptAttributes = kept(
      attributes.keys.sorted().map { jsonQuoted($0) + ":" + attributes[$0]!.json })
    let keptAttachments = kept(attachments.map(jsonQuoted))
    let text =
      head + ",\"attributes\":{" + Self.commaSeparated(keptAttributes) + "},\"attachments\":["
      + Self.commaSeparated(keptAttachments) + "],\"omitted\":\(omitted)}"
    return Array(text.utf8)
  }

  /// `entries` joined by commas. A loop, not `joined(separator:)`: this runs on the caller's
  /// thread of CrumbsClient.start, and the generic `joined`'s first use makes the runtime look up
  /// a conformance through every loaded image (a tenth of a millisecond with Foundation loaded).
  fileprivate static func commaSeparated(_ entries: [String]) -> String {
    var text = ""
    for (index, entry) in entries.enumerated() {
      if index > 0 { text += "," }
      text += entry
    }
    return text
  }

  /// Why a session file could not be read.
  package struct ReadError: Error, CustomStringConvertible {
    package var reason: String
    package var description: String { reason }
  }

  /// Reads a session file.
  package static func read(file: String) throws(ReadError) -> SessionMetadata {
    try readWithOwner(file: file).metadata
  }

  /// Reads a session file, and says which user owns it: the user that wrote it (its client
  /// writes it whole and renames it into place). The file sits in `rings/`, which the app
  /// writes: opened without following a link or blocking, a regular file of the folder's owner
  /// (Syscall.openUntrustedFile).
  package static func readWithOwner(file: String) throws(ReadError) -> (
    metadata: SessionMetadata, owner: UInt32
  ) {
    let bytes: [UInt8]
    let owner: UInt32
    do throws(SystemCallError) {
      let fd = try Syscall.openUntrustedFile(file, O_RDONLY)
      defer { Syscall.close(fd) }
      owner = try Syscall.owner(of: fd, path: file)
      bytes = try Syscall.read(fd, at: 0, count: maxFileSize + 1, path: file)
      guard bytes.count <= maxFileSize else {
        throw SystemCallError(call: "read", path: file, refusal: .tooLarge(limit: maxFileSize))
      }
    } catch {
      throw ReadError(reason: "unreadable: \(error)")
    }
    return (try decode(bytes), owner)
  }

  /// A session file's bytes, as another process wrote them: JSON of a format this reader knows.
  package static func decode(_ bytes: [UInt8]) throws(ReadError) -> SessionMetadata {
    let metadata: SessionMetadata
    do {
      metadata = try JSONDecoder().decode(SessionMetadata.self, from: Data(bytes))
    } catch {
      throw ReadError(reason: "not a session file (\(bytes.count) bytes of invalid JSON)")
    }
    guard metadata.format <= currentFormat else {
      throw ReadError(reason: "format \(metadata.format) is newer than this reader (\(currentFormat))")
    }
    return metadata
  }
}

/// The environment's resource as a ring header carries it from the moment the ring is made
/// (crumbs_ring_header.environment_resource, RingOptions.environmentResource): what a session
/// that crashes before its session file is written is reported with. Not signal-safe.
package enum EnvironmentResource {
  /// `resource` as a JSON object of strings that fits the header: entries are kept while they
  /// fit, the rest left out (cut JSON would not parse). Nil when empty. Written by hand, like
  /// `SessionMetadata.encoded`, and unsorted: this runs on the caller's thread of `start`, where
  /// a first generic sort costs the runtime a conformance lookup through every loaded image.
  package static func encoded(_ resource: [String: String]) -> String? {
    encoded(pairs: Array(resource))
  }

  /// The same from pairs, for a caller without a dictionary: a process's first
  /// `[String: String]` looks up String's Hashable conformance through every loaded image
  /// (~0.25 ms of `start`). Not generic: an unspecialized `some Sequence` costs the same kind
  /// of lookup for its iterator.
  package static func encoded(pairs resource: [(key: String, value: String)]) -> String? {
    let limit = RingOptions.environmentResourceCapacity - 1
    var kept: [String] = []
    var size = 2
    var any = false
    for (key, value) in resource {
      any = true
      let entry = jsonQuoted(key) + ":" + jsonQuoted(value)
      if size + entry.utf8.count + 1 > limit { continue }
      size += entry.utf8.count + 1
      kept.append(entry)
    }
    guard any else { return nil }
    return "{" + SessionMetadata.commaSeparated(kept) + "}"
  }

  /// The resource a header's text holds; nil when it holds none or is not such an object.
  package static func decoded(_ text: String) -> [String: String]? {
    guard !text.isEmpty else { return nil }
    return try? JSONDecoder().decode([String: String].self, from: Data(text.utf8))
  }
}
