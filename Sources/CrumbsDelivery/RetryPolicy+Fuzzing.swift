// RetryPolicy+Fuzzing.swift — the retry policy's invariants over any input, for the fuzzer
// (Fuzz/HTTPHeaders) and the unit tests that replay what it found (FuzzRegressionTests): kept
// apart from the policy itself, as swift-collections keeps its test entry points.
//
// Entry point: RetryPolicy.fuzzViolation(_:) — the bytes become a policy (the app's settings:
// any Int and Double), an answer (status, Retry-After, whether the request was sent) or a
// failure, an attempt count (from delivery.json: any Int), a random draw and a clock; the
// answer must be one the file comment of RetryPolicy.swift allows. Not signal-safe.

extension RetryPolicy {
  /// What is wrong with the policy's decision on the input `bytes`; nil when nothing is.
  package static func fuzzViolation(_ bytes: [UInt8]) -> String? {
    var reader = FuzzBytes(bytes)
    let policy = RetryPolicy(
      retryLimit: reader.int(or: 3), retryInterval: reader.double(or: 60),
      maxRetryInterval: reader.double(or: 3600),
      jitter: reader.double(or: 0.5), defaultRetryAfter: reader.double(or: 60))
    let attempts = reader.int(or: 1)
    let random = reader.double(or: 0.5)
    let now: UInt64 = [0, 1_795_320_611_123_456_789, .max][Int(reader.byte % 3)]
    let flags = reader.byte
    let status = Int(reader.byte) * 3 % 600
    let response = HTTPResponse(
      status: status, headers: ["Retry-After": String(decoding: bytes, as: UTF8.self)], body: bytes,
      requestSent: flags & 1 == 0)
    let verdicts: [AnswerVerdict] = [.delivered(nil), .throttled, .retry, .dropped(nil)]
    let answer: Answer =
      flags & 2 == 0
      ? .answered(response, verdict: verdicts[Int(flags >> 2) % 4])
      : .failed(
        [.timedOut, .cannotConnect, .connectionLost, .invalidURL, .headersTooLarge][Int(flags >> 2) % 5])
    let decision = policy.decision(on: answer, attempts: attempts, now: now, random: random)

    let longest = UInt64(maxWait * 1e9)
    func within(_ time: UInt64, _ bound: UInt64) -> Bool {
      time >= now && (time == .max || time - now <= bound)
    }
    switch decision {
    case .delivered:
      guard case .answered(let answered, .delivered) = answer,
        answered.requestSent || !(200..<300).contains(answered.status)
      else {
        return "delivered on \(answer)"
      }
    case .throttled(let until):
      if !within(until, UInt64(maxRetryAfter * 1e9)) { return "paused until \(until) at \(now)" }
    case .retry(_, let at):
      if !within(at, max(longest, UInt64(maxRetryAfter * 1e9))) { return "retry at \(at) at \(now)" }
      if attempts >= policy.retryLimit { return "retried after \(attempts) of \(policy.retryLimit) attempts" }
    case .giveUp(_, let given):
      if given < policy.retryLimit || given != attempts {
        return "gave up after \(given) of \(policy.retryLimit)"
      }
    case .drop: break
    }
    let backoff = policy.backoff(afterAttempt: attempts, random: random)
    if backoff > longest { return "backoff \(backoff)" }
    if policy.maxRetryInterval >= 0, policy.maxRetryInterval < maxWait,
      Double(backoff) > policy.maxRetryInterval * 1e9 + 1
    {
      return "backoff \(backoff) over maxRetryInterval \(policy.maxRetryInterval)"
    }
    let (_, next) = rescheduled(
      next: reader.uint64(or: 0), last: reader.uint64(or: 0), now: now, cap: policy.maxRetryInterval)
    if next != .max && next > now && next - now > longest { return "rescheduled to \(next) at \(now)" }
    return nil
  }
}

/// Little-endian fields read off the front of fuzz input; a default once the bytes run out.
private struct FuzzBytes {
  var rest: ArraySlice<UInt8>

  init(_ bytes: [UInt8]) { rest = bytes[...] }

  var byte: UInt8 {
    mutating get { rest.popFirst() ?? 0 }
  }

  mutating func uint64(or fallback: UInt64) -> UInt64 {
    guard rest.count >= 8 else { return fallback }
    defer { rest = rest.dropFirst(8) }
    return rest.prefix(8).reversed().reduce(0) { $0 << 8 | UInt64($1) }
  }

  mutating func int(or fallback: Int) -> Int {
    Int(truncatingIfNeeded: uint64(or: UInt64(bitPattern: Int64(fallback))))
  }

  mutating func double(or fallback: Double) -> Double { Double(bitPattern: uint64(or: fallback.bitPattern)) }
}
