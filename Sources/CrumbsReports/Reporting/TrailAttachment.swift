// TrailAttachment.swift — the breadcrumb trail as a report attachment: JSON Lines, oldest to
// newest, compressed into one LZ4 frame (`breadcrumbs.jsonl.lz4`, readable by `lz4 -d`).
// Schema of a line: see Breadcrumb.jsonLine() and docs/formats.md "Breadcrumb trail schema".
// Written here (TrailAttachment.make) and read back here, for the destinations that send
// breadcrumbs one by one (OTLP log records, Backtrace's breadcrumb file) and for `willSend`:
// every destination reads the trail through StoredReport.trailAttachment(), which verifies the
// LZ4 frame first, so a damaged trail is left out, and named with the same reason
// (TrailProblem), whatever the format. Entry points: TrailAttachment.make →
// StoredReport.trailAttachment() → trailBreadcrumbs(). Not signal-safe.

import CrumbsRecorder

/// The trail attachment of a report.
public enum TrailAttachment {
  public static let name = "breadcrumbs.jsonl.lz4"
  public static let contentType = "application/x-ndjson+lz4"

  /// The uncompressed JSON Lines text (one line per breadcrumb, each ending in a newline).
  public static func jsonLines(_ breadcrumbs: [Breadcrumb]) -> [UInt8] {
    jsonLines(BreadcrumbSlots(breadcrumbs))
  }

  /// The same from a ring's breadcrumbs as read (their text as bytes): what reports encode.
  package static func jsonLines(_ slots: BreadcrumbSlots) -> [UInt8] {
    // Sized for the whole trail at once (the fixed part of a line is about 190 bytes, a text's
    // quotes and punctuation a few more): growing the buffer on the way copied it and touched
    // its fresh pages twice.
    var json = JSONWriter(
      reservingCapacity: slots.count * 200 + slots.bytes.count + slots.attributeSpans.count * 3)
    slots.writeJSONLines(into: &json)
    return json.bytes
  }

  /// The compressed attachment, or nil when there are no breadcrumbs.
  public static func make(_ breadcrumbs: [Breadcrumb]) throws(LZ4Error) -> (name: String, bytes: [UInt8])? {
    try make(BreadcrumbSlots(breadcrumbs))
  }

  /// The same from a ring's breadcrumbs as read.
  package static func make(_ slots: BreadcrumbSlots) throws(LZ4Error) -> (name: String, bytes: [UInt8])? {
    guard !slots.isEmpty else { return nil }
    return (name, try LZ4Frame.compress(jsonLines(slots)))
  }

  /// The report's summary of a ring's contents.
  static func summary(_ contents: RingContents, attachmentSize: Int?) -> CrashReport.Trail {
    // The app's last word: the crashing thread's newest breadcrumb before the crash handler's
    // own fatal one (other threads may append after the crash while chained handlers run).
    // On the entries: only the one message used is made a String.
    let crumbs = contents.slots.entries
    let ownFinal: BreadcrumbSlots.Entry?
    if let handlerIndex = crumbs.lastIndex(where: { $0.fromSignalHandler && $0.level == .fatal }) {
      let thread = crumbs[handlerIndex].threadID
      ownFinal = crumbs[..<handlerIndex].last { $0.threadID == thread } ?? crumbs[..<handlerIndex].last
    } else {
      ownFinal = crumbs.last
    }
    return CrashReport.Trail(
      attachment: attachmentSize == nil ? nil : name,
      count: crumbs.count,
      valid: contents.counts.valid,
      torn: contents.counts.torn,
      overwritten: contents.counts.overwritten,
      empty: contents.counts.empty,
      lastMessage: ownFinal.map { contents.slots.string($0.message) },
      timesCalibrated: contents.timesAreCalibrated)
  }
}

// MARK: - Reading back

/// Why a report's trail is left out of what is sent: the attachment's name and the reason, as
/// both destinations list it among the omitted attachments.
public struct TrailProblem: Error, Sendable, Equatable, CustomStringConvertible {
  /// The attachment's file name (`breadcrumbs.jsonl.lz4`).
  public var name: String
  /// `unreadable: …` or `damaged: …` (e.g. `damaged: content checksum mismatch`).
  public var reason: String
  public var description: String { "\(name): \(reason)" }
}

extension StoredReport {
  /// The most a trail may decompress to (a ring holds far less).
  static let trailTextLimit = 1 << 30

  /// The trail attachment's bytes once verified as whole LZ4 frames (LZ4Frame.verify: magic,
  /// descriptor checksum, block sizes, content checksum); nil when the report has none. Every
  /// destination reads the trail through here, so a damaged one is left out, with the same
  /// reason, whatever the format.
  public func trailAttachment() throws(TrailProblem) -> [UInt8]? {
    // A trail `willSend` edited (ReportDraft): empty means none is sent.
    if let trailOverride { return trailOverride.isEmpty ? nil : trailOverride }
    guard let name = report.breadcrumbs.attachment else { return nil }
    let bytes: [UInt8]
    do {
      bytes = try readFile(name, limit: 256 << 20)
    } catch {
      throw TrailProblem(name: name, reason: "unreadable: \(error)")
    }
    do {
      try LZ4Frame.verify(bytes, limit: Self.trailTextLimit)
    } catch {
      throw TrailProblem(name: name, reason: "damaged: \(error.reason)")
    }
    return bytes
  }

  /// The trail's breadcrumbs, oldest first; empty without a trail. Lines that do not parse are
  /// skipped (the attachment was written by us, so that means damage, not a format change).
  public func trailBreadcrumbs() throws(TrailProblem) -> [Breadcrumb] {
    guard let compressed = try trailAttachment(), let name = report.breadcrumbs.attachment else { return [] }
    do {
      return Breadcrumb.trail(jsonLines: try LZ4Frame.decompress(compressed, limit: Self.trailTextLimit))
    } catch {
      throw TrailProblem(name: name, reason: "damaged: \(error.reason)")
    }
  }
}
