// ValuePattern+Matching.swift — a value pattern run over UTF-8 text as a Pike VM: the threads
// alive at one scalar are kept in priority order, at most one per instruction, and advanced
// together to the next scalar, so each scalar costs at most a few steps per instruction however
// the pattern nests (no backtracking). Leftmost-first, as Swift Regex and PCRE: among matches
// at the leftmost start, the one its preferred alternatives and repetitions give.
//
// Every step is counted against a budget the caller gives (Redactor: per text and per report):
// one pass over a text costs at most about 4 × instructions steps per scalar, but finding every
// match restarts after each one, and a pattern whose preferred branch runs on past its matches
// (`.*X|a`) costs a pass per match. When the budget runs out the answer is nil, and the caller
// redacts the whole text (fails closed).
// Invalid UTF-8 bytes are read as U+FFFD, one byte each. Pure; not signal-safe.

extension ValuePattern {
  /// The non-empty, non-overlapping leftmost matches in `text`, in order; nil when `budget`
  /// (steps, decremented as they are taken) runs out first.
  package func matches(in text: UnsafeBufferPointer<UInt8>, budget: inout Int) -> [Range<Int>]? {
    var machine = Machine(self, text)
    var found: [Range<Int>] = []
    var from = 0
    while from <= text.count {
      guard let match = machine.firstMatch(from: from, budget: &budget) else { return nil }
      guard let range = match else { break }
      if range.isEmpty {
        // An empty match replaces nothing: look again one scalar on.
        guard range.lowerBound < text.count else { break }
        from = range.lowerBound + Machine.decode(text, at: range.lowerBound).length
      } else {
        found.append(range)
        from = range.upperBound
      }
    }
    return found
  }
}

/// The scratch of one search: two thread lists, the marks that keep one thread per
/// instruction in a list, and the stack that follows jumps and splits.
private struct Machine {
  let program: [ValuePattern.Instruction]
  let sets: [ScalarSet]
  let text: UnsafeBufferPointer<UInt8>
  /// Instruction and start of each thread, in priority order.
  var current: [(pc: Int, start: Int)] = []
  var next: [(pc: Int, start: Int)] = []
  /// The list generation each instruction was last added to.
  var marks: [Int]
  var generation = 0
  var stack: [Int] = []

  init(_ pattern: ValuePattern, _ text: UnsafeBufferPointer<UInt8>) {
    program = pattern.program
    sets = pattern.sets
    self.text = text
    marks = Array(repeating: -1, count: program.count)
    current.reserveCapacity(program.count)
    next.reserveCapacity(program.count)
    stack.reserveCapacity(program.count * 2)
  }

  /// The scalar at `index` and its length in bytes (invalid UTF-8: U+FFFD, one byte).
  static func decode(_ text: UnsafeBufferPointer<UInt8>, at index: Int) -> (scalar: UInt32, length: Int) {
    let lead = text[index]
    if lead < 0x80 { return (UInt32(lead), 1) }
    let length: Int
    var scalar: UInt32
    switch lead {
    case 0xC2...0xDF:
      length = 2
      scalar = UInt32(lead & 0x1F)
    case 0xE0...0xEF:
      length = 3
      scalar = UInt32(lead & 0x0F)
    case 0xF0...0xF4:
      length = 4
      scalar = UInt32(lead & 0x07)
    default: return (0xFFFD, 1)
    }
    guard index + length <= text.count else { return (0xFFFD, 1) }
    for offset in 1..<length {
      let byte = text[index + offset]
      guard byte & 0xC0 == 0x80 else { return (0xFFFD, 1) }
      scalar = scalar << 6 | UInt32(byte & 0x3F)
    }
    // Overlong forms, surrogates and values past U+10FFFF are not scalars.
    let smallest: UInt32 = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000
    guard scalar >= smallest, scalar <= ScalarSet.maxScalar, !(0xD800...0xDFFF).contains(scalar) else {
      return (0xFFFD, 1)
    }
    return (scalar, length)
  }

  /// The scalar that ends just before `index`, nil at the start.
  func scalar(before index: Int) -> UInt32? {
    guard index > 0 else { return nil }
    var start = index - 1
    while start > 0, index - start < 4, text[start] & 0xC0 == 0x80 { start -= 1 }
    let decoded = Self.decode(text, at: start)
    // Not a whole scalar ending here (a stray continuation byte): that byte alone.
    return start + decoded.length == index ? decoded.scalar : 0xFFFD
  }

  static func isWord(_ scalar: UInt32?) -> Bool { scalar.map { ScalarSet.word.contains($0) } ?? false }

  /// Adds the threads `pc` leads to at `position` (between `before` and `after`) to `next`, or
  /// to `current` when `toCurrent`, in priority order; false when the budget ran out.
  mutating func add(
    _ pc: Int, start: Int, toCurrent: Bool = false, position: Int, before: UInt32?, after: UInt32?,
    budget: inout Int
  ) -> Bool {
    stack.removeAll(keepingCapacity: true)
    stack.append(pc)
    while let pc = stack.popLast() {
      budget -= 1
      if budget < 0 { return false }
      if marks[pc] == generation {
        // A loop's test met again here: its body matched nothing, and the loop ends.
        if case .loop(_, _, let exit) = program[pc] { stack.append(exit) }
        continue
      }
      marks[pc] = generation
      switch program[pc] {
      case .jump(let target): stack.append(target)
      case .split(let first, let second), .loop(let first, let second, _):
        stack.append(second)
        stack.append(first)
      case .assert(let assertion):
        let holds =
          switch assertion {
          case .textStart: position == 0
          case .textEnd: position == text.count
          case .wordBoundary: Self.isWord(before) != Self.isWord(after)
          case .notWordBoundary: Self.isWord(before) == Self.isWord(after)
          }
        if holds { stack.append(pc + 1) }
      case .scalar, .match:
        if toCurrent { current.append((pc, start)) } else { next.append((pc, start)) }
      }
    }
    return true
  }

  /// The leftmost-first match starting at or after `from`: `.some(nil)` when there is none,
  /// nil when the budget ran out.
  mutating func firstMatch(from: Int, budget: inout Int) -> Range<Int>?? {
    current.removeAll(keepingCapacity: true)
    var matched: Range<Int>?
    var position = from
    var before = scalar(before: from)
    var here = position < text.count ? Self.decode(text, at: position) : nil
    generation += 1
    while true {
      // A new thread starting here, after (below) every thread started earlier; none once a
      // match is known (later starts are not leftmost).
      if matched == nil {
        guard
          add(
            0, start: position, toCurrent: true, position: position, before: before, after: here?.scalar,
            budget: &budget)
        else { return nil }
      }
      let following = position + (here?.length ?? 0)
      let after = here.flatMap { _ in following < text.count ? Self.decode(text, at: following) : nil }
      if current.isEmpty {
        // Nothing alive: done when a match is known, else a start one scalar on is tried.
        guard matched == nil, let scalar = here else { break }
        generation += 1
        before = scalar.scalar
        position = following
        here = after
        continue
      }
      generation += 1
      next.removeAll(keepingCapacity: true)
      let threads = current
      for thread in threads {
        budget -= 1
        if budget < 0 { return nil }
        switch program[thread.pc] {
        case .scalar(let set):
          guard let here, sets[set].contains(here.scalar) else { continue }
          guard
            add(
              thread.pc + 1, start: thread.start, position: following, before: here.scalar,
              after: after?.scalar, budget: &budget)
          else { return nil }
        case .match:
          // Threads below this one are less preferred: dropped.
          matched = thread.start..<position
        default: continue
        }
        if case .match = program[thread.pc] { break }
      }
      guard let scalar = here else { break }
      swap(&current, &next)
      before = scalar.scalar
      position = following
      here = after
    }
    return .some(matched)
  }
}
