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

  /// Appends this breadcrumb's JSON object (no newline) to `json`: written as a trail's entry
  /// is (BreadcrumbSlots.writeJSON), from a copy of its text. BreadcrumbJSONTests holds it to
  /// `writeJSONThroughScopes`, the same object written through the writer's scopes.
  package func writeJSON(into json: inout JSONWriter) {
    BreadcrumbSlots([self]).writeJSON(0, into: &json)
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

extension BreadcrumbSlots {
  /// Appends every entry's JSON object, each followed by a newline: the trail's JSON Lines,
  /// written from the text's bytes where they are (no String made).
  package func writeJSONLines(into json: inout JSONWriter) {
    bytes.withUnsafeBufferPointer { text in
      attributeSpans.withUnsafeBufferPointer { spans in
        for entry in entries {
          Self.writeJSON(entry, text: text, spans: spans, into: &json)
          json.newline()
        }
      }
    }
  }

  /// Appends entry `index`'s JSON object (no newline) to `json`.
  package func writeJSON(_ index: Int, into json: inout JSONWriter) {
    bytes.withUnsafeBufferPointer { text in
      attributeSpans.withUnsafeBufferPointer { spans in
        Self.writeJSON(entries[index], text: text, spans: spans, into: &json)
      }
    }
  }

  /// The one JSON form of a breadcrumb (see the file's comment): written raw
  /// (`JSONWriter.line`), the trail's thousands of lines being most of a report's encoding.
  private static func writeJSON(
    _ entry: Entry, text: UnsafeBufferPointer<UInt8>, spans: UnsafeBufferPointer<Span>,
    into json: inout JSONWriter
  ) {
    func utf8(_ span: Span) -> UnsafeBufferPointer<UInt8> {
      UnsafeBufferPointer(rebasing: text[span.start..<span.start + span.count])
    }
    let attributes = entry.firstAttribute * 2..<(entry.firstAttribute + entry.attributeCount) * 2
    // The fixed part (keys, punctuation, three integers, a timestamp, names, the optional
    // flags) is under 320 bytes; the text, escaped, at most six bytes per byte.
    var bound = 320 + JSONWriter.escapedBound(entry.message.count)
    for index in attributes { bound += 1 + JSONWriter.escapedBound(spans[index].count) }
    json.line(bound: bound) { line in
      line.raw("{\"timestamp\":")
      line.timestamp(nanoseconds: entry.wallTimeNanoseconds, fractionDigits: 6)
      line.raw(",\"id\":")
      line.integer(entry.id)
      line.raw(",\"seq\":")
      line.integer(UInt64(entry.threadSequence))
      line.raw(",\"thread\":")
      line.integer(UInt64(entry.threadID))
      line.raw(",\"level\":\"")
      line.raw(entry.level.staticName)
      line.raw("\",\"type\":\"")
      line.raw(entry.type.staticName)
      line.raw("\",\"message\":")
      line.string(utf8: utf8(entry.message))
      line.raw(",\"attributes\":{")
      for index in stride(from: attributes.lowerBound, to: attributes.upperBound, by: 2) {
        if index > attributes.lowerBound { line.raw(",") }
        line.string(utf8: utf8(spans[index]))
        line.raw(":")
        line.string(utf8: utf8(spans[index + 1]))
      }
      line.raw("}")
      if entry.truncated {
        switch (entry.messageTruncated, entry.attributesTruncated) {
        case (true, true): line.raw(",\"truncated\":true,\"truncated_parts\":[\"message\",\"attributes\"]")
        case (true, false): line.raw(",\"truncated\":true,\"truncated_parts\":[\"message\"]")
        default: line.raw(",\"truncated\":true,\"truncated_parts\":[\"attributes\"]")
        }
      }
      if entry.fromSignalHandler { line.raw(",\"signal_handler\":true") }
      line.raw("}")
    }
  }
}
