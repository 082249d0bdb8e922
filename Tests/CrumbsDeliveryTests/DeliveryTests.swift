import CrumbsTestSupport
import Foundation
import Synchronization
import Testing

@testable import Crumbs
@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

// DeliveryTests.swift — delivery against real HTTP servers on loopback (LoopbackHTTPServer):
// what was sent is decoded with the official OTLP decoder (Tests/Tools/decode_otlp.py, PyPI
// opentelemetry-proto); retry, drop, throttle, eviction and restart behaviour are driven by a
// manual clock, so no assertion depends on elapsed time.
#if canImport(Glibc)
  import Glibc
#endif

/// Wall time the test moves by hand.
final class ManualClock: Sendable {
  private let nanoseconds = Mutex<UInt64>(1_900_000_000_000_000_000)
  func now() -> UInt64 { nanoseconds.withLock { $0 } }
  func advance(seconds: Double) { nanoseconds.withLock { $0 += UInt64(seconds * 1e9) } }
}

/// Records every hook call.
final class RecordingDelegate: ReportUploaderDelegate {
  let responses = Mutex<[DeliveryResult]>([])
  let failures = Mutex<[DeliveryFailure]>([])
  let limits = Mutex<[DeliveryResult]>([])
  let succeeded = Mutex<[String]>([])
  let failed = Mutex<[DeliveryResult]>([])
  let requests = Mutex<[String]>([])
  let addAttribute: Bool
  init(addAttribute: Bool = false) { self.addAttribute = addAttribute }

  func willSend(_ report: CrashReport) -> CrashReport {
    guard addAttribute else { return report }
    var report = report
    report.attributes["added.by.delegate"] = "yes"
    return report
  }
  func willSendRequest(_ request: DeliveryRequest) -> DeliveryRequest {
    requests.withLock { $0.append(request.reportID) }
    var request = request
    request.headers.append(HTTPHeader("X-Signed", "by-delegate"))
    return request
  }
  func serverDidRespond(_ result: DeliveryResult) { responses.withLock { $0.append(result) } }
  func serverDidFail(_ failure: DeliveryFailure) { failures.withLock { $0.append(failure) } }
  func didReachLimit(_ result: DeliveryResult) { limits.withLock { $0.append(result) } }
  func didSucceedSending(_ report: CrashReport, results: [DeliveryResult]) {
    succeeded.withLock { $0.append(report.id) }
  }
  func didFailSending(_ report: CrashReport, result: DeliveryResult) { failed.withLock { $0.append(result) } }
}

/// A store with real reports: one made by the post-mortem processor from a ring left by a
/// "dead" session, and clones of it with new ids (each a little newer than the last).
struct ReportFixture {
  let directory = TestDirectory()
  let store: ReportStore
  let reports: [StoredReport]

  init(count: Int = 1, extraAttachmentBytes: Int = 0, messages: Int = 40) throws {
    let rings = try RingDirectory(path: directory.path)
    let ring = try rings.createRing()
    for index in 0..<messages {
      ring.append(
        "step \(index)", level: index % 10 == 9 ? .warning : .info, type: .manual,
        attributes: ["n": String(index)])
    }
    ring.close(clean: false)
    store = try ReportStore(directory: directory.path)
    let outcome = PostMortemProcessor(directory: rings, store: store).run()
    let original = try #require(outcome.reports.first)
    var reports = [original]
    let trail = try Syscall.readFile(original.attachmentPath(TrailAttachment.name))
    for index in 1..<max(count, 1) {
      var clone = original.report
      clone.id = SessionID().description
      clone.sessionID = clone.id
      clone.observedTimeUnixNano += UInt64(index) * 1_000_000
      var attachments: [(name: String, bytes: [UInt8])] = [(TrailAttachment.name, trail)]
      if extraAttachmentBytes > 0 {
        var generator = SystemRandomNumberGenerator()
        attachments.append(
          ("blob.bin", (0..<extraAttachmentBytes).map { _ in UInt8.random(in: 0...255, using: &generator) }))
        clone.attachments.append(
          CrashReport.Attachment(
            name: "blob.bin", contentType: "application/octet-stream", size: extraAttachmentBytes))
      }
      reports.append(try store.store(clone, attachments: attachments))
    }
    self.reports = reports
  }

  var ids: [String] { reports.map(\.report.id) }

  /// Every byte stored under the directory, as text (to look for secrets).
  func everythingStored() -> String {
    var text = ""
    let enumerator = FileManager.default.enumerator(atPath: directory.path)
    while let name = enumerator?.nextObject() as? String {
      if let data = FileManager.default.contents(atPath: directory.path + "/" + name) {
        text += String(decoding: data, as: UTF8.self)
      }
    }
    return text
  }
}

func settings(_ change: (inout DeliverySettings) -> Void = { _ in }) -> DeliverySettings {
  var settings = DeliverySettings()
  settings.retryInterval = 10
  change(&settings)
  return settings
}

@Suite struct DeliveryTests {
  // MARK: Encoding

  @Test func protobufWriterProducesTheWireFormat() {
    var writer = ProtobufWriter()
    writer.varint(1, 300)
    writer.fixed64(2, 1)
    writer.string(3, "hi")
    writer.varint(4, 0)  // default: omitted
    writer.message(5) { $0.bool(1, true) }
    writer.int64(6, -1)
    #expect(
      writer.bytes == [
        0x08, 0xAC, 0x02, 0x11, 1, 0, 0, 0, 0, 0, 0, 0, 0x1A, 2, 0x68, 0x69, 0x2A, 2, 0x08, 1,
        0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,
      ])
  }

  @Test func retryAfterReadsSecondsAndHTTPDates() {
    let now: UInt64 = 1_700_000_000 * 1_000_000_000
    #expect(ReportUploader.retryAfter("120", now: now, default: 60) == 120_000_000_000)
    // 2023-11-14T22:13:20Z is 1_700_000_000; 30 s later:
    #expect(
      ReportUploader.retryAfter("Tue, 14 Nov 2023 22:13:50 GMT", now: now, default: 60) == 30_000_000_000)
    #expect(ReportUploader.retryAfter("soon", now: now, default: 60) == 60_000_000_000)
    #expect(ReportUploader.retryAfter(nil, now: now, default: 5) == 5_000_000_000)
  }

  @Test(arguments: [OTLPDestination.Encoding.protobuf, .json])
  func otlpRequestDecodesWithTheOfficialDecoder(encoding: OTLPDestination.Encoding) throws {
    let fixture = try ReportFixture()
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let destination = OTLPDestination(
      endpoint: server.baseURL, headers: [HTTPHeader("Authorization", "Bearer s3cret-otlp", isSecret: true)],
      encoding: encoding, breadcrumbsAsLogRecords: true)
    let delegate = RecordingDelegate(addAttribute: true)
    let uploader = ReportUploader(store: fixture.store, destinations: [destination], delegate: delegate)
    let pass = uploader.deliverPendingNow()
    #expect(pass.finished.map(\.state) == [.sent])

    let request = try #require(server.requests.first)
    #expect(server.requests.count == 1)
    #expect(request.target == "/v1/logs")
    #expect(
      request.headers["content-type"]
        == (encoding == .protobuf ? "application/x-protobuf" : "application/json"))
    #expect(request.headers["authorization"] == "Bearer s3cret-otlp")
    #expect(request.headers["x-signed"] == "by-delegate")

    let stored = try fixture.store.load(id: fixture.ids[0])
    #expect(stored.state == .sent)
    let report = stored.report
    let decoded = try decodeOTLP(request.body, json: encoding == .json)
    let records = try #require(decoded["records"] as? [[String: Any]])
    let crash = try #require(records.first)
    let attributes = try #require(crash["attributes"] as? [String: Any])
    #expect(crash["event_name"] as? String == "device.crash")
    #expect(attributes["event.name"] as? String == "device.crash")
    #expect(crash["severity_number"] as? Int == 21)
    #expect(crash["time_unix_nano"] as? String == String(report.timeUnixNano))
    #expect(crash["observed_time_unix_nano"] as? String == String(report.observedTimeUnixNano))
    #expect(attributes["exception.type"] as? String == report.exceptionType)
    #expect(attributes["exception.message"] as? String == report.exceptionMessage)
    #expect(attributes["exception.stacktrace"] as? String == report.exceptionStacktrace)
    #expect(attributes["session.id"] as? String == report.sessionID)
    #expect(attributes["crumbs.report.id"] as? String == report.id)
    #expect(attributes["added.by.delegate"] as? String == "yes")
    let resource = try #require(decoded["resource"] as? [String: Any])
    #expect(resource["service.name"] as? String == report.resource["service.name"])
    #expect(resource["os.type"] as? String == "linux")
    // The bytes attribute is the LZ4 trail: decompressed by the lz4 CLI, it is the stored trail.
    let trailText = try #require(decoded["trail_jsonl"] as? String)
    let storedTrail = try LZ4Frame.decompress(
      try Syscall.readFile(stored.attachmentPath(TrailAttachment.name)))
    #expect(trailText == String(decoding: storedTrail, as: UTF8.self))

    // One record per breadcrumb, stitched to the crash, each with its own time and severity.
    let entries = try stored.trailEntries()
    #expect(records.count == 1 + entries.count)
    for (record, entry) in zip(records.dropFirst(), entries) {
      let crumb = try #require(record["attributes"] as? [String: Any])
      #expect(record["event_name"] as? String == "crumbs.breadcrumb")
      #expect(crumb["session.id"] as? String == report.sessionID)
      #expect(crumb["crumbs.report.id"] as? String == report.id)
      #expect(record["body"] as? String == entry.message)
      #expect(record["time_unix_nano"] as? String == String(ISO8601.nanoseconds(entry.timestamp)!))
      #expect(record["severity_number"] as? Int == (entry.level == "warning" ? 13 : 9))
    }
    #expect(delegate.succeeded.withLock { $0 } == [report.id])
    #expect(!fixture.everythingStored().contains("s3cret-otlp"))
  }

  @Test func backtraceSubmissionIsMultipartWithTheJSONReportAndBreadcrumbs() throws {
    let fixture = try ReportFixture(count: 2, extraAttachmentBytes: 1000)
    let server = try LoopbackHTTPServer(status: 200, body: "{\"response\":\"ok\"}")
    defer { server.stop() }
    let token = "tok/en+s3cret"
    let destination = BacktraceDestination(endpoint: server.baseURL, token: token)
    let uploader = ReportUploader(store: fixture.store, destinations: [destination])
    let pass = uploader.deliverPendingNow()
    #expect(pass.finished.count == 2 && pass.finished.allSatisfy { $0.state == .sent })
    #expect(server.requests.count == 2)

    let request = try #require(server.requests.last)  // the clone, with the extra attachment
    let report = fixture.reports[1].report
    #expect(request.target == "/post?format=json&token=tok%2Fen%2Bs3cret")
    let contentType = try #require(request.headers["content-type"])
    let boundary = try #require(contentType.components(separatedBy: "boundary=").last)
    let parts = multipartParts(request.body, boundary: boundary)
    #expect(parts.map(\.name) == ["upload_file", "attachment_bt-breadcrumbs-0", "attachment_blob.bin"])
    #expect(parts[2].body.count == 1000)

    let json = try #require(try JSONSerialization.jsonObject(with: Data(parts[0].body)) as? [String: Any])
    #expect(json["uuid"] as? String == report.id)
    #expect(json["timestamp"] as? Int == Int(report.timeUnixNano / 1_000_000_000))
    #expect(json["lang"] as? String == "swift")
    #expect(json["agent"] as? String == "crumbs")
    #expect(json["agentVersion"] as? String == CrumbsVersion.string)
    #expect((json["langVersion"] as? String)?.isEmpty == false)
    let mainThread = try #require(json["mainThread"] as? String)
    let threads = try #require(json["threads"] as? [String: Any])
    let thread = try #require(threads[mainThread] as? [String: Any])
    #expect(thread["fault"] as? Bool == true)
    #expect(thread["stack"] is [Any])
    let attributes = try #require(json["attributes"] as? [String: Any])
    #expect(attributes["error.message"] as? String == report.exceptionMessage)
    #expect(attributes["application"] as? String == report.resource["service.name"])
    #expect(attributes["crumbs.report.id"] as? String == report.id)
    for value in attributes.values { #expect(value is String || value is NSNumber) }
    #expect(json["annotations"] is [String: Any])

    let breadcrumbs = try #require(
      try JSONSerialization.jsonObject(with: Data(parts[1].body)) as? [[String: Any]])
    #expect(breadcrumbs.count == report.breadcrumbs.count)
    #expect(attributes["breadcrumbs.lastId"] as? Int == breadcrumbs.count)
    #expect(breadcrumbs.last?["id"] as? Int == breadcrumbs.count)
    #expect(breadcrumbs.first?["message"] as? String == "step 0")
    #expect(breadcrumbs.first?["type"] as? String == "manual")
    #expect(
      Set(breadcrumbs.first?.keys.map { $0 } ?? []) == [
        "id", "timestamp", "level", "type", "message", "attributes",
      ])
    #expect(!fixture.everythingStored().contains("s3cret"))
  }

  // MARK: Answers

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
    #expect(
      result.outcome == .willRetry(reason: "HTTP 503", nextAttemptUnixNano: clock.now() + 20_000_000_000))  // doubled
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
      transport: URLSessionTransport(timeout: 0.5), delegate: delegate)
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

  @Test func aServerDyingMidUploadNeitherKillsTheProcessNorLosesTheReport() throws {
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
      transport: URLSessionTransport(timeout: 10), clock: { clock.now() })
    // Only the clone carries 6 MiB; send it first.
    try fixture.store.drop(id: fixture.ids[0], reason: "not part of this test")
    let result = try #require(uploader.deliverPendingNow().results.first)
    dying.stop()
    guard case .willRetry(let reason, _) = result.outcome else {
      Issue.record("expected a retry, got \(result)")
      return
    }
    // libcurl met the reset as EPIPE ("Send failure: Broken pipe") and the process lives on.
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

  // MARK: Semantics

  @Test func attemptCountsSurviveARestart() throws {
    let fixture = try ReportFixture()
    let failing = Mutex(true)
    let server = try LoopbackHTTPServer { _, _ in failing.withLock { $0 } ? .respond(500) : .respond(204) }
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
    #expect(state?.lastError == "HTTP 500")
    #expect(state?.nextAttemptUnixNano == clock.now() + 20_000_000_000)

    failing.withLock { $0 = false }
    clock.advance(seconds: 20)
    let final = try makeUploader().deliverPendingNow()
    #expect(final.results.map(\.outcome) == [.delivered(status: 204)])
    #expect(final.results.first?.attempts == 3)
    #expect(try fixture.store.load(id: fixture.ids[0]).state == .sent)
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
      } ? .respond(500) : .respond(200)
    }
    defer { server.stop() }
    let clock = ManualClock()
    let noRetry = settings { $0.retryBehaviour = .none }
    let uploader = ReportUploader(
      store: fixture.store, destinations: [OTLPDestination(endpoint: server.baseURL)], settings: noRetry,
      clock: { clock.now() })
    #expect(
      uploader.deliverPendingNow().results.first?.outcome
        == .willRetry(reason: "HTTP 500", nextAttemptUnixNano: 0))
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
    let byCount = ReportUploader(
      store: fixture.store, destinations: [], settings: settings { $0.maxRecordCount = 3 })
    let evicted = byCount.enforceLimits()
    #expect(evicted.map(\.reportID) == Array(fixture.ids.prefix(2)))
    let first = try fixture.store.load(id: fixture.ids[0])
    #expect(first.state == .dropped)
    #expect(first.droppedReason() == "evicted: more than 3 pending reports (maxRecordCount)")
    #expect(fixture.store.list(.pending).reports.map(\.report.id) == Array(fixture.ids.suffix(3)))

    // Three pending reports of ~400 kB are over 1 MB: the oldest pending one goes (its
    // attachments deleted, the record kept).
    let bySize = ReportUploader(
      store: fixture.store, destinations: [], settings: settings { $0.maxDatabaseSize = 1 })
    let sizeEvictions = bySize.enforceLimits()
    #expect(sizeEvictions.map(\.reportID) == [fixture.ids[2]])
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
    while fixture.store.list(.sent).reports.isEmpty, Date() < deadline { usleep(10_000) }
    #expect(fixture.store.list(.sent).reports.map(\.report.id) == fixture.ids)

    // A report whose trail file is gone is still delivered (the record names what is missing).
    var another = fixture.reports[0].report
    another.id = SessionID().description
    try fixture.store.store(another)
    uploader.wake()
    while fixture.store.list(.sent).reports.count < 2, Date() < deadline { usleep(10_000) }
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

  @Test func cliSendsWithAProgressLineAndListsAndDecodes() throws {
    let fixture = try ReportFixture(count: 2)
    let server = try LoopbackHTTPServer(status: 200)
    defer { server.stop() }
    let send = try CLIProcess.run([
      "reports", "send", "--dir", fixture.directory.path, "--otlp", server.baseURL, "--secret-header",
      "Authorization: Bearer s3cret-cli",
    ])
    #expect(send.status == 0)
    let lines = send.stdout.split(separator: "\n").map(String.init)
    #expect(lines.contains("[1/2] sent \(fixture.ids[0].prefix(8))… → 200"))
    #expect(lines.contains("[2/2] sent \(fixture.ids[1].prefix(8))… → 200"))
    #expect(!(send.stdout + send.stderr).contains("s3cret-cli"))
    #expect(server.requests.allSatisfy { $0.headers["authorization"] == "Bearer s3cret-cli" })

    let list = try CLIProcess.run(["reports", "list", "--dir", fixture.directory.path, "--json"])
    let listed = try #require(
      try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
    #expect(listed.map { $0["state"] as? String } == ["sent", "sent"])

    let show = try CLIProcess.run([
      "reports", "show", String(fixture.ids[0].prefix(8)), "--dir", fixture.directory.path,
    ])
    #expect(show.status == 0)
    #expect(show.stdout.contains("otlp: 1 attempt(s), delivered"))

    let sent = try fixture.store.load(id: fixture.ids[0])
    let decoded = try CLIProcess.run(["report", "decode", sent.attachmentPath(TrailAttachment.name)])
    let trail = try LZ4Frame.decompress(try Syscall.readFile(sent.attachmentPath(TrailAttachment.name)))
    #expect(decoded.stdout == String(decoding: trail, as: UTF8.self))
    let pretty = try CLIProcess.run(["report", "decode", sent.reportPath])
    #expect(pretty.status == 0)
    #expect(try ReportStore.decode(Array(pretty.stdout.utf8)) == sent.report)
  }
}

extension DeliveryResult {
  var nextAttempt: UInt64 {
    if case .willRetry(_, let next) = outcome { return next }
    return 0
  }
}

/// The `crumbs.report.id` in an OTLP protobuf body (found by its key; the value follows).
func reportID(ofOTLP request: CapturedRequest) -> String? {
  let key = Array("crumbs.report.id".utf8)
  guard let range = request.body.firstRange(of: key) else { return nil }
  // KeyValue.value (0x12, len) → AnyValue.string_value (0x0A, len) → 36 bytes.
  let start = range.upperBound + 4
  guard start + 36 <= request.body.count else { return nil }
  return String(decoding: request.body[start..<(start + 36)], as: UTF8.self)
}

/// The parts of a multipart/form-data body: name and body.
func multipartParts(_ body: [UInt8], boundary: String) -> [(name: String, body: [UInt8])] {
  let delimiter = Array("--\(boundary)".utf8)
  var parts: [(String, [UInt8])] = []
  var chunks: [ArraySlice<UInt8>] = []
  var rest = body[...]
  while let range = rest.firstRange(of: delimiter) {
    chunks.append(rest[..<range.lowerBound])
    rest = rest[range.upperBound...]
  }
  for chunk in chunks.dropFirst() {
    guard let split = chunk.firstRange(of: Array("\r\n\r\n".utf8)) else { continue }
    let head = String(decoding: chunk[..<split.lowerBound], as: UTF8.self)
    guard let nameStart = head.range(of: "name=\"") else { continue }
    let name = String(head[nameStart.upperBound...].prefix { $0 != "\"" })
    var content = Array(chunk[split.upperBound...])
    if content.suffix(2) == [13, 10] { content.removeLast(2) }
    parts.append((name, content))
  }
  return parts
}
