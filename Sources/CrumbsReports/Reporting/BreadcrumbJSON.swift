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

  /// Appends this breadcrumb's JSON object (no newline) to `json`: written raw
  /// (`JSONWriter.line`), the trail's thousands of lines being most of a report's encoding.
  /// BreadcrumbJSONTests holds it to `writeJSONThroughScopes`, the same object written through
  /// the writer's scopes.
  package func writeJSON(into json: inout JSONWriter) {
    // The fixed part (keys, punctuation, three integers, a timestamp, names, the optional
    // flags) is under 320 bytes; the text, escaped, at most six bytes per byte.
    var bound = 320 + JSONWriter.escapedBound(message.utf8.count)
    for index in attributes.indices {
      bound +=
        2 + JSONWriter.escapedBound(attributes[index].key.utf8.count)
        + JSONWriter.escapedBound(attributes[index].value.utf8.count)
    }
    json.line(bound: bound) { line in
      line.raw("{\"timestamp\":")
      line.timestamp(nanoseconds: wallTimeNanoseconds, fractionDigits: 6)
      line.raw(",\"id\":")
      line.integer(id)
      line.raw(",\"seq\":")
      line.integer(UInt64(threadSequence))
      line.raw(",\"thread\":")
      line.integer(UInt64(threadID))
      line.raw(",\"level\":\"")
      line.raw(level.staticName)
      line.raw("\",\"type\":\"")
      line.raw(type.staticName)
      line.raw("\",\"message\":")
      line.string(message)
      line.raw(",\"attributes\":{")
      for index in attributes.indices {
        if index > 0 { line.raw(",") }
        line.string(attributes[index].key)
        line.raw(":")
        line.string(attributes[index].value)
      }
      line.raw("}")
      if truncated {
        switch (messageTruncated, attributesTruncated) {
        case (true, true): line.raw(",\"truncated\":true,\"truncated_parts\":[\"message\",\"attributes\"]")
        case (true, false): line.raw(",\"truncated\":true,\"truncated_parts\":[\"message\"]")
        default: line.raw(",\"truncated\":true,\"truncated_parts\":[\"attributes\"]")
        }
      }
      if fromSignalHandler { line.raw(",\"signal_handler\":true") }
      line.raw("}")
    }
  }

  /// The same object as `writeJSON`, written through the writer's scopes: what the raw line is
  /// held to (BreadcrumbJSONTests).
  package func writeJSONThroughScopes(into json: inout JSONWriter) {
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
