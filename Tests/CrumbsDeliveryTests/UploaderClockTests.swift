// UploaderClockTests.swift — delivery under a wall clock that was wrong: schedules made while it
// ran a year ahead, or read back from a delivery.json that says "in ten years", never hold a
// report back longer than the retry policy's longest wait once the clock is right. The clock is
// the uploader's injectable one, moved by hand (backwards too).

import CrumbsDeliveryTestSupport
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct UploaderClockTests {
  static let year: UInt64 = 365 * 86_400 * 1_000_000_000

  @Test func aReportAttemptedWhileTheClockWasAYearAheadIsRetriedOnceTheClockIsRight() throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer { index, _ in index == 0 ? .respond(503) : .respond(200) }
    defer { server.stop() }
    let clock = ManualClock()
    let uploader = otlpUploader(fixture, server, clock: clock)
    let right = clock.now()
    clock.set(right + Self.year)
    let first = try #require(uploader.deliverPendingNow().results.first)
    #expect(first.nextAttempt == right + Self.year + 10_000_000_000)

    // The clock is corrected: the wait (10 s) starts now, and is written back.
    clock.set(right)
    let waiting = uploader.deliverPendingNow()
    #expect(waiting.results.isEmpty)
    #expect(waiting.nextDueUnixNano == right + 10_000_000_000)
    let history = try #require(
      try fixture.store.load(id: fixture.ids[0]).deliveryState().destinations["otlp"])
    #expect(history.nextAttemptUnixNano == right + 10_000_000_000)
    #expect(history.lastAttemptUnixNano == right)
    clock.advance(seconds: 10)
    #expect(uploader.deliverPendingNow().finished.map(\.state) == [.sent])
    #expect(server.requests.count == 2)
  }

  @Test func aScheduleTooFarAheadInDeliveryJSONIsClampedToTheLongestWait() throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let clock = ManualClock()
    let now = clock.now()
    // Attempted "now" (so not a clock that ran ahead), but next in ten years: a tampered or
    // damaged file, or one written under other settings.
    var history = DeliveryState.Destination()
    history.attempts = 1
    history.lastAttemptUnixNano = now
    history.nextAttemptUnixNano = now + 10 * Self.year
    history.lastStatus = 503
    var state = DeliveryState()
    state.destinations["otlp"] = history
    try fixture.reports[0].writeDeliveryState(state)
    let uploader = otlpUploader(
      fixture, server, clock: clock, settings: settings { $0.maxRetryInterval = 600 })
    let waiting = uploader.deliverPendingNow()
    #expect(waiting.results.isEmpty)
    #expect(waiting.nextDueUnixNano == now + 600_000_000_000)
    clock.advance(seconds: 600)
    #expect(uploader.deliverPendingNow().finished.map(\.state) == [.sent])
  }

  @Test func aPauseAskedForWhileTheClockWasAYearAheadEndsOnceTheClockIsRight() throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer { index, _ in
      index == 0 ? .respond(429, headers: ["Retry-After": "120"]) : .respond(200)
    }
    defer { server.stop() }
    let clock = ManualClock()
    let uploader = otlpUploader(fixture, server, clock: clock)
    let right = clock.now()
    clock.set(right + Self.year)
    #expect(
      uploader.deliverPendingNow().results.map(\.outcome) == [
        .throttled(untilUnixNano: right + Self.year + 120_000_000_000)
      ])
    clock.set(right)
    let waiting = uploader.deliverPendingNow()
    #expect(waiting.results.isEmpty)
    #expect(waiting.nextDueUnixNano == right + 120_000_000_000)
    clock.advance(seconds: 120)
    #expect(uploader.deliverPendingNow().finished.map(\.state) == [.sent])
  }

  @Test func sendsCountedWhileTheClockWasAheadLeaveTheRateLimitAMinuteLater() throws {
    let fixture = try ReportFixture(count: 2)
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let clock = ManualClock()
    let uploader = otlpUploader(fixture, server, clock: clock, settings: settings { $0.reportsPerMinute = 1 })
    let right = clock.now()
    clock.set(right + Self.year)
    #expect(uploader.deliverPendingNow().results.map(\.outcome) == [.delivered(status: 200), .limitReached])
    clock.set(right)
    #expect(uploader.deliverPendingNow().results.map(\.outcome) == [.limitReached])
    clock.advance(seconds: 60)
    #expect(uploader.deliverPendingNow().results.map(\.outcome) == [.delivered(status: 200)])
    #expect(server.requests.count == 2)
  }
}
