// SessionMetadata+Fuzzing.swift — the checks Fuzz/SessionFile runs on arbitrary bytes, and the
// fuzz regression tests replay: a session file is written by the app and read by every
// processor (the next launch, `crumbs collect` under another uid), and its redaction rules carry
// value patterns that the processor compiles and runs on text the app wrote.
//
// Entry point: SessionMetadata.fuzzViolation(_:) — the bytes as a session file (decoded, and its
// redaction rules applied to the same bytes as text), then as a value pattern (up to the first
// line feed) and a text (the rest). Nil when every check holds, else what broke. Not signal-safe.

extension SessionMetadata {
  /// Steps a fuzz input's patterns may take: enough for real patterns on a few KB, small enough
  /// that a pathological one ends quickly (failing closed).
  static let fuzzPatternSteps = 1 << 20

  package static func fuzzViolation(_ bytes: [UInt8]) -> String? {
    let text = String(decoding: bytes, as: UTF8.self)
    if let metadata = try? decode(bytes), let rules = metadata.redaction {
      let redactor = Redactor(rules, patternSteps: fuzzPatternSteps)
      let redacted = redactor.text(text)
      if !rules.isOff, redactor.problems.isEmpty, rules.valuePatterns.isEmpty,
        redacted.utf8.count > text.utf8.count + 64 * (text.utf8.count + 1)
      {
        return "redaction grew \(text.utf8.count) bytes to \(redacted.utf8.count)"
      }
    }
    let cut = bytes.firstIndex(of: 0x0A) ?? bytes.endIndex
    let source = String(decoding: bytes[..<cut], as: UTF8.self)
    guard let pattern = try? ValuePattern(source) else { return nil }
    let subject = Array(bytes[min(cut + 1, bytes.endIndex)...])
    var budget = fuzzPatternSteps
    let found = subject.withUnsafeBufferPointer { pattern.matches(in: $0, budget: &budget) }
    guard let matches = found else { return nil }  // out of steps: the caller redacts whole
    var end = 0
    for range in matches {
      guard !range.isEmpty, range.lowerBound >= end, range.upperBound <= subject.count else {
        return "pattern \(source.debugDescription) matched \(range) after \(end) in \(subject.count) bytes"
      }
      end = range.upperBound
    }
    return nil
  }
}
