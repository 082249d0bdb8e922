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
    // Sized for the whole trail at once (the fixed part of a line is about 190 bytes): growing
    // the buffer on the way copied it and touched its fresh pages twice.
    // Through the buffer's subscript: its element is borrowed in place, where the array's
    // (and the iterator's) handed writeJSON a copy, a retain and release of its strings each
    // (a fifth of the trail's encoding, issue 26).
    breadcrumbs.withUnsafeBufferPointer { breadcrumbs in
      var capacity = 0
      for index in breadcrumbs.indices {
        capacity += 200 + breadcrumbs[index].message.utf8.count
        for attribute in breadcrumbs[index].attributes.indices {
          capacity +=
            6 + breadcrumbs[index].attributes[attribute].key.utf8.count
            + breadcrumbs[index].attributes[attribute].value.utf8.count
        }
      }
      var json = JSONWriter(reservingCapacity: capacity)
      for index in breadcrumbs.indices {
        breadcrumbs[index].writeJSON(into: &json)
        json.newline()
      }
      return json.bytes
    }
  }

  /// The compressed attachment, or nil when there are no breadcrumbs.
  public static func make(_ breadcrumbs: [Breadcrumb]) throws(LZ4Error) -> (name: String, bytes: [UInt8])? {
    guard !breadcrumbs.isEmpty else { return nil }
    return (name, try LZ4Frame.compress(jsonLines(breadcrumbs)))
  }

  /// The report's summary of a ring's contents.
  static func summary(_ contents: RingContents, attachmentSize: Int?) -> CrashReport.Trail {
    // The app's last word: the crashing thread's newest breadcrumb before the crash handler's
    // own fatal one (other threads may append after the crash while chained handlers run).
    let crumbs = contents.breadcrumbs
    let ownFinal: Breadcrumb?
    if let handlerIndex = crumbs.lastIndex(where: { $0.fromSignalHandler && $0.level == .fatal }) {
      let thread = crumbs[handlerIndex].threadID
      ownFinal = crumbs[..<handlerIndex].last { $0.threadID == thread } ?? crumbs[..<handlerIndex].last
    } else {
      ownFinal = crumbs.last
    }
    return CrashReport.Trail(
      attachment: attachmentSize == nil ? nil : name,
      count: contents.breadcrumbs.count,
      valid: contents.counts.valid,
      torn: contents.counts.torn,
      overwritten: contents.counts.overwritten,
      empty: contents.counts.empty,
      lastMessage: ownFinal?.message,
      timesCalibrated: contents.timesAreCalibrated)
  }
}
