// TrailAttachment.swift — the breadcrumb trail as a report attachment: JSON Lines, oldest to
// newest, compressed into one LZ4 frame (`breadcrumbs.jsonl.lz4`, readable by `lz4 -d`).
// Schema of a line: see Breadcrumb.jsonLine() and docs/formats.md "Breadcrumb trail schema".

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
