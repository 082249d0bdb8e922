// Redaction.swift — personal data scrubbed on the device, when a report is built (issue 25):
// the one redaction function every report builder uses. Never on the append path: the ring keeps
// the raw bytes the app appended (the file stays on the device, 0600), and what leaves it — the
// trail attachment, the report's attributes, resource and messages — is redacted here.
//
// Rules (`Redaction`, `CrumbsConfiguration.redaction`; on by default):
//   keys                an attribute whose key contains one of them (ASCII case-insensitive,
//                       `-` and `_` alike, substring: `tokenizer` and `csrf_token` match `token`)
//                       has its value replaced by `[redacted]`; inside free text, the value of a
//                       `key=value` or `key: value` pair whose key matches so (quoted, JSON-ish,
//                       URL query, an HTTP authorization scheme and its credential)
//   valuePatterns       regular expressions (Swift Regex, no Foundation); every match replaced
//   shortensHomeDirectories  `/home/alice/…`, `/Users/alice/…` → `~/…`, `/root/…` → `~/…`, as
//                       the Swift backtracer's `sanitize` does: in frames' files and modules, the
//                       modules' paths, the resource (executable path) and every message
//
// Entry points, in call order:
//   Redaction.redactor()          the rules compiled once per report (patterns that do not
//                                 compile are skipped and named in `problems`)
//   Redactor.contents(_:)         a ring's breadcrumbs (messages, attribute values) before the
//                                 trail attachment is encoded and the report built from them,
//                                 on their bytes (`redact(_:)`, BreadcrumbSlots): no String made
//                                 for text with nothing to redact:
//                                 PostMortemProcessor.process (crash, abnormal end: the client's
//                                 next launch and `crumbs collect`), NonFatalReportBuilder.build
//                                 (non-fatal and hang reports)
//   Redactor.report(_:)           the built report: attributes, resource, exception message,
//                                 evidence and damage, the trail's last message, the trace
//                                 breadcrumb's message, frames' and modules' paths, every
//                                 thread's frames; the same two builders
//   Redactor.text(_:), value(_:key:)   one string: what the two above apply, and the tests' entry
//   Redaction.redacting(_:)       the same for an app (breadcrumbs, text) and the benchmarks
//
// The post-mortem processor redacts with the rules the crashed session ran with (persisted in
// its session file, SessionMetadata.redaction), else with its own (`PostMortemProcessor.redaction`:
// the client's configuration, or the defaults in `crumbs collect`). Thread dumps (`crumbs
// threads`) carry addresses and module paths only and never leave the machine: not redacted.
// The byte-level prefilters, classes and constants are in Redaction+Bytes.swift.
// Not signal-safe.

import CrumbsRecorder

/// What is scrubbed from reports before they are stored or sent (see the file's comment).
public struct Redaction: Sendable, Equatable, Codable {
  /// The default keys: `password`, `passwd`, `secret`, `token`, `api_key`, `authorization`,
  /// `cookie`, `set-cookie`.
  public static let defaultKeys = [
    "password", "passwd", "secret", "token", "api_key", "authorization", "cookie", "set-cookie",
  ]
  /// What a redacted value becomes.
  public static let replacement = "[redacted]"
  /// A pattern for e-mail addresses, for `valuePatterns`.
  public static let emailAddresses = #"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"#
  /// Nothing redacted.
  public static let off = Redaction(keys: [], valuePatterns: [], shortensHomeDirectories: false)

  /// Keys whose values are redacted, in attributes and in `key=value` / `key: value` pairs of
  /// free text (ASCII case-insensitive, `-` and `_` alike, substring of the key).
  public var keys: [String]
  /// Regular expressions (Swift `Regex` syntax); every match in a message or attribute value is
  /// replaced. None by default; `Redaction.emailAddresses` is one.
  public var valuePatterns: [String]
  /// `/home/NAME/…`, `/Users/NAME/…` and `/root/…` become `~/…`.
  public var shortensHomeDirectories: Bool

  public init(
    keys: [String] = Redaction.defaultKeys, valuePatterns: [String] = [], shortensHomeDirectories: Bool = true
  ) {
    self.keys = keys
    self.valuePatterns = valuePatterns
    self.shortensHomeDirectories = shortensHomeDirectories
  }

  /// Whether these rules change nothing.
  public var isOff: Bool {
    !shortensHomeDirectories && valuePatterns.isEmpty && keys.allSatisfy { Redactor.normalized($0).isEmpty }
  }

  /// The rules compiled for one report (or a batch of them).
  package func redactor() -> Redactor { Redactor(self) }

  /// `breadcrumbs` as a report's trail holds them under these rules (for an app's own checks,
  /// or a hook that edits a report).
  public func redacting(_ breadcrumbs: [Breadcrumb]) -> [Breadcrumb] { redactor().breadcrumbs(breadcrumbs) }

  /// `text` as a report's messages hold it under these rules.
  public func redacting(_ text: String) -> String { redactor().text(text) }

  /// The patterns that are not regular expressions, each with why: the client names them in
  /// its `problems` at start (they are skipped, the rest still applies).
  public var invalidPatterns: [String] { Redactor(self).problems }
}

/// The rules of a `Redaction`, compiled: keys normalized, patterns parsed. Not Sendable (Swift's
/// Regex is not): one per report build.
package struct Redactor {
  private let keys: [[UInt8]]
  /// Which normalized bytes start a key: the scan for a key tries only there.
  private let keyStarts: [Bool]
  private let patterns: [Regex<AnyRegexOutput>]
  private let homes: Bool
  /// Patterns that did not compile, with the reason.
  package let problems: [String]
  /// Changes nothing (`Redaction.off`): every entry point returns its input.
  package let isIdentity: Bool

  package init(_ rules: Redaction) {
    keys = rules.keys.map { Self.normalized($0) }.filter { !$0.isEmpty }
    var keyStarts = [Bool](repeating: false, count: 256)
    for key in keys { keyStarts[Int(key[0])] = true }
    self.keyStarts = keyStarts
    var patterns: [Regex<AnyRegexOutput>] = []
    var problems: [String] = []
    for source in rules.valuePatterns {
      do {
        patterns.append(try Regex(source))
      } catch {
        problems.append("redaction pattern \(source) is not a regular expression (\(error)): skipped")
      }
    }
    self.patterns = patterns
    self.problems = problems
    homes = rules.shortensHomeDirectories
    isIdentity = keys.isEmpty && patterns.isEmpty && !homes
  }

  // MARK: - Reports and breadcrumbs

  /// A ring's contents with every breadcrumb's message and attribute values redacted, on their
  /// bytes (BreadcrumbSlots): no String is made for text with nothing to redact.
  package func contents(_ contents: RingContents) -> RingContents {
    guard !isIdentity else { return contents }
    var contents = contents
    redact(&contents.slots)
    return contents
  }

  /// `slots` with every message and attribute value redacted (keys are kept): a redacted text is
  /// appended to the bytes and its entry pointed at it, the rest stays where it is. The one
  /// implementation of the breadcrumb rules (`breadcrumbs(_:)` goes through it).
  /// Returns whether anything was redacted.
  @discardableResult
  package func redact(_ slots: inout BreadcrumbSlots) -> Bool {
    guard !isIdentity else { return false }
    // The entries and spans are taken out of `slots` (changing them then copies nothing) and the
    // text is read through one pointer; redacted text is gathered aside and appended after.
    var entries: [BreadcrumbSlots.Entry] = []
    var spans: [BreadcrumbSlots.Span] = []
    swap(&entries, &slots.entries)
    swap(&spans, &slots.attributeSpans)
    var added: [UInt8] = []
    var redactedAny = false
    let base = slots.bytes.count
    func place(_ text: [UInt8]) -> BreadcrumbSlots.Span {
      redactedAny = true
      defer { added += text }
      return BreadcrumbSlots.Span(start: base + added.count, count: text.count)
    }
    // As in `breadcrumbs(_:)`: whether the key at each place matches is kept for the next
    // entry with the same key there.
    var lastKeys: [[UInt8]] = []
    var lastMatches: [Bool] = []
    slots.bytes.withUnsafeBufferPointer { text in
      func utf8(_ span: BreadcrumbSlots.Span) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: text[span.start..<span.start + span.count])
      }
      for index in entries.indices {
        if let changed = changedText(utf8(entries[index].message)) { entries[index].message = place(changed) }
        let first = entries[index].firstAttribute * 2
        for attribute in 0..<entries[index].attributeCount {
          let keyIndex = first + attribute * 2
          let key = utf8(spans[keyIndex])
          let keyMatches: Bool
          if attribute < lastKeys.count, key.elementsEqual(lastKeys[attribute]) {
            keyMatches = lastMatches[attribute]
          } else {
            keyMatches = containsKey(key)
            if attribute < lastKeys.count {
              lastKeys[attribute] = Array(key)
              lastMatches[attribute] = keyMatches
            } else if attribute == lastKeys.count {
              lastKeys.append(Array(key))
              lastMatches.append(keyMatches)
            }
          }
          let value = utf8(spans[keyIndex + 1])
          let changed =
            keyMatches
            ? (value.elementsEqual(Self.replacementBytes) ? nil : Self.replacementBytes)
            : changedText(value)
          if let changed { spans[keyIndex + 1] = place(changed) }
        }
      }
    }
    slots.bytes += added
    swap(&entries, &slots.entries)
    swap(&spans, &slots.attributeSpans)
    return redactedAny
  }

  /// Breadcrumbs with their messages and attribute values redacted (keys are kept). What does
  /// not change keeps its storage: a trail with nothing to redact costs a scan, not a copy.
  package func breadcrumbs(_ breadcrumbs: [Breadcrumb]) -> [Breadcrumb] {
    guard !isIdentity else { return breadcrumbs }
    // One implementation of the rules, on bytes (`redact(_:)`); the array is rebuilt only when
    // something was redacted.
    var slots = BreadcrumbSlots(breadcrumbs)
    return redact(&slots) ? slots.breadcrumbs : breadcrumbs
  }

  /// The report with everything a person's data may be in redacted (see the file's comment);
  /// function names and symbols are code, not data, and kept.
  package func report(_ report: inout CrashReport) {
    guard !isIdentity else { return }
    report.exceptionMessage = text(report.exceptionMessage)
    report.exceptionStacktrace = path(report.exceptionStacktrace)
    report.attributes = attributes(report.attributes)
    report.resource = attributes(report.resource)
    report.evidence = report.evidence.map(text)
    report.damage = report.damage.map(text)
    report.breadcrumbs.lastMessage = report.breadcrumbs.lastMessage.map(text)
    if let message = report.traceBreadcrumb?.message { report.traceBreadcrumb?.message = text(message) }
    report.frames = frames(report.frames)
    for index in report.modules.indices { report.modules[index].path = path(report.modules[index].path) }
    if var threads = report.threads {
      for index in threads.indices { threads[index].frames = frames(threads[index].frames) }
      report.threads = threads
    }
  }

  private func frames(_ frames: [CrashReport.Frame]) -> [CrashReport.Frame] {
    guard homes else { return frames }
    return frames.map { frame in
      var frame = frame
      frame.file = frame.file.map(path)
      frame.module = frame.module.map(path)
      return frame
    }
  }

  /// Attributes with the values of matching keys replaced and the others' text redacted.
  package func attributes(_ attributes: [String: String]) -> [String: String] {
    guard !isIdentity else { return attributes }
    var result = attributes
    for (key, value) in attributes { result[key] = self.value(value, key: key) }
    return result
  }

  /// Typed attributes (report and session attributes): a matching key's value becomes the
  /// string `[redacted]` whatever its type; other strings have their text redacted; numbers and
  /// booleans under other keys are kept.
  package func attributes(_ attributes: [String: AttributeValue]) -> [String: AttributeValue] {
    guard !isIdentity else { return attributes }
    var result = attributes
    for (key, value) in attributes {
      if matches(key) {
        result[key] = .string(Redaction.replacement)
      } else if case .string(let text) = value {
        result[key] = .string(self.text(text))
      }
    }
    return result
  }

  // MARK: - Strings

  /// One attribute's value: `[redacted]` when its key matches, else its text redacted.
  package func value(_ value: String, key: String) -> String { changedValue(value, key: key) ?? value }

  /// Free text: the values of sensitive `key=value` / `key: value` pairs, home directories and
  /// pattern matches replaced.
  package func text(_ text: String) -> String { changedText(text) ?? text }

  /// Home directories shortened (only that: for paths and stack text).
  package func path(_ text: String) -> String { homesShortened(text) ?? text }

  // The three above, nil when nothing changed. Each first scans the bytes in place for what
  // could need work (a separator and a key, a `/h`, `/U` or `/r`) and copies them only then:
  // most breadcrumbs hold nothing to redact, and a full ring's trail is thousands of them.

  private func changedValue(_ value: String, key: String) -> String? {
    guard !isIdentity else { return nil }
    if matches(key) { return value == Redaction.replacement ? nil : Redaction.replacement }
    return changedText(value)
  }

  private func changedText(_ text: String) -> String? {
    var text = text
    return text.withUTF8 { changedText($0) }.map { String(decoding: $0, as: UTF8.self) }
  }

  /// `changedText` on UTF-8 bytes (a breadcrumb's, in place): the one implementation of it.
  private func changedText(_ text: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
    guard !isIdentity else { return nil }
    // Most text has neither a separator (`=`, `:`) nor a slash: one pass, eight bytes at a time,
    // settles it before the keys and home directories are looked for.
    if patterns.isEmpty, !Self.mayNeedWork(text) { return nil }
    var result = keys.isEmpty || !mayHoldPair(text) ? nil : pairsRedacted(Array(text))
    if homes {
      let shortened =
        if let current = result {
          current.withUnsafeBufferPointer { Self.mayHoldHome($0) } ? homesShortened(current) : nil
        } else {
          Self.mayHoldHome(text) ? homesShortened(Array(text)) : nil
        }
      if let shortened { result = shortened }
    }
    if !patterns.isEmpty {
      // Swift's Regex works on Strings: one is made only for text a pattern is tried on.
      var current =
        result.map { String(decoding: $0, as: UTF8.self) } ?? String(decoding: text, as: UTF8.self)
      var changed = false
      for pattern in patterns where current.contains(pattern) {
        current = current.replacing(pattern, with: Redaction.replacement)
        changed = true
      }
      if changed { result = Array(current.utf8) }
    }
    return result
  }

  private func homesShortened(_ text: String) -> String? {
    guard homes else { return nil }
    var text = text
    guard text.withUTF8({ Self.mayHoldHome($0) }) else { return nil }
    return homesShortened(Array(text.utf8)).map { String(decoding: $0, as: UTF8.self) }
  }

  /// Home directories shortened in `bytes`, nil when there was none.
  private func homesShortened(_ bytes: [UInt8]) -> [UInt8]? {
    var out: [UInt8] = []
    var copied = 0
    var index = 0
    while index < bytes.count {
      guard bytes[index] == Byte.slash, index == 0 || !Self.isPathByte(bytes[index - 1]) else {
        index += 1
        continue
      }
      var end: Int?
      if let user = Self.after(bytes, at: index, prefix: Self.homePrefix)
        ?? Self.after(bytes, at: index, prefix: Self.usersPrefix)
      {
        var stop = user
        while stop < bytes.count, !Self.endsUserName(bytes[stop]) { stop += 1 }
        if stop > user { end = stop }
      } else if let stop = Self.after(bytes, at: index, prefix: Self.rootPrefix),
        stop == bytes.count || !Self.isPathByte(bytes[stop])
      {
        end = stop
      }
      guard let end else {
        index += 1
        continue
      }
      out += bytes[copied..<index]
      out.append(Byte.tilde)
      copied = end
      index = end
    }
    guard copied > 0 else { return nil }
    out += bytes[copied...]
    return out
  }

  /// The text with the value of every sensitive `key=value` / `key: value` pair replaced, nil
  /// when there was none.
  private func pairsRedacted(_ bytes: [UInt8]) -> [UInt8]? {
    var out: [UInt8] = []
    var copied = 0
    var index = 0
    while index < bytes.count {
      let byte = bytes[index]
      guard byte == Byte.equals || byte == Byte.colon else {
        index += 1
        continue
      }
      // `::` is a scope (C++, Swift's demangled names), not a pair.
      if byte == Byte.colon,
        (index + 1 < bytes.count && bytes[index + 1] == Byte.colon)
          || (index > 0 && bytes[index - 1] == Byte.colon)
      {
        index += 1
        continue
      }
      // The key: the word before the separator, past spaces and a closing quote (`"token": …`,
      // `\"token\":…` inside escaped JSON).
      var keyEnd = index
      while keyEnd > copied, Self.isBlank(bytes[keyEnd - 1]) { keyEnd -= 1 }
      if keyEnd > copied, Self.isQuote(bytes[keyEnd - 1]) { keyEnd -= 1 }
      if keyEnd > copied, bytes[keyEnd - 1] == Byte.backslash { keyEnd -= 1 }
      var keyStart = keyEnd
      while keyStart > copied, Self.isKeyByte(bytes[keyStart - 1]) { keyStart -= 1 }
      let key = bytes[keyStart..<keyEnd]
      // A cookie header's value is every cookie to the end of the line (`a=1; b=2`).
      guard keyStart < keyEnd, key.withUnsafeBufferPointer({ containsKey($0) }),
        let value = Self.valueSpan(
          bytes, from: index + 1, toLineEnd: Self.contains(Self.normalized(key), Self.cookie))
      else {
        index += 1
        continue
      }
      out += bytes[copied..<value.lowerBound]
      out += Self.replacementBytes
      copied = value.upperBound
      index = max(value.upperBound, index + 1)
    }
    guard copied > 0 else { return nil }
    out += bytes[copied...]
    return out
  }

  /// The value after a separator at `start`: past blanks, inside its quotes when quoted (to the
  /// end when the quote is not closed), else up to a delimiter; an HTTP authorization scheme
  /// (`Bearer xyz`) takes the credential after it too. Nil when empty or already redacted.
  private static func valueSpan(_ bytes: [UInt8], from start: Int, toLineEnd: Bool) -> Range<Int>? {
    var start = start
    while start < bytes.count, isBlank(bytes[start]) { start += 1 }
    guard start < bytes.count else { return nil }
    if bytes[start...].starts(with: replacementBytes) { return nil }
    // Quoted: `"a b"`, `'a b'`, `\"a b\"` (escaped JSON inside a message).
    var quote: [UInt8]?
    if isQuote(bytes[start]) {
      quote = [bytes[start]]
    } else if bytes[start] == Byte.backslash, start + 1 < bytes.count, isQuote(bytes[start + 1]) {
      quote = [Byte.backslash, bytes[start + 1]]
    }
    if let quote {
      let inside = start + quote.count
      var end = inside
      while end < bytes.count, !bytes[end...].starts(with: quote) {
        // A backslash escapes the next byte in an unescaped quoted string.
        end += quote.count == 1 && bytes[end] == Byte.backslash ? 2 : 1
      }
      end = min(end, bytes.count)
      return end > inside ? inside..<end : nil
    }
    var end = start
    if toLineEnd {
      while end < bytes.count, bytes[end] != 0x0A, bytes[end] != 0x0D { end += 1 }
      return start..<end
    }
    while end < bytes.count, !isDelimiter(bytes[end]) { end += 1 }
    guard end > start else { return nil }
    if authorizationSchemes.contains(lowercased(bytes[start..<end])), end + 1 < bytes.count,
      bytes[end] == Byte.space, !isDelimiter(bytes[end + 1])
    {
      end += 1
      while end < bytes.count, !isDelimiter(bytes[end]) { end += 1 }
    }
    return start..<end
  }

  /// Whether `key` contains one of the keys (normalized alike).
  private func matches(_ key: String) -> Bool {
    guard !keys.isEmpty else { return false }
    var key = key
    return key.withUTF8 { containsKey($0) }
  }

  /// Whether one of the keys is in `bytes`, compared normalized, without copying them.
  private func containsKey(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    for start in bytes.indices where keyStarts[Int(Self.normalized(bytes[start]))] {
      for key in keys where key.count <= bytes.count - start {
        var offset = 0
        while offset < key.count, Self.normalized(bytes[start + offset]) == key[offset] { offset += 1 }
        if offset == key.count { return true }
      }
    }
    return false
  }

  /// Whether free text may hold a sensitive pair: a separator, and a key somewhere in it.
  private func mayHoldPair(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    bytes.contains { $0 == Byte.equals || $0 == Byte.colon } && containsKey(bytes)
  }
}
