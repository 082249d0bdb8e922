// BreadcrumbJSON.swift — the one JSON form of a breadcrumb: a line of the trail attachment
// (TrailAttachment), read back here too (Breadcrumb.trail(jsonLines:), for the destinations and
// `willSend`), and what `crumbs ring dump --json` and `ring tail --json` print. Keys, in this
// order (docs/formats.md "Breadcrumb trail schema"):
//
//   timestamp, id, seq, thread, level, type, message, attributes
//   [, truncated, truncated_parts]   only when something was cut
//   [, signal_handler]               only when appended from a signal handler
//
// Timestamps have microseconds. Trails written before this schema had milliseconds and no
// `truncated_parts`; the reader takes both. Not signal-safe.

import CrumbsRecorder
import FoundationEssentials

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

// MARK: - Reading back

extension Breadcrumb {
  /// The breadcrumbs of a trail's JSON Lines text, in order. A line that does not decode (torn,
  /// hand-edited, an unknown level or type) is skipped: the trail was written by us, so that
  /// means damage, not a format change. A line's attributes come back in key order (its object
  /// is read as a dictionary); the clock fields no line holds (`monotonicNanoseconds`, `ticks`)
  /// are 0, and `wallTimeNanoseconds` is 0 for a timestamp ISO8601.nanoseconds refuses.
  public static func trail(jsonLines text: [UInt8]) -> [Breadcrumb] {
    let decoder = JSONDecoder()
    return text.split(separator: UInt8(ascii: "\n")).compactMap {
      (try? decoder.decode(TrailLine.self, from: Data($0)))?.breadcrumb
    }
  }
}

/// One line of the trail as stored (the schema above), decoded before it becomes a Breadcrumb.
private struct TrailLine: Decodable {
  var timestamp: String
  var id: UInt64
  var seq: UInt32
  var thread: UInt32
  var level: String
  var type: String
  var message: String
  var attributes: [String: String]
  var truncated: Bool?
  /// With `truncated`: `message`, `attributes` or both (absent in trails of older versions).
  var truncatedParts: [String]?
  var signalHandler: Bool?

  enum CodingKeys: String, CodingKey {
    case timestamp, id, seq, thread, level, type, message, attributes, truncated
    case truncatedParts = "truncated_parts"
    case signalHandler = "signal_handler"
  }

  var breadcrumb: Breadcrumb? {
    guard let level = BreadcrumbLevel(name: level), let type = BreadcrumbType(name: type) else { return nil }
    let cut = truncated == true
    // An older trail says only that something was cut: the message, as far as can be told
    // (`truncated` stays what the line said either way).
    let parts = truncatedParts ?? (cut ? ["message"] : [])
    return Breadcrumb(
      id: id, threadSequence: seq, threadID: thread, wallTimeNanoseconds: ISO8601.nanoseconds(timestamp) ?? 0,
      monotonicNanoseconds: 0, ticks: 0, level: level, type: type, message: message,
      attributes: attributes.sorted { $0.key < $1.key }.map {
        Breadcrumb.Attribute(key: $0.key, value: $0.value)
      },
      messageTruncated: cut && (parts.contains("message") || !parts.contains("attributes")),
      attributesTruncated: cut && parts.contains("attributes"),
      fromSignalHandler: signalHandler == true)
  }
}
