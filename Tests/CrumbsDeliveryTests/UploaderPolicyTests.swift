// UploaderPolicyTests.swift — retry limits and order, rate limits, eviction, restarts, the
// background thread and several destinations: what survives, what is sent once, what is dropped
// and why.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Synchronization
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct UploaderPolicyTests {
  @Test func attemptCountsSurviveARestart() throws {
    let fixture = try ReportFixture()
    let failing = Mutex(true)
    let server = try LoopbackHTTPServer { _, _ in failing.withLock { $0 } ? .respond(503) : .respond(204) }
    defer { server.stop() }
    let clock = ManualClock()
    func makeUploader() throws -> ReportUploader {
      ReportUploader(
        store: try ReportStore(directory: fixture.directory.path),
        destinations: [OTLPDestination(endpoint: server.baseURL)], settings: settings { $0.retryLimit = 5 },
        clock: { clock.now() }, random: { 0 })
    }
    try makeUploader().deliverPendingNow()
    // "Restart": a new uploader on a newly opened store knows the attempt and its schedule.
    let restarted = try makeUploader()
    #expect(restarted.deliverPendingNow().results.isEmpty)
    #expect(server.requests.count == 1)
    clock.advance(seconds: 10)
    try #require(restarted.deliverPendingNow().results.count == 1)
    let state = try fixture.store.load(id: fixture.ids[0]).deliveryState().destinations["otlp"]
    #expect(state?.attempts == 2)
    #expect(state?.lastError == "HTTP 503")
    #expect(state?.nextAttemptUnixNano == clock.now() + 20_000_000_000)

    failing.withLock { $0 = false }
    clock.advance(seconds: 20)
    let final = try makeUploader().deliverPendingNow()
    #expect(final.results.map(\.outcome) == [.delivered(status: 204)])
    #expect(final.results.first?.attempts == 3)
    #expect(try fixture.store.load(id: fixture.ids[0]).state == .sent)
  }

  @Test func aHeldReportWaitsForItsHoldOrItsReleaseThenGoesOutAsReplaced() throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer { _, _ in .respond(204) }
    defer { server.stop() }
    let clock = ManualClock()
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)],
      settings: settings { _ in },
      clock: { clock.now() })
    // A hang report stored held for a minute (what the watchdog does while the hang goes on).
    var hang = fixture.reports[0].report
    hang.id = SessionID().description
    hang.kind = .hang
    hang.exceptionMessage = "silent for 3.0 s"
    let held = try fixture.store.store(hang, heldUntilUnixNano: clock.now() + 60_000_000_000)
    let first = uploader.deliverPendingNow()
    #expect(!first.results.contains { $0.reportID == hang.id })
    #expect(first.nextDueUnixNano == clock.now() + 60_000_000_000)
    // The hang ended: the report is replaced and released, and the replaced one goes out.
    hang.exceptionMessage = "silent for 3.0 s; the hang ended after 7.3 s"
    try held.replaceReport(hang)
    let second = uploader.deliverPendingNow()
    #expect(second.results.filter { $0.reportID == hang.id }.map(\.outcome) == [.delivered(status: 204)])
    let sent = try #require(server.requests.last)
    #expect(String(decoding: sent.body, as: UTF8.self).contains("the hang ended after 7.3 s"))
    // A report delivery moved on cannot be replaced any more.
    let moved = try fixture.store.load(id: hang.id)
    #expect(moved.state == .sent)
    #expect(throws: ReportStoreError.self) { try held.replaceReport(hang) }
  }

  @Test func flakyServerLosesNothingAndDuplicatesNothing() throws {
    let fixture = try ReportFixture(count: 6)
    // Every other request fails; the accepted ids are recorded.
    let accepted = Mutex<[String]>([])
    let server = try LoopbackHTTPServer { index, _ in index % 2 == 0 ? .respond(502) : .respond(200) }
    defer { server.stop() }
    let clock = ManualClock()
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)],
      settings: settings { $0.retryLimit = 10 }, clock: { clock.now() })
    for _ in 0..<20 where !fixture.store.list(.pending).reports.isEmpty {
      uploader.deliverPendingNow()
      clock.advance(seconds: 3600)
    }
    for (index, request) in server.requests.enumerated() where index % 2 == 1 {
      accepted.withLock { $0.append(reportID(ofOTLP: request) ?? "?") }
    }
    #expect(fixture.store.list(.pending).reports.isEmpty)
    #expect(accepted.withLock { $0 }.sorted() == fixture.ids.sorted())
    #expect(fixture.store.list(.sent).reports.count == 6)
  }

  @Test(arguments: [DeliverySettings.RetryOrder.queue, .stack])
  func retryOrderPicksOldestOrNewestFirst(order: DeliverySettings.RetryOrder) throws {
    let fixture = try ReportFixture(count: 4)
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)],
      settings: settings { $0.retryOrder = order })
    uploader.deliverPendingNow()
    let sentOrder = server.requests.compactMap(reportID(ofOTLP:))
    #expect(sentOrder == (order == .queue ? fixture.ids : fixture.ids.reversed()))
  }

  @Test func retryBehaviourNoneLeavesRetriesToTheNextLaunch() throws {
    let fixture = try ReportFixture()
    let count = Mutex(0)
    let server = try LoopbackHTTPServer { _, _ in
      count.withLock {
        $0 += 1; return $0 == 1
      } ? .respond(503) : .respond(200)
    }
    defer { server.stop() }
    let clock = ManualClock()
    let noRetry = settings { $0.retryBehaviour = .none }
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)], settings: noRetry,
      clock: { clock.now() })
    #expect(
      uploader.deliverPendingNow().results.first?.outcome
        == .willRetry(reason: "HTTP 503", nextAttemptUnixNano: 0))
    clock.advance(seconds: 86_400)
    #expect(uploader.deliverPendingNow().results.isEmpty)
    let nextLaunch = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)], settings: noRetry,
      clock: { clock.now() })
    #expect(nextLaunch.deliverPendingNow().finished.map(\.state) == [.sent])
  }

  @Test func rateLimitStopsThePassAndCallsDidReachLimit() throws {
    let fixture = try ReportFixture(count: 3)
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let clock = ManualClock()
    let delegate = RecordingDelegate()
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)],
      settings: settings { $0.reportsPerMinute = 2 }, delegate: delegate, clock: { clock.now() })
    let first = uploader.deliverPendingNow()
    #expect(first.finished.count == 2)
    #expect(first.results.last?.outcome == .limitReached)
    #expect(delegate.limits.withLock { $0.count } == 1)
    #expect(server.requests.count == 2)
    clock.advance(seconds: 60)
    #expect(uploader.deliverPendingNow().finished.map(\.id) == [fixture.ids[2]])
  }

  @Test func evictionByCountAndSizeTakesTheOldestAndSaysWhy() throws {
    let fixture = try ReportFixture(count: 5, extraAttachmentBytes: 400_000)
    var byCountStore = fixture.store
    byCountStore.limits.maxRecordCount = 3
    let byCount = ReportUploader(store: byCountStore, destinations: [], settings: settings())
    let evicted = byCount.enforceLimits()
    #expect(evicted.map(\.reportID) == Array(fixture.ids.prefix(2)))
    let first = try fixture.store.load(id: fixture.ids[0])
    #expect(first.state == .dropped)
    #expect(first.droppedReason() == "evicted: more than 3 pending reports (maxRecordCount)")
    #expect(fixture.store.list(.pending).reports.map(\.report.id) == Array(fixture.ids.suffix(3)))

    // Three pending reports of ~400 kB are over 1 MB: the two dropped records go first (deleted),
    // then the oldest pending one (its attachments deleted, the record kept).
    var bySizeStore = fixture.store
    bySizeStore.limits.maxDatabaseSize = 1
    let bySize = ReportUploader(store: bySizeStore, destinations: [], settings: settings())
    let sizeEvictions = bySize.enforceLimits()
    #expect(sizeEvictions.map(\.reportID) == Array(fixture.ids.prefix(3)))
    #expect(sizeEvictions.map(\.state) == [.dropped, .dropped, .pending])
    let third = try fixture.store.load(id: fixture.ids[2])
    #expect(third.droppedReason() == "evicted: database over 1 MB (maxDatabaseSize)")
    #expect(!Syscall.fileExists(third.attachmentPath("blob.bin")))
    #expect(Syscall.fileExists(third.reportPath))
  }

  @Test func theBackgroundThreadDeliversAfterWake() throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let delegate = RecordingDelegate()
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)], delegate: delegate)
    uploader.start()
    defer { uploader.stop() }
    let deadline = Date().addingTimeInterval(30)
    while fixture.store.list(.sent).reports.count < fixture.ids.count, Date() < deadline { usleep(10_000) }
    #expect(fixture.store.list(.sent).reports.map(\.report.id) == fixture.ids)

    // A report whose trail file is gone is still delivered (the record names what is missing).
    var another = fixture.reports[0].report
    another.id = SessionID().description
    try fixture.store.store(another)
    uploader.wake()
    // The delegate hears of a delivery after the report moved to sent/: wait for both.
    while fixture.store.list(.sent).reports.count < 2 || delegate.succeeded.withLock({ $0 }).count < 2,
      Date() < deadline
    {
      usleep(10_000)
    }
    #expect(fixture.store.list(.sent).reports.count == 2)
    #expect(server.requests.count == 2)
    #expect(delegate.succeeded.withLock { $0 }.count == 2)
  }

  @Test func twoDestinationsAreTrackedSeparately() throws {
    let fixture = try ReportFixture()
    let good = try LoopbackHTTPServer(status: 200)
    let failing = Mutex(true)
    let flaky = try LoopbackHTTPServer { _, _ in failing.withLock { $0 } ? .respond(503) : .respond(200) }
    defer {
      good.stop()
      flaky.stop()
    }
    let clock = ManualClock()
    let uploader = ReportUploader(
      store: fixture.store,
      destinations: [
        OTLPDestination(endpoint: good.baseURL), BacktraceDestination(endpoint: flaky.baseURL, token: "t"),
      ],
      settings: settings(), clock: { clock.now() })
    uploader.deliverPendingNow()
    #expect(try fixture.store.load(id: fixture.ids[0]).state == .pending)
    failing.withLock { $0 = false }
    clock.advance(seconds: 3600)
    #expect(uploader.deliverPendingNow().finished.map(\.state) == [.sent])
    // The destination that had accepted it is not sent it again.
    #expect(good.requests.count == 1)
    #expect(flaky.requests.count == 2)
  }

  /// Outbox events (the client's session summaries) leave through the uploader like reports:
  /// its hooks, its retry policy (a 503 keeps the event and backs the destination off; a 200
  /// removes it; a 400 refuses it for good, which removes it too) and its rate limit.
  @Test func outboxEventsMeetTheHooksTheRetryPolicyAndTheRateLimit() throws {
    let directory = TestDirectory()
    let answers = Mutex([503, 200, 400])
    let server = try LoopbackHTTPServer { _, _ in
      .respond(answers.withLock { $0.isEmpty ? 200 : $0.removeFirst() })
    }
    defer { server.stop() }
    let clock = ManualClock()
    let delegate = RecordingDelegate()
    let outbox = ListOutbox(["a", "b"])
    let uploader = ReportUploader(
      store: try ReportStore(directory: directory.path),
      destinations: [OTLPDestination(endpoint: server.baseURL)],
      settings: settings { $0.reportsPerMinute = 2 }, delegate: delegate, outbox: outbox,
      clock: { clock.now() },
      random: { 0 })

    // 503 on "a": kept; "b" waits for the destination's backoff too.
    let first = uploader.deliverPendingNow()
    #expect(
      first.events.map(\.outcome) == [
        .willRetry(reason: "HTTP 503", nextAttemptUnixNano: clock.now() + 10_000_000_000)
      ])
    #expect(first.results.isEmpty)
    #expect(outbox.keys == ["a", "b"])
    #expect(uploader.deliverPendingNow().events.isEmpty)
    // Due: "a" is accepted and leaves; "b" meets the rate limit (two requests this minute).
    clock.advance(seconds: 10)
    #expect(uploader.deliverPendingNow().events.map(\.outcome) == [.delivered(status: 200), .limitReached])
    #expect(outbox.keys == ["b"])
    #expect(delegate.limits.withLock { $0.count } == 1)
    // A minute later "b" is refused for good: it leaves too.
    clock.advance(seconds: 60)
    let last = try #require(uploader.deliverPendingNow().events.first)
    if case .dropped = last.outcome {} else { Issue.record("not dropped: \(last)") }
    #expect(outbox.keys.isEmpty)
    // Every request went through willSendRequest, every answer to serverDidRespond.
    #expect(delegate.requests.withLock { $0 } == ["a", "a", "b"])
    #expect(delegate.responses.withLock { $0.count } == 3)
    #expect(server.requests.count == 3)
    #expect(server.requests.allSatisfy { $0.headers["x-signed"] == "by-delegate" })
  }
}

/// An outbox of empty OTLP batches, by key.
final class ListOutbox: DeliveryOutbox {
  let events: Mutex<[OutboxEvent]>

  init(_ keys: [String]) {
    events = Mutex(
      keys.map {
        OutboxEvent(
          id: $0, key: $0,
          batch: OTLPLogBatch(resource: [], scopeName: "test", scopeVersion: "1", records: []))
      })
  }

  var keys: [String] { events.withLock { $0.map(\.key) } }
  func queuedEvents() -> [OutboxEvent] { events.withLock { $0 } }
  func remove(_ event: OutboxEvent) { events.withLock { $0.removeAll { $0.key == event.key } } }
}
