// BreadcrumbJSON.swift — the one JSON form of a breadcrumb: a line of the trail attachment
// (TrailAttachment), read back by TrailEntries (CrumbsDelivery), and what `crumbs ring dump
// --json` and `ring tail --json` print. Keys, in this order (docs/formats.md "Breadcrumb trail schema"):
//
//   timestamp, id, seq, thread, level, type, message, attributes
//   [, truncated, truncated_parts]   only when something was cut
//   [, signal_handler]               only when appended from a signal handler
//
// Timestamps have microseconds. Trails written before this schema had milliseconds and no
// `truncated_parts`; TrailEntries reads both. Not signal-safe.

import CrumbsRecorder

extension Breadcrumb {
  /// This breadcrumb as one JSON Lines line (no newline). See docs/formats.md "Breadcrumb trail schema".
  public func jsonLine() -> String {
    var json = JSONWriter()
    writeJSON(into: &json)
    return String(decoding: json.bytes, as: UTF8.self)
  }

  /// Appends this breadcrumb's JSON object (no newline) to `json`.
  package func writeJSON(into json: inout JSONWriter) {
    json.object { object in
      object.field("timestamp", timestamp: wallTimeNanoseconds, fractionDigits: 6)
      object.field("id", id)
      object.field("seq", threadSequence)
      object.field("thread", threadID)
      object.field("level", level.name)
      object.field("type", type.name)
      object.field("message", message)
      object.object("attributes") { fields in
        for attribute in attributes { fields.field(attribute.key, attribute.value) }
      }
      if truncated {
        object.field("truncated", true)
        object.array("truncated_parts") { parts in
          for part in truncatedParts { parts.append(part) }
        }
      }
      if fromSignalHandler { object.field("signal_handler", true) }
    }
  }

  /// What was cut to fit the slot: `["message"]`, `["attributes"]`, both, or none.
  package var truncatedParts: [String] {
    (messageTruncated ? ["message"] : []) + (attributesTruncated ? ["attributes"] : [])
  }
}
