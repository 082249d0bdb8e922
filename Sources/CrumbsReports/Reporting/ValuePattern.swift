// ValuePattern.swift — the redaction's value patterns (`Redaction.valuePatterns`): a small
// regular-expression language, compiled to a program that ValuePattern+Matching.swift runs as a
// Pike VM (every live thread advanced in step over the text, one thread per instruction at
// most). Its time is linear in the text whatever the pattern: no backtracking, so a pattern from
// a session file (written by the app, read by `crumbs collect` under another uid) cannot stall
// the processor, as `(.*.*)*Q$` does a backtracking matcher.
//
// The language (what Swift `Regex` and PCRE mean by the same text, over Unicode scalars):
//   literals             any character; `\` before punctuation makes it literal; `\t \n \r \f
//                        \v \0`, `\xHH`, `\u{H…}`
//   .                    any character but a line end (`\n`, `\r`)
//   [abc] [a-z] [^…]     classes, with `\d \w \s \D \W \S` and escapes inside; `-` first or last
//                        is literal
//   \d \w \s \D \W \S    ASCII digits, ASCII word characters (`[A-Za-z0-9_]`), blanks and line
//                        ends (`[ \t\n\r\f\v]`), and their complements
//   ^ $ \A \z \Z         the start and the end of the text (one text is one line, mostly)
//   \b \B                a word boundary, not one: between an ASCII word character and
//                        anything else, as in PCRE (Swift Regex's default is Unicode's word
//                        boundaries, which also stand at the text's start and end)
//   (…) (?:…) (?<n>…)    groups (nothing is captured: the whole match is replaced)
//   |                    alternation, leftmost first (as Swift Regex and PCRE choose)
//   * + ? {n} {n,} {n,m} {,m}   repetition (n, m ≤ 1000), greedy, or lazy with a `?` after
//   (?i)                 at the very start: ASCII letters match either case
// Matches are those of Swift Regex (ValuePatternTests compares them on random patterns), but
// for one kind: a repetition nested in a repetition where both may match nothing
// (`((.*?|$)+x)?`) can end a match elsewhere than backtracking would; what is redacted is then
// a different extent, never nothing.
// Refused (Redaction.invalidPatterns names them, and why; CrumbsClient.start throws): back
// references, look-around, possessive and atomic forms, `\p{…}`, POSIX and nested classes,
// inline options elsewhere, and a program over `maxInstructions` (`(a{1000}){1000}`).
// A processor given a refused pattern (a session file written by another version, or by hand)
// redacts every text the patterns would be tried on, whole: it fails closed.
//
// Entry points, in call order:
//   ValuePattern(_:)                      parse and compile (throws SyntaxError)
//   ValuePattern.matches(in:budget:)      every leftmost non-empty match (+Matching.swift)
// Pure values; not signal-safe.

/// A compiled value pattern (see the file's comment for the language).
package struct ValuePattern {
  /// Why a pattern is refused: what, and where (a UTF-8 offset into the pattern).
  package struct SyntaxError: Error, CustomStringConvertible, Equatable {
    package var reason: String
    package var offset: Int
    package var description: String { "\(reason) at offset \(offset)" }
  }

  /// The longest program compiled: repetition copies its operand, so `(a{1000}){1000}` would be
  /// a million instructions (and a million steps per byte).
  package static let maxInstructions = 2000
  /// The largest count in `{n,m}`.
  package static let maxRepetition = 1000

  enum Assertion {
    case textStart, textEnd, wordBoundary, notWordBoundary
  }

  enum Instruction {
    /// Consumes one scalar in `sets[index]`.
    case scalar(Int)
    /// Goes on at both, the first preferred.
    case split(Int, Int)
    /// A loop's test after its body: as `split`; met again at the same place (its body matched
    /// nothing), it goes on at `exit` only, as backtracking ends a loop on an empty iteration.
    case loop(Int, Int, exit: Int)
    case jump(Int)
    /// Goes on at the next instruction when it holds where the thread is.
    case assert(Assertion)
    case match
  }

  let program: [Instruction]
  let sets: [ScalarSet]

  /// Parses and compiles `source`.
  package init(_ source: String) throws(SyntaxError) {
    var parser = Parser(Array(source.unicodeScalars))
    let tree = try parser.parse()
    var compiler = Compiler()
    try compiler.emit(tree)
    compiler.program.append(.match)
    program = compiler.program
    sets = compiler.sets
  }
}

// MARK: - Scalar sets

/// A set of Unicode scalars: a bitmap for ASCII, sorted disjoint ranges above.
struct ScalarSet {
  var low: UInt64 = 0
  var high: UInt64 = 0
  var ranges: [ClosedRange<UInt32>] = []

  static let maxScalar: UInt32 = 0x10FFFF

  init(_ ranges: [ClosedRange<UInt32>]) {
    // Sorted and merged, then the ASCII part moved to the bitmap.
    var merged: [ClosedRange<UInt32>] = []
    for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
      if let last = merged.last, range.lowerBound <= last.upperBound &+ 1 {
        merged[merged.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
      } else {
        merged.append(range)
      }
    }
    for range in merged {
      if range.lowerBound < 128 {
        for scalar in range.lowerBound...min(range.upperBound, 127) {
          if scalar < 64 { low |= 1 << UInt64(scalar) } else { high |= 1 << UInt64(scalar - 64) }
        }
      }
      if range.upperBound >= 128 { self.ranges.append(max(range.lowerBound, 128)...range.upperBound) }
    }
  }

  /// The ranges this set covers (ASCII included), for complementing and merging.
  var allRanges: [ClosedRange<UInt32>] {
    var result: [ClosedRange<UInt32>] = []
    var scalar: UInt32 = 0
    while scalar < 128 {
      guard contains(scalar) else {
        scalar += 1
        continue
      }
      let start = scalar
      while scalar < 128, contains(scalar) { scalar += 1 }
      result.append(start...scalar - 1)
    }
    return result + ranges
  }

  /// Every scalar this set does not hold.
  var complement: ScalarSet {
    var result: [ClosedRange<UInt32>] = []
    var next: UInt32 = 0
    for range in allRanges {
      if range.lowerBound > next { result.append(next...range.lowerBound - 1) }
      next = range.upperBound + 1
    }
    if next <= Self.maxScalar { result.append(next...Self.maxScalar) }
    return ScalarSet(result)
  }

  func contains(_ scalar: UInt32) -> Bool {
    if scalar < 64 { return low & (1 << UInt64(scalar)) != 0 }
    if scalar < 128 { return high & (1 << UInt64(scalar - 64)) != 0 }
    // Few ranges in practice: a linear walk.
    for range in ranges {
      if scalar < range.lowerBound { return false }
      if scalar <= range.upperBound { return true }
    }
    return false
  }

  /// With the other case of every ASCII letter added.
  var caseFolded: ScalarSet {
    var extra: [ClosedRange<UInt32>] = []
    for letter in UInt32(0x41)...0x5A where contains(letter) || contains(letter | 0x20) {
      extra.append(letter...letter)
      extra.append((letter | 0x20)...(letter | 0x20))
    }
    return ScalarSet(allRanges + extra)
  }

  static let digits = ScalarSet([0x30...0x39])
  static let word = ScalarSet([0x30...0x39, 0x41...0x5A, 0x5F...0x5F, 0x61...0x7A])
  static let blanks = ScalarSet([0x09...0x0D, 0x20...0x20])
  /// `.`: anything but a line end.
  static let notLineEnd = ScalarSet([0x0A...0x0A, 0x0D...0x0D]).complement
}

// MARK: - Parsing

/// What a pattern parses to.
private indirect enum PatternNode {
  case empty
  case set(ScalarSet)
  case assertion(ValuePattern.Assertion)
  case sequence([PatternNode])
  case alternatives([PatternNode])
  case repetition(PatternNode, min: Int, max: Int?, greedy: Bool)
}

private struct Parser {
  let scalars: [Unicode.Scalar]
  var index = 0
  /// Byte offsets of each scalar, for the error's offset.
  let offsets: [Int]
  var ignoresCase = false
  /// Open groups: a bound on nesting (the parser recurses once per group).
  var depth = 0

  static let maxDepth = 100

  init(_ scalars: [Unicode.Scalar]) {
    self.scalars = scalars
    var offsets: [Int] = []
    var offset = 0
    for scalar in scalars {
      offsets.append(offset)
      offset += UTF8.width(scalar)
    }
    offsets.append(offset)
    self.offsets = offsets
  }

  func error(_ reason: String) -> ValuePattern.SyntaxError {
    ValuePattern.SyntaxError(reason: reason, offset: offsets[min(index, offsets.count - 1)])
  }

  var atEnd: Bool { index >= scalars.count }
  var current: Unicode.Scalar? { atEnd ? nil : scalars[index] }
  func peek(_ ahead: Int) -> Unicode.Scalar? {
    index + ahead < scalars.count ? scalars[index + ahead] : nil
  }

  mutating func parse() throws(ValuePattern.SyntaxError) -> PatternNode {
    if scalars.starts(with: "(?i)".unicodeScalars) {
      ignoresCase = true
      index = 4
    }
    let tree = try alternatives()
    if !atEnd { throw error("unbalanced ')'") }
    return tree
  }

  mutating func alternatives() throws(ValuePattern.SyntaxError) -> PatternNode {
    var branches = [try sequence()]
    while current == "|" {
      index += 1
      branches.append(try sequence())
    }
    return branches.count == 1 ? branches[0] : .alternatives(branches)
  }

  mutating func sequence() throws(ValuePattern.SyntaxError) -> PatternNode {
    var items: [PatternNode] = []
    while let scalar = current, scalar != "|", scalar != ")" {
      let atom = try self.atom()
      items.append(try quantified(atom))
    }
    return items.isEmpty ? .empty : items.count == 1 ? items[0] : .sequence(items)
  }

  mutating func quantified(_ atom: PatternNode) throws(ValuePattern.SyntaxError) -> PatternNode {
    var bounds: (Int, Int?)
    switch current {
    case "*": bounds = (0, nil)
    case "+": bounds = (1, nil)
    case "?": bounds = (0, 1)
    case "{": bounds = try counts()
    default: return atom
    }
    index += 1
    var greedy = true
    if current == "?" {
      greedy = false
      index += 1
    } else if current == "+" {
      throw error("possessive repetition is not supported")
    }
    if let next = current, next == "*" || next == "+" || next == "?" || next == "{" {
      throw error("a repetition cannot be repeated")
    }
    return .repetition(atom, min: bounds.0, max: bounds.1, greedy: greedy)
  }

  /// `{n}`, `{n,}`, `{n,m}`, `{,m}` at `index` (left on the closing brace), or an error.
  mutating func counts() throws(ValuePattern.SyntaxError) -> (Int, Int?) {
    var cursor = index + 1
    func number() -> Int? {
      var value: Int?
      while cursor < scalars.count, ("0"..."9").contains(scalars[cursor]) {
        value = min((value ?? 0) * 10 + Int(scalars[cursor].value - 0x30), ValuePattern.maxRepetition + 1)
        cursor += 1
      }
      return value
    }
    let lower = number()
    var upper = lower
    if cursor < scalars.count, scalars[cursor] == "," {
      cursor += 1
      upper = number()
    } else if lower == nil {
      throw error("'{' is not a repetition (escape it as \\{)")
    }
    guard cursor < scalars.count, scalars[cursor] == "}", lower != nil || upper != nil else {
      throw error("'{' is not a repetition (escape it as \\{)")
    }
    let minimum = lower ?? 0
    if minimum > ValuePattern.maxRepetition || (upper ?? 0) > ValuePattern.maxRepetition {
      throw error("a repetition count over \(ValuePattern.maxRepetition)")
    }
    if let upper, upper < minimum { throw error("a repetition {n,m} with m < n") }
    index = cursor
    return (minimum, upper)
  }

  mutating func atom() throws(ValuePattern.SyntaxError) -> PatternNode {
    guard let scalar = current else { throw error("the pattern ends early") }
    switch scalar {
    case "(":
      index += 1
      if current == "?" {
        if peek(1) == ":" {
          index += 2
        } else if peek(1) == "<" && peek(2) != "=" && peek(2) != "!" || peek(1) == "P" && peek(2) == "<" {
          // A named group: its name is skipped (nothing is captured).
          while let name = current, name != ">" { index += 1 }
          guard current == ">" else { throw error("an unterminated group name") }
          index += 1
        } else {
          throw error("look-around, back references and inline options are not supported")
        }
      }
      depth += 1
      if depth > Self.maxDepth { throw error("groups nested over \(Self.maxDepth) deep") }
      let inside = try alternatives()
      depth -= 1
      guard current == ")" else { throw error("a group without its ')'") }
      index += 1
      return inside
    case ")": throw error("unbalanced ')'")
    case "*", "+", "?": throw error("nothing to repeat")
    case "{": throw error("nothing to repeat (escape a literal '{' as \\{)")
    case "[":
      index += 1
      return .set(fold(try characterClass()))
    case ".":
      index += 1
      return .set(.notLineEnd)
    case "^":
      index += 1
      return .assertion(.textStart)
    case "$":
      index += 1
      return .assertion(.textEnd)
    case "\\":
      index += 1
      return try escape()
    default:
      index += 1
      return .set(fold(ScalarSet([scalar.value...scalar.value])))
    }
  }

  func fold(_ set: ScalarSet) -> ScalarSet { ignoresCase ? set.caseFolded : set }

  /// After a `\` outside a class.
  mutating func escape() throws(ValuePattern.SyntaxError) -> PatternNode {
    guard let scalar = current else { throw error("a '\\' at the end") }
    switch scalar {
    case "A":
      index += 1
      return .assertion(.textStart)
    case "z", "Z":
      index += 1
      return .assertion(.textEnd)
    case "b":
      index += 1
      return .assertion(.wordBoundary)
    case "B":
      index += 1
      return .assertion(.notWordBoundary)
    default:
      return .set(fold(try escapedSet()))
    }
  }

  /// After a `\`, inside or outside a class: a class escape or one scalar.
  mutating func escapedSet() throws(ValuePattern.SyntaxError) -> ScalarSet {
    guard let scalar = current else { throw error("a '\\' at the end") }
    index += 1
    switch scalar {
    case "d": return .digits
    case "D": return ScalarSet.digits.complement
    case "w": return .word
    case "W": return ScalarSet.word.complement
    case "s": return .blanks
    case "S": return ScalarSet.blanks.complement
    default:
      let value = try escapedScalar(scalar)
      return ScalarSet([value...value])
    }
  }

  /// The scalar a `\x` escape names (`index` after the `x`).
  mutating func escapedScalar(_ scalar: Unicode.Scalar) throws(ValuePattern.SyntaxError) -> UInt32 {
    switch scalar {
    case "t": return 0x09
    case "n": return 0x0A
    case "r": return 0x0D
    case "f": return 0x0C
    case "v": return 0x0B
    case "0": return 0x00
    case "x":
      guard let high = hexDigit(current), let low = hexDigit(peek(1)) else {
        throw error("\\x takes two hexadecimal digits")
      }
      index += 2
      return high << 4 | low
    case "u":
      guard current == "{" else { throw error("\\u takes {hexadecimal digits}") }
      index += 1
      var value: UInt32 = 0
      var digits = 0
      while let digit = hexDigit(current), digits < 6 {
        value = value << 4 | digit
        digits += 1
        index += 1
      }
      guard digits > 0, current == "}", value <= ScalarSet.maxScalar, !(0xD800...0xDFFF).contains(value)
      else {
        throw error("\\u{…} does not name a Unicode scalar")
      }
      index += 1
      return value
    default:
      // Punctuation (and anything not a letter or digit) stands for itself; a letter or digit
      // names something this language does not have (\p, \k, \1, \G…).
      if scalar.isASCII, scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) {
        throw error("\\\(scalar) is not supported")
      }
      return scalar.value
    }
  }

  func hexDigit(_ scalar: Unicode.Scalar?) -> UInt32? {
    guard let scalar else { return nil }
    switch scalar {
    case "0"..."9": return scalar.value - 0x30
    case "a"..."f": return scalar.value - 0x61 + 10
    case "A"..."F": return scalar.value - 0x41 + 10
    default: return nil
    }
  }

  /// A class, `index` after its `[`; leaves `index` after its `]`.
  mutating func characterClass() throws(ValuePattern.SyntaxError) -> ScalarSet {
    var negated = false
    if current == "^" {
      negated = true
      index += 1
    }
    var ranges: [ClosedRange<UInt32>] = []
    var first = true
    while true {
      guard let scalar = current else { throw error("a class without its ']'") }
      if scalar == "]" {
        if first { throw error("an empty class (escape a literal ']' as \\])") }
        index += 1
        break
      }
      first = false
      if scalar == "[" {
        throw error("nested classes and POSIX classes are not supported (escape '[' as \\[)")
      }
      if scalar == "&" && peek(1) == "&" || scalar == "-" && peek(1) == "-" || scalar == "~" && peek(1) == "~"
      {
        throw error("class operations are not supported")
      }
      let lower: UInt32
      if scalar == "\\" {
        index += 1
        let set = try escapedSet()
        let covered = set.allRanges
        if covered.count != 1 || covered[0].lowerBound != covered[0].upperBound {
          // \d, \w, \s and their complements: no range from them.
          if current == "-" && peek(1) != "]" && peek(1) != nil { throw error("a range from a class escape") }
          ranges += covered
          continue
        }
        lower = covered[0].lowerBound
      } else {
        index += 1
        lower = scalar.value
      }
      // A range `a-z`; a `-` before the `]` is literal.
      if current == "-", let next = peek(1), next != "]" {
        index += 1
        let upper: UInt32
        if next == "\\" {
          index += 1
          let covered = try escapedSet().allRanges
          guard covered.count == 1, covered[0].lowerBound == covered[0].upperBound else {
            throw error("a range to a class escape")
          }
          upper = covered[0].lowerBound
        } else if next == "[" {
          throw error("nested classes and POSIX classes are not supported (escape '[' as \\[)")
        } else {
          index += 1
          upper = next.value
        }
        guard lower <= upper else { throw error("a range out of order") }
        ranges.append(lower...upper)
      } else {
        ranges.append(lower...lower)
      }
    }
    let set = ScalarSet(ranges)
    // Folded before the complement: (?i)[^a] holds neither `a` nor `A`.
    let folded = ignoresCase ? set.caseFolded : set
    return negated ? folded.complement : folded
  }
}

// MARK: - Compiling

private struct Compiler {
  var program: [ValuePattern.Instruction] = []
  var sets: [ScalarSet] = []

  mutating func add(_ instruction: ValuePattern.Instruction) throws(ValuePattern.SyntaxError) -> Int {
    // One kept for the final `match`.
    guard program.count < ValuePattern.maxInstructions - 1 else {
      throw ValuePattern.SyntaxError(
        reason:
          "the pattern compiles to over \(ValuePattern.maxInstructions) instructions (repetition copies "
          + "what it repeats)", offset: 0)
    }
    program.append(instruction)
    return program.count - 1
  }

  mutating func emit(_ node: PatternNode) throws(ValuePattern.SyntaxError) {
    switch node {
    case .empty: break
    case .set(let set):
      sets.append(set)
      _ = try add(.scalar(sets.count - 1))
    case .assertion(let assertion): _ = try add(.assert(assertion))
    case .sequence(let items):
      for item in items { try emit(item) }
    case .alternatives(let branches):
      // split L1, next; L1: branch; jump end; next: split … ; the last branch falls through.
      var jumps: [Int] = []
      for (number, branch) in branches.enumerated() {
        if number == branches.count - 1 {
          try emit(branch)
        } else {
          let split = try add(.split(0, 0))
          try emit(branch)
          jumps.append(try add(.jump(0)))
          program[split] = .split(split + 1, program.count)
        }
      }
      for jump in jumps { program[jump] = .jump(program.count) }
    case .repetition(let inner, let minimum, let maximum, let greedy):
      if let maximum {
        for _ in 0..<minimum { try emit(inner) }
        // Each optional copy skips to the end when it is not taken.
        var splits: [Int] = []
        for _ in minimum..<maximum {
          splits.append(try add(.split(0, 0)))
          try emit(inner)
        }
        for split in splits { program[split] = ordered(split + 1, program.count, greedy: greedy) }
      } else {
        // `x{n,}` as n - 1 copies and `x+`, `x*` as `(x+)?`: the loop's test comes after the
        // body, so an iteration that matched nothing meets it again at once and leaves the loop
        // there, with the preference backtracking gives that way out (Instruction.loop).
        for _ in 0..<max(minimum - 1, 0) { try emit(inner) }
        let skip = minimum == 0 ? try add(.split(0, 0)) : nil
        let body = program.count
        try emit(inner)
        let test = try add(.split(0, 0))
        let (first, second) = greedy ? (body, test + 1) : (test + 1, body)
        program[test] = .loop(first, second, exit: test + 1)
        if let skip { program[skip] = .split(first, second) }
      }
    }
  }

  func ordered(_ take: Int, _ skip: Int, greedy: Bool) -> ValuePattern.Instruction {
    greedy ? .split(take, skip) : .split(skip, take)
  }
}
