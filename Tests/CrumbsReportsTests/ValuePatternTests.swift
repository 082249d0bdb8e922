// ValuePatternTests.swift — the value patterns' matcher (ValuePattern.swift): the language it
// takes (checked against Swift Regex on the same texts), what it refuses and why, and its bound
// (issue 35, case 3): `(.*.*)*Q$` made the backtracking matcher run for minutes on one line;
// here it costs a few steps per byte, and a text on which the patterns run out of steps is
// redacted whole.

import CrumbsTestSupport
import Testing

@testable import CrumbsReports

struct ValuePatternTests {
  /// `text` with every match of `pattern` replaced by "[redacted]", by this matcher.
  func replaced(_ pattern: String, _ text: String) throws -> String {
    let compiled = try ValuePattern(pattern)
    var budget = Int.max
    let bytes = Array(text.utf8)
    let matches = try #require(bytes.withUnsafeBufferPointer { compiled.matches(in: $0, budget: &budget) })
    var out: [UInt8] = []
    var copied = 0
    for range in matches {
      out += bytes[copied..<range.lowerBound] + Array("[redacted]".utf8)
      copied = range.upperBound
    }
    return String(decoding: out + bytes[copied...], as: UTF8.self)
  }

  static let patterns = [
    Redaction.emailAddresses, "card [0-9]{4}", #"\d{3}-\d{2}-\d{4}"#, "a|ab|abc", "(a|ab)(c|bcd)",
    "a+?b", "a*?b", "x{2,3}", "x{2,3}?", "x{2,}", "[^ ]+@[^ ]+", #"\bkey\w*"#, #"\Bey"#,
    "^start", "end$", "(?i)secret", "(?i)[a-c]+", "colou?r", #"\$\d+(\.\d\d)?"#, "[-a-c]+", "[a-c-]+",
    #"[\d\s]+"#, #"\S+=\S+"#, "(?:ab)+", "(?<word>ab)+c", "t.k", #"\W+"#, #"(\d+\.){3}\d+"#,
    "((a|b)*c)+",
  ]
  static let texts = [
    "", "mail alice@example.com, bob.b@mail.example.org; card 1234", "ssn 123-45-6789 and 12-34",
    "abcd abd ab a", "aaab ab b xxxx xx xxxxx xy xxy", "keyring mykey key_1 Key", "start end end",
    "SeCrEt secret SECRET", "abcABC colour color", "$12.50 $3 $4.5", "-a-b c- [1 2 3] a=b c = d",
    "token tik t\nk", "10.0.0.1 and 1.2.3", "ababc abcabc", "aabbc abcc", "aaaaaaaaaaQ", "aaaaQb",
  ]

  /// The language means what Swift Regex means by the same text (ASCII texts: Swift's `.` and
  /// literals work on grapheme clusters, this matcher on scalars).
  @Test(arguments: patterns)
  func matchesAsSwiftRegexDoes(pattern: String) throws {
    let regex = try Regex(pattern)
    for text in Self.texts {
      let expected = text.replacing(regex, with: "[redacted]")
      #expect(try replaced(pattern, text) == expected, "\(text.debugDescription)")
    }
  }

  @Test func scalarsNotBytes() throws {
    #expect(try replaced("Gr.ße", "Grüße ✓") == "[redacted] ✓")
    #expect(try replaced("[^a-z ]+", "abc é✓ def") == "abc [redacted] def")
    #expect(try replaced(#"\u{2713}"#, "ok ✓") == "ok [redacted]")
    #expect(try replaced(#"\x41+"#, "AAB") == "[redacted]B")
    // Invalid UTF-8 is read a byte at a time, as U+FFFD: nothing is skipped or read past the end.
    let compiled = try ValuePattern("b.")
    var budget = Int.max
    let bytes: [UInt8] = [0x62, 0xC3, 0x62, 0xFF, 0x62, 0xE2, 0x9C]
    let found = bytes.withUnsafeBufferPointer { compiled.matches(in: $0, budget: &budget) }
    #expect(found == [0..<2, 2..<4, 4..<6])
  }

  /// Random patterns of the language on random short texts (SplitMix64: SymbolicationTests): the same non-empty matches as Swift
  /// Regex finds (texts short enough for its backtracking).
  @Test func randomPatternsMatchAsSwiftRegexDoes() throws {
    var random = SplitMix64(seed: 35)
    // No `\b`: Swift's default is Unicode's word boundaries (one at the text's start and end
    // whatever is there), this matcher's the ASCII one of PCRE (between \w and \W).
    let atoms = ["a", "b", "c", ".", "[ab]", "[^a ]", #"\d"#, #"\w"#, #"\s"#, " ", "^", "$"]
    let quantifiers = ["", "", "", "*", "+", "?", "{1,2}", "*?", "+?", "??", "{2}"]
    func piece(_ depth: Int) -> String {
      let atom: String
      if depth < 2 && random.next() % 4 == 0 {
        let branches = (0...(random.next() % 2)).map { _ in sequence(depth + 1) }
        atom = "(" + branches.joined(separator: "|") + ")"
      } else {
        atom = atoms[Int(random.next() % UInt64(atoms.count))]
      }
      if atom == "^" || atom == "$" { return atom }
      return atom + quantifiers[Int(random.next() % UInt64(quantifiers.count))]
    }
    func sequence(_ depth: Int) -> String { (0...(random.next() % 3)).map { _ in piece(depth) }.joined() }
    let alphabet = Array("ab1 c")
    var compared = 0
    for _ in 0..<300 {
      let pattern = sequence(0)
      // Swift refuses a repeated anchor (`^*`); this language takes it (it matches nothing).
      guard let regex = try? Regex(pattern) else { continue }
      let compiled = try ValuePattern(pattern)
      compared += 1
      for _ in 0..<10 {
        let text = String((0..<(random.next() % 10)).map { _ in alphabet[Int(random.next() % 5)] })
        let expected = text.matches(of: regex).map(\.range).filter { !$0.isEmpty }.map {
          text.utf8.distance(
            from: text.startIndex, to: $0.lowerBound)..<text.utf8.distance(
              from: text.startIndex, to: $0.upperBound)
        }
        var budget = Int.max
        let found = Array(text.utf8).withUnsafeBufferPointer { compiled.matches(in: $0, budget: &budget) }
        #expect(found == expected, "\(pattern) on \(text.debugDescription)")
      }
    }
    #expect(compared > 250)
  }

  @Test func countsWithoutALowerBound() throws {
    #expect(try replaced("x{,2}y", "xxxy y") == "x[redacted] [redacted]")
  }

  /// Empty matches replace nothing (Swift Regex would insert a replacement between every pair).
  @Test func emptyMatchesReplaceNothing() throws {
    #expect(try replaced("x*", "abxxc") == "ab[redacted]c")
    #expect(try replaced("^", "abc") == "abc")
  }

  @Test(arguments: [
    ("(unclosed", "without its ')'"), ("a)", "unbalanced"), (#"(\w+)\1"#, #"\1 is not supported"#),
    ("(?=x)y", "look-around"), ("(?<!x)y", "look-around"), ("a*+", "possessive"), ("(?>a)", "look-around"),
    (#"\p{L}"#, #"\p is not supported"#), ("[[:alpha:]]", "POSIX"), ("[a-z&&[^x]]", "class operations"),
    ("a{2000}", "over 1000"), ("(a{1000}){1000}", "instructions"), ("*a", "nothing to repeat"),
    ("a**", "cannot be repeated"), ("[]", "empty class"), ("[z-a]", "out of order"),
    ("a{", "not a repetition"),
    ("x(?i)y", "inline options"), (#"\"#, "at the end"), (String(repeating: "(", count: 200), "nested"),
  ])
  func refusedWithWhy(pattern: String, reason: String) {
    #expect(throws: ValuePattern.SyntaxError.self) { try ValuePattern(pattern) }
    do {
      _ = try ValuePattern(pattern)
    } catch {
      #expect(error.reason.contains(reason), "\(error)")
    }
  }

  /// The issue's pattern on a long line: one pass, a few steps per byte and instruction.
  @Test func theHostilePatternIsLinear() throws {
    let compiled = try ValuePattern("(.*.*)*Q$")
    for count in [1_000, 100_000] {
      let text = Array(String(repeating: "a", count: count).utf8)
      let allowed = 4 * compiled.program.count * (count + 1)
      var budget = allowed
      let found = text.withUnsafeBufferPointer { compiled.matches(in: $0, budget: &budget) }
      #expect(found == [], "\(count) bytes")
      #expect(budget >= 0, "\(count) bytes: \(allowed - budget) steps")
    }
    // With its Q, the whole line is one match.
    var budget = Int.max
    let line = Array((String(repeating: "a", count: 10_000) + "Q").utf8)
    #expect(line.withUnsafeBufferPointer { compiled.matches(in: $0, budget: &budget) } == [0..<line.count])
  }

  /// Through the public API, as an app or a processor runs it (the old matcher, Swift Regex,
  /// backtracks: 30 a's took longer than this bound, 200 would take years).
  @Test func theHostilePatternFinishesOnTheRedactionAPI() {
    let rules = Redaction(valuePatterns: ["(.*.*)*Q$"])
    let clock = ContinuousClock()
    let started = clock.now
    let text = "hostile " + String(repeating: "a", count: 200)
    #expect(rules.redacting(text) == text)
    #expect(rules.redacting(text + "Q") == "[redacted]")
    let elapsed = clock.now - started
    #expect(elapsed < .seconds(5), "\(elapsed)")
  }

  /// A pattern whose preferred branch runs past each match (`.*X|a`) costs a pass per match:
  /// past its per-text steps, the text is redacted whole and the report says so.
  @Test func aTextPastItsStepsIsRedactedWhole() {
    let redactor = Redactor(Redaction(valuePatterns: ["(.*X|a)"]))
    #expect(redactor.text("a b a") == "[redacted] b [redacted]")
    #expect(redactor.problems.isEmpty)
    #expect(redactor.text(String(repeating: "a", count: 20_000)) == "[redacted]")
    #expect(redactor.text("no match here") == "no m[redacted]tch here")
    #expect(
      redactor.problems == ["redaction patterns ran out of their step budget on 1 texts: redacted whole"])
  }

  /// Once a report's steps are spent, every later text the patterns would be tried on is
  /// redacted whole: one report's pattern work is bounded whatever its texts.
  @Test func aReportPastItsStepsRedactsTheRestWhole() {
    let redactor = Redactor(Redaction(valuePatterns: [Redaction.emailAddresses]), patternSteps: 20_000)
    #expect(redactor.text("mail alice@example.com") == "mail [redacted]")
    #expect(redactor.text(String(repeating: "word ", count: 2_000)) == "[redacted]")
    #expect(redactor.text("short") == "[redacted]")
    #expect(redactor.problems.count == 1)
  }
}
