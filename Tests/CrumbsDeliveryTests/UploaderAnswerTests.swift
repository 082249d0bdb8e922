// UploaderAnswerTests.swift — what the uploader does with each kind of answer (2xx, 413, other
// 4xx, 429 with Retry-After, 5xx, timeout, refused, a reset mid-upload), driven by real loopback
// servers and a manual clock, so no assertion depends on elapsed time.

import CrumbsDeliveryTestSupport
import CrumbsTestSupport
import Synchronization
import Testing

@testable import CrumbsDelivery
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct UploaderAnswerTests {
  @Test func retryAfterReadsSecondsAndHTTPDates() {
    let now: UInt64 = 1_700_000_000 * 1_000_000_000
    #expect(RetryPolicy.retryAfter("120", now: now, default: 60) == 120_000_000_000)
    // 2023-11-14T22:13:20Z is 1_700_000_000; 30 s later:
    #expect(
      RetryPolicy.retryAfter("Tue, 14 Nov 2023 22:13:50 GMT", now: now, default: 60) == 30_000_000_000)
    #expect(RetryPolicy.retryAfter("soon", now: now, default: 60) == 60_000_000_000)
    #expect(RetryPolicy.retryAfter(nil, now: now, default: 5) == 5_000_000_000)
  }

  @Test func retryAfterOutOfEveryRangeIsTheDefaultOrADayAndNeverTraps() throws {
    let now: UInt64 = 1_700_000_000 * 1_000_000_000
    let day: UInt64 = 86_400_000_000_000
    for unusable in [
      "Sun, 06 Nov -2147483648 08:49:37 GMT", "Sun, 06 Nov 2147483647 08:49:37 GMT",
      "Sun, 06 Nov 99999 08:49:37 GMT", "Sun, 06 Nov 0 08:49:37 GMT", "Sun, 2147483647 Nov 1994 08:49:37 GMT",
      "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT",
      "Sun, 06 Nov 1994 -1:00:00 GMT", "Sun, 06 Nov 1994 08::37 GMT", "-5", "-inf", "nan", "",
    ] {
      #expect(RetryPolicy.retryAfter(unusable, now: now, default: 60) == 60_000_000_000, "\(unusable)")
    }
    for tooLong in ["99999999999999999999999999999999", "1e309", "inf", "Fri, 31 Dec 9999 23:59:59 GMT"] {
      #expect(RetryPolicy.retryAfter(tooLong, now: now, default: 60) == day, "\(tooLong)")
    }
    // A date in the past, the leap second, and no wait at all.
    #expect(RetryPolicy.retryAfter("Sat, 01 Jan 0001 00:00:00 GMT", now: now, default: 60) == 0)
    #expect(RetryPolicy.httpDate("Wed, 31 Dec 2008 23:59:60 GMT") == 1_230_768_000)
    #expect(RetryPolicy.retryAfter("-0", now: now, default: 60) == 0)
    // A default that is no wait (negative, NaN) waits nothing rather than trapping.
    #expect(RetryPolicy.retryAfter(nil, now: now, default: -1) == 0)
    #expect(RetryPolicy.retryAfter("soon", now: now, default: .nan) == 0)
    // Attempt counts come from delivery.json: any Int gives a wait within the settings.
    let directory = TestDirectory()
    let uploader = ReportUploader(
      store: try ReportStore(directory: directory.path), destinations: [], settings: settings(),
      random: { 0 })
    #expect(uploader.backoff(afterAttempt: .min) == 10_000_000_000)
    #expect(uploader.backoff(afterAttempt: .max) == 3_600_000_000_000)
    // A clock at its end pins the pause there.
    let answer = HTTPResponse(status: 429, headers: ["Retry-After": "120"])
    #expect(RetryPolicy.pausedUntil(answer, now: .max - 1, default: 60) == .max)
    #expect(RetryPolicy.pausedUntil(answer, now: now, default: 60) == now + 120_000_000_000)
  }

  /// The one retry policy (RetryPolicy.swift), as a pure function: each class of answer, the
  /// limit, the Retry-After floor, and inputs no server or settings should be able to trap on.
  @Test func retryPolicyDecidesEachClassOfAnswer() {
    let policy = RetryPolicy(
      retryLimit: 3, retryInterval: 10, maxRetryInterval: 100, jitter: 0.5, defaultRetryAfter: 30)
    let now: UInt64 = 1_700_000_000_000_000_000
    func decide(
      _ status: Int, _ verdict: AnswerVerdict, headers: [String: String] = [:], sent: Bool = true,
      attempts: Int = 1
    )
      -> RetryPolicy.Decision
    {
      policy.decision(
        on: .answered(
          HTTPResponse(status: status, headers: headers, body: Array("no".utf8), requestSent: sent),
          verdict: verdict),
        attempts: attempts, now: now, random: 0)
    }
    #expect(decide(200, .delivered(nil)) == .delivered(nil))
    #expect(
      decide(200, .delivered(nil), sent: false)
        == .retry(reason: "HTTP 200 answered before the request was sent", at: now + 10_000_000_000))
    #expect(decide(503, .retry, attempts: 2) == .retry(reason: "HTTP 503", at: now + 20_000_000_000))
    // The backoff is capped, and jitter takes up to its fraction off.
    #expect(policy.backoff(afterAttempt: 9, random: 0) == 100_000_000_000)
    #expect(policy.backoff(afterAttempt: 1, random: 0.999_999) > 5_000_000_000)
    #expect(policy.backoff(afterAttempt: 1, random: 1) == 5_000_000_000)
    // Never sooner than the server's Retry-After.
    #expect(
      decide(503, .retry, headers: ["Retry-After": "45"])
        == .retry(reason: "HTTP 503", at: now + 45_000_000_000))
    #expect(decide(503, .retry, attempts: 3) == .giveUp(lastFailure: "HTTP 503", attempts: 3))
    #expect(decide(503, .retry, attempts: 3).reason == "gave up after 3 attempts: HTTP 503")
    #expect(decide(429, .throttled, attempts: 3) == .throttled(until: now + 30_000_000_000))
    #expect(decide(429, .throttled, headers: ["Retry-After": "7"]) == .throttled(until: now + 7_000_000_000))
    #expect(decide(413, .dropped(nil)) == .drop(reason: "HTTP 413: no"))
    #expect(decide(400, .dropped("bad record")) == .drop(reason: "HTTP 400: bad record"))
    #expect(
      policy.decision(on: .failed(.timedOut), attempts: 1, now: now, random: 0)
        == .retry(reason: "timed out", at: now + 10_000_000_000))
    #expect(
      policy.decision(on: .failed(.invalidURL), attempts: 1, now: now, random: 0)
        == .drop(reason: "invalid URL"))
    // Hostile inputs: any attempt count, random draw, clock and setting gives an answer.
    let odd = RetryPolicy(
      retryLimit: .min, retryInterval: .nan, maxRetryInterval: .infinity, jitter: .infinity,
      defaultRetryAfter: -1)
    for attempts in [Int.min, -1, 0, 1, 64, Int.max] {
      for random in [-1, 0, 0.5, 1, 2, Double.nan, .infinity] {
        #expect(policy.backoff(afterAttempt: attempts, random: random) <= 100_000_000_000)
        #expect(odd.backoff(afterAttempt: attempts, random: random) == 0)
        _ = policy.decision(on: .failed(.cannotConnect), attempts: attempts, now: .max, random: random)
      }
    }
    #expect(
      policy.decision(on: .failed(.connectionLost), attempts: 1, now: .max, random: 0)
        == .retry(reason: "connection lost", at: .max))
  }

  /// A schedule made under a clock that read ahead starts its wait again now; none lies further
  /// than the cap from now.
  @Test func retryPolicyReschedulesUnderAWrongClock() {
    let now: UInt64 = 1_700_000_000_000_000_000
    let year: UInt64 = 365 * 86_400 * 1_000_000_000
    let (last, next) = RetryPolicy.rescheduled(
      next: now + year + 60_000_000_000, last: now + year, now: now, cap: 3600)
    #expect(last == now)
    #expect(next == now + 60_000_000_000)
    let (_, capped) = RetryPolicy.rescheduled(next: now + year, last: now, now: now, cap: 3600)
    #expect(capped == now + 3_600_000_000_000)
    #expect(RetryPolicy.rescheduled(next: .max, last: .max, now: .max, cap: .nan) == (.max, .max))
  }

  @Test func serverErrorsAreRetriedWithBackoffUntilTheLimitThenDropped() throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer(status: 503)
    defer { server.stop() }
    let clock = ManualClock()
    let delegate = RecordingDelegate()
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)],
      settings: settings { $0.retryLimit = 3 }, delegate: delegate, clock: { clock.now() }, random: { 0 })
    let id = fixture.ids[0]

    let start = clock.now()
    var result = try #require(uploader.deliverPendingNow().results.first)
    #expect(result.outcome == .willRetry(reason: "HTTP 503", nextAttemptUnixNano: start + 10_000_000_000))
    // Not due yet: nothing is sent.
    #expect(uploader.deliverPendingNow().results.isEmpty)
    #expect(server.requests.count == 1)
    clock.advance(seconds: 10)
    result = try #require(uploader.deliverPendingNow().results.first)
    // The interval doubled.
    #expect(
      result.outcome == .willRetry(reason: "HTTP 503", nextAttemptUnixNano: clock.now() + 20_000_000_000))
    clock.advance(seconds: 20)
    result = try #require(uploader.deliverPendingNow().results.first)
    #expect(result.outcome == .dropped(reason: "gave up after 3 attempts: HTTP 503"))
    #expect(server.requests.count == 3)
    clock.advance(seconds: 1000)
    #expect(uploader.deliverPendingNow().results.isEmpty)
    #expect(server.requests.count == 3)

    let dropped = try fixture.store.load(id: id)
    #expect(dropped.state == .dropped)
    #expect(dropped.droppedReason() == "otlp: HTTP 503")
    #expect(dropped.deliveryState().destinations["otlp"]?.attempts == 3)
    #expect(delegate.responses.withLock { $0.count } == 3)
    #expect(delegate.failed.withLock { $0.count } == 3)
  }

  @Test(arguments: [301, 302, 303, 307, 308])
  func redirectsAreNotFollowedAndSecretsStayWithTheOrigin(status: Int) throws {
    let fixture = try ReportFixture()
    let elsewhere = try LoopbackHTTPServer(status: 200)
    defer { elsewhere.stop() }
    let server = try LoopbackHTTPServer(
      status: status, headers: ["Location": elsewhere.baseURL + "/v1/logs"])
    defer { server.stop() }
    let destination = OTLPDestination(
      endpoint: server.baseURL,
      headers: [HTTPHeader("Authorization", "Bearer s3cret-redirect", isSecret: true)])
    let uploader = ReportUploader(store: fixture.store, destinations: [destination], settings: settings())
    let pass = uploader.deliverPendingNow()
    // A failed attempt: retried later, never delivered by a server we were sent to.
    let outcome = try #require(pass.results.first?.outcome)
    guard case .willRetry(let reason, _) = outcome else {
      Issue.record("a \(status) is not a failed attempt: \(outcome)")
      return
    }
    #expect(reason == "HTTP \(status)")
    #expect(server.requests.count == 1)
    #expect(elsewhere.requests.isEmpty, "the redirect was followed")
    #expect(fixture.store.list(.pending).reports.count == 1)
    #expect(fixture.store.list(.sent).reports.isEmpty)
  }

  @Test func payloadTooLargeIsDroppedAtOnceAndNeverRetried() throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer(status: 413)
    defer { server.stop() }
    let clock = ManualClock()
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)], settings: settings(),
      clock: { clock.now() })
    let pass = uploader.deliverPendingNow()
    #expect(pass.results.map(\.outcome) == [.dropped(reason: "HTTP 413")])
    #expect(pass.finished.map(\.state) == [.dropped])
    clock.advance(seconds: 3600)
    uploader.deliverPendingNow()
    #expect(server.requests.count == 1)
    #expect(try fixture.store.load(id: fixture.ids[0]).droppedReason() == "otlp: HTTP 413")
  }

  @Test func otherClientErrorsAreDroppedWithTheServersWordsButNoSecrets() throws {
    let fixture = try ReportFixture()
    // A server that echoes the credential it refused: the stored reason must not repeat it.
    let server = try LoopbackHTTPServer(status: 401, body: "bad credentials: Bearer s3cret-401")
    defer { server.stop() }
    let destination = OTLPDestination(
      endpoint: server.baseURL, headers: [HTTPHeader("Authorization", "Bearer s3cret-401", isSecret: true)])
    let delegate = RecordingDelegate()
    let uploader = ReportUploader(store: fixture.store, destinations: [destination], delegate: delegate)
    let result = try #require(uploader.deliverPendingNow().results.first)
    #expect(result.outcome == .dropped(reason: "HTTP 401: bad credentials: <redacted>"))
    #expect(try fixture.store.load(id: fixture.ids[0]).state == .dropped)
    #expect(!fixture.everythingStored().contains("s3cret-401"))
    #expect(!"\(delegate.responses.withLock { $0 })".contains("s3cret-401"))
    #expect(!HTTPHeader("Authorization", "Bearer s3cret-401", isSecret: true).description.contains("s3cret"))
  }

  @Test func tooManyRequestsPausesTheDestinationUntilRetryAfter() throws {
    let fixture = try ReportFixture(count: 2)
    let server = try LoopbackHTTPServer { index, _ in
      index == 0 ? .respond(429, headers: ["Retry-After": "120"]) : .respond(200)
    }
    defer { server.stop() }
    let clock = ManualClock()
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)], settings: settings(),
      clock: { clock.now() })
    let start = clock.now()
    let first = uploader.deliverPendingNow()
    // One request: the 429 pauses the destination, so the second report is not tried either.
    #expect(first.results.map(\.outcome) == [.throttled(untilUnixNano: start + 120_000_000_000)])
    #expect(first.nextDueUnixNano == start + 120_000_000_000)
    #expect(server.requestsStarted == 1)
    #expect(try fixture.store.load(id: fixture.ids[0]).deliveryState().destinations["otlp"]?.attempts == 0)
    clock.advance(seconds: 119)
    #expect(uploader.deliverPendingNow().results.isEmpty)
    #expect(server.requestsStarted == 1)
    clock.advance(seconds: 1)
    let second = uploader.deliverPendingNow()
    #expect(second.finished.count == 2)
    #expect(Set(server.requests.compactMap(reportID(ofOTLP:))) == Set(fixture.ids))
  }

  @Test func aSlowServerIsATimeoutAndTheReportStaysPending() throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer { _, _ in .stall(seconds: 20) }
    defer { server.stop() }
    let delegate = RecordingDelegate()
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)], settings: settings(),
      transport: CurlTransport(timeout: 0.5), delegate: delegate)
    let result = try #require(uploader.deliverPendingNow().results.first)
    guard case .willRetry(let reason, _) = result.outcome else {
      Issue.record("expected a retry, got \(result)")
      return
    }
    #expect(reason == "timed out")
    #expect(delegate.failures.withLock { $0.map(\.error) } == [.timedOut])
    #expect(try fixture.store.load(id: fixture.ids[0]).state == .pending)
  }

  @Test func aRefusedConnectionIsRetried() throws {
    let fixture = try ReportFixture()
    let delegate = RecordingDelegate()
    let port = refusedPort()
    let token = "s3cret-refused"
    let uploader = ReportUploader(
      store: fixture.store,
      destinations: [BacktraceDestination(endpoint: "http://127.0.0.1:\(port)", token: token)],
      settings: settings(), delegate: delegate)
    let result = try #require(uploader.deliverPendingNow().results.first)
    #expect(result.outcome == .willRetry(reason: "cannot connect", nextAttemptUnixNano: result.nextAttempt))
    let failure = try #require(delegate.failures.withLock { $0.first })
    #expect(failure.error == .cannotConnect)
    #expect(failure.url == "http://127.0.0.1:\(port)/post?format=json&token=<redacted>")
    #expect(!failure.description.contains(token))
    #expect(!fixture.everythingStored().contains(token))
  }

  @Test(arguments: TransportKind.allCases)
  func aServerDyingMidUploadNeitherKillsTheProcessNorLosesTheReport(_ kind: TransportKind) throws {
    // SIGPIPE at its default action would kill this test process if the client wrote to the
    // reset connection without MSG_NOSIGNAL.
    var previous = sigaction()
    var defaultAction = sigaction()
    defaultAction.__sigaction_handler.sa_handler = SIG_DFL
    sigaction(SIGPIPE, &defaultAction, &previous)
    defer { sigaction(SIGPIPE, &previous, nil) }

    let fixture = try ReportFixture(count: 2, extraAttachmentBytes: 6 << 20)
    let dying = try LoopbackHTTPServer { _, _ in .closeAfterReading(bytes: 64 << 10) }
    let clock = ManualClock()
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: dying.baseURL)], settings: settings(),
      transport: kind.transport(timeout: 10), clock: { clock.now() })
    // Only the clone carries 6 MiB; send it first.
    try fixture.store.drop(id: fixture.ids[0], reason: "not part of this test")
    let result = try #require(uploader.deliverPendingNow().results.first)
    dying.stop()
    guard case .willRetry(let reason, _) = result.outcome else {
      Issue.record("expected a retry, got \(result)")
      return
    }
    // The client met the reset as EPIPE (libcurl: "Send failure: Broken pipe") and the process
    // lives on.
    #expect(reason == "connection lost")
    #expect(dying.requests.isEmpty)
    #expect(try fixture.store.load(id: fixture.ids[1]).state == .pending)

    // The next attempt, to a healthy server, delivers it: nothing lost.
    let healthy = try LoopbackHTTPServer(status: 200)
    defer { healthy.stop() }
    clock.advance(seconds: 3600)
    let retry = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: healthy.baseURL)], settings: settings(),
      clock: { clock.now() })
    #expect(retry.deliverPendingNow().finished.map(\.state) == [.sent])
    #expect(healthy.requests.compactMap(reportID(ofOTLP:)) == [fixture.ids[1]])
    #expect(try fixture.store.load(id: fixture.ids[1]).deliveryState().destinations["otlp"]?.attempts == 2)
  }
}
