// Redaction.swift — personal data scrubbed on the device, when a report is built:
// the one redaction function every report builder uses. Never on the append path: the ring keeps
// the raw bytes the app appended (the file stays on the device, 0600), and what leaves it — the
// trail attachment, the report's attributes, resource and messages — is redacted here.
//
// Rules (`Redaction`, `CrumbsConfiguration.redaction`; on by default):
//   keys                an attribute whose key contains one of them (ASCII case-insensitive,
//                       `-` and `_` alike, substring: `tokenizer` and `csrf_token` match `token`)
//                       has its value replaced by `[redacted]`; inside free text, the value of a
//                       `key=value` or `key: value` pair whose key matches so (quoted, JSON-ish,
//                       URL query, an HTTP authorization scheme and its credential); after the
//                       separator (`=`, `:`, `=>`, `->`), Swift's `Optional(` is skipped and a
//                       bracketed value (`[…]`, `(…)`, `{…}`) is redacted to its balanced end.
//                       The pair rule is the crash handler's own C (crumbs_redact.c, reached
//                       through CrumbsRecorder's PairRedaction): one implementation for the
//                       termination line and the reports
//   redactsURLCredentials  a URL's userinfo (`postgres://app:s3cr3t@db` → `postgres://[redacted]@db`)
//   valuePatterns       regular expressions in a linear-time subset (ValuePattern.swift); every
//                       match replaced; a refused pattern, or one that runs out of its step
//                       budget on a text, redacts that text whole (fails closed)
//   shortensHomeDirectories  `/home/alice/…`, `/Users/alice/…` → `~/…`, `/root/…` → `~/…`, as
//                       the Swift backtracer's `sanitize` does: in frames' files and modules, the
//                       modules' paths, the resource (executable path) and every message
//
// Entry points, in call order:
//   Redaction.redactor()          the rules compiled once per report, with the report's step
//                                 budget for value patterns (a refused pattern makes every
//                                 text redacted whole; `problems` names it for the damage)
//   Redactor.contents(_:)         a ring's breadcrumbs (messages, attribute values) before the
//                                 trail attachment is encoded and the report built from them,
//                                 on their bytes (`redact(_:)`, BreadcrumbSlots): no String made
//                                 for text with nothing to redact:
//                                 PostMortemProcessor.process (crash, abnormal end: the client's
//                                 next launch and `crumbs collect`), NonFatalReportBuilder.build
//                                 (non-fatal and hang reports)
//   Redactor.report(_:)           the built report: attributes, resource, exception message,
//                                 evidence and damage, the trail's last message, the trace
//                                 breadcrumb's message, frames' and modules' paths and
//                                 source lines (as text), every thread's frames; the same two
//                                 builders
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
  public static let off = Redaction(
    keys: [], valuePatterns: [], shortensHomeDirectories: false, redactsURLCredentials: false)

  /// Keys whose values are redacted, in attributes and in `key=value` / `key: value` pairs of
  /// free text (ASCII case-insensitive, `-` and `_` alike, substring of the key).
  public var keys: [String]
  /// Regular expressions, in the linear-time subset of Swift `Regex` syntax that
  /// docs/redaction.md#value-patterns lists (literals, `.`, classes, `\d \w \s \b`, anchors,
  /// groups, `|`, greedy and lazy repetition, a leading `(?i)`); every match in a message or
  /// attribute value is replaced. A pattern outside the subset is refused: `CrumbsClient.start`
  /// throws, `invalidPatterns` says why. Matching never backtracks, and a text on which the
  /// patterns run out of their step budget is redacted whole. None by default;
  /// `Redaction.emailAddresses` is one.
  public var valuePatterns: [String]
  /// `/home/NAME/…`, `/Users/NAME/…` and `/root/…` become `~/…`.
  public var shortensHomeDirectories: Bool
  /// A URL's userinfo (`scheme://user:password@host`, `https://TOKEN@host`) becomes
  /// `scheme://[redacted]@host`.
  public var redactsURLCredentials: Bool

  public init(
    keys: [String] = Redaction.defaultKeys, valuePatterns: [String] = [],
    shortensHomeDirectories: Bool = true,
    redactsURLCredentials: Bool = true
  ) {
    self.keys = keys
    self.valuePatterns = valuePatterns
    self.shortensHomeDirectories = shortensHomeDirectories
    self.redactsURLCredentials = redactsURLCredentials
  }

  private enum CodingKeys: String, CodingKey {
    case keys, valuePatterns, shortensHomeDirectories, redactsURLCredentials
  }

  /// Session files written before `redactsURLCredentials` existed lack it: on, as by default.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    keys = try container.decode([String].self, forKey: .keys)
    valuePatterns = try container.decode([String].self, forKey: .valuePatterns)
    shortensHomeDirectories = try container.decode(Bool.self, forKey: .shortensHomeDirectories)
    redactsURLCredentials = try container.decodeIfPresent(Bool.self, forKey: .redactsURLCredentials) ?? true
  }

  /// Whether these rules change nothing.
  public var isOff: Bool {
    !shortensHomeDirectories && !redactsURLCredentials && valuePatterns.isEmpty
      && keys.allSatisfy { Redactor.normalized($0).isEmpty }
  }

  /// The rules compiled for one report (or a batch of them).
  package func redactor() -> Redactor { Redactor(self) }

  /// `breadcrumbs` as a report's trail holds them under these rules (for an app's own checks,
  /// or a hook that edits a report).
  public func redacting(_ breadcrumbs: [Breadcrumb]) -> [Breadcrumb] { redactor().breadcrumbs(breadcrumbs) }

  /// `text` as a report's messages hold it under these rules.
  public func redacting(_ text: String) -> String { redactor().text(text) }

  /// The patterns refused (outside the supported subset, or not regular expressions), each with
  /// why: `CrumbsClient.start` throws with them. A processor given a refused pattern (a session
  /// file of another version) redacts every text the patterns would be tried on, whole.
  public var invalidPatterns: [String] { Redactor(self).refusedPatterns }
}

/// The steps value patterns may still take for one Redactor (one report), and the texts redacted
/// whole because they ran out; a class, shared by the copies of the Redactor.
final class PatternBudget {
  var remaining: Int
  var textsRedactedWhole = 0

  init(_ steps: Int) { remaining = steps }
}

/// The rules of a `Redaction`, compiled: keys normalized, patterns parsed. Not Sendable (its
/// pattern budget is shared by its copies): one per report build.
package struct Redactor {
  private let keys: [[UInt8]]
  /// Which normalized bytes start a key: the scan for a key tries only there.
  private let keyStarts: [Bool]
  private let patterns: [ValuePattern]
  private let homes: Bool
  private let urls: Bool
  /// The pair rule, the crash handler's own (crumbs_redact.c through CrumbsRecorder): the line
  /// and the report cannot disagree.
  private let pairs: PairRedaction
  /// Patterns refused, with the reason: with one, every text is redacted whole.
  package let refusedPatterns: [String]
  private let budget: PatternBudget
  /// Changes nothing (`Redaction.off`): every entry point returns its input.
  package let isIdentity: Bool

  /// The steps the value patterns may take over one report's texts: about a second's work, far
  /// more than a full ring's trail needs with a few patterns.
  package static let patternStepsPerReport = 1 << 26

  package init(_ rules: Redaction, patternSteps: Int = Redactor.patternStepsPerReport) {
    keys = rules.keys.map { Self.normalized($0) }.filter { !$0.isEmpty }
    var keyStarts = [Bool](repeating: false, count: 256)
    for key in keys { keyStarts[Int(key[0])] = true }
    self.keyStarts = keyStarts
    var patterns: [ValuePattern] = []
    var refused: [String] = []
    for source in rules.valuePatterns {
      do throws(ValuePattern.SyntaxError) {
        patterns.append(try ValuePattern(source))
      } catch {
        refused.append("redaction pattern \(source) is refused (\(error))")
      }
    }
    self.patterns = patterns
    refusedPatterns = refused
    budget = PatternBudget(patternSteps)
    homes = rules.shortensHomeDirectories
    urls = rules.redactsURLCredentials
    pairs = PairRedaction(keys: rules.keys, redactsURLCredentials: rules.redactsURLCredentials)
    isIdentity = keys.isEmpty && patterns.isEmpty && refused.isEmpty && !homes && !urls
  }

  /// What a report built with these rules says in its damage: refused patterns (every text
  /// redacted whole), and texts redacted whole because the patterns ran out of steps.
  package var problems: [String] {
    var problems = refusedPatterns.map { $0 + ": every message and attribute value is redacted whole" }
    if budget.textsRedactedWhole > 0 {
      problems.append(
        "redaction patterns ran out of their step budget on \(budget.textsRedactedWhole) texts: redacted whole"
      )
    }
    return problems
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
    if var open = report.openOperations {
      for index in open.operations.indices {
        open.operations[index].name = text(open.operations[index].name)
        open.operations[index].attributes = open.operations[index].attributes.map {
          Breadcrumb.Attribute(key: $0.key, value: value($0.value, key: $0.key))
        }
      }
      report.openOperations = open
    }
    report.frames = frames(report.frames)
    for index in report.modules.indices { report.modules[index].path = path(report.modules[index].path) }
    if var threads = report.threads {
      for index in threads.indices { threads[index].frames = frames(threads[index].frames) }
      report.threads = threads
    }
  }

  /// Frames' paths and source lines (what `report(_:)` does to every thread's frames); for a
  /// report named again after it was stored (CrashReport.symbolicated).
  package func frames(_ frames: [CrashReport.Frame]) -> [CrashReport.Frame] {
    guard homes || frames.contains(where: { $0.source != nil }) else { return frames }
    return frames.map { frame in
      var frame = frame
      frame.file = frame.file.map(path)
      frame.module = frame.module.map(path)
      // Source lines are free text: a secret written in the code (a literal, a comment) is
      // redacted as it would be in a message.
      if let lines = frame.source?.lines { frame.source?.lines = lines.map(text) }
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
    // A pattern that could not be compiled cannot say what it would have caught: fail closed.
    if !refusedPatterns.isEmpty {
      return text.isEmpty || text.elementsEqual(Self.replacementBytes) ? nil : Self.replacementBytes
    }
    // Most text has neither a separator (`=`, `:`, `>`) nor a slash: one pass, eight bytes at a
    // time, settles it before the keys, URLs and home directories are looked for.
    if patterns.isEmpty, !Self.mayNeedWork(text) { return nil }
    let pairs = (!keys.isEmpty && mayHoldPair(text)) || (urls && text.contains(Byte.at))
    var result = pairs ? self.pairs.redacted(text) : nil
    if homes {
      let shortened =
        if let current = result {
          current.withUnsafeBufferPointer { Self.mayHoldHome($0) } ? homesShortened(current) : nil
        } else {
          Self.mayHoldHome(text) ? homesShortened(Array(text)) : nil
        }
      if let shortened { result = shortened }
    }
    for pattern in patterns {
      let outcome =
        if let current = result {
          current.withUnsafeBufferPointer { patternApplied(pattern, $0) }
        } else {
          patternApplied(pattern, text)
        }
      switch outcome {
      case .unchanged: continue
      case .changed(let bytes): result = bytes
      case .outOfSteps:
        budget.textsRedactedWhole += 1
        return Self.replacementBytes
      }
    }
    return result
  }

  private enum PatternOutcome {
    case unchanged, changed([UInt8]), outOfSteps
  }

  /// `bytes` with every match of `pattern` replaced. The steps allowed: what is left of the
  /// report's budget, and at most a few passes over the text per instruction (a pass never
  /// needs more than about 4 steps per instruction and byte).
  private func patternApplied(_ pattern: ValuePattern, _ bytes: UnsafeBufferPointer<UInt8>) -> PatternOutcome
  {
    let allowed = min(budget.remaining, (bytes.count + 1) * 8 * pattern.program.count + 4096)
    var left = allowed
    let found = pattern.matches(in: bytes, budget: &left)
    budget.remaining -= allowed - max(left, 0)
    guard let found else { return .outOfSteps }
    guard !found.isEmpty else { return .unchanged }
    var out: [UInt8] = []
    var copied = 0
    for range in found {
      out += bytes[copied..<range.lowerBound]
      out += Self.replacementBytes
      copied = range.upperBound
    }
    out += bytes[copied...]
    return .changed(out)
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
    bytes.contains { $0 == Byte.equals || $0 == Byte.colon || $0 == Byte.greater } && containsKey(bytes)
  }
}
