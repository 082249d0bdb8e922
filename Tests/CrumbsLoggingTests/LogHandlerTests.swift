import CrumbsLogging
import CrumbsRecorder
import CrumbsTestSupport
import Logging
import Testing

// swift-log → breadcrumbs: levels, label as category, metadata (handler, provider, event, nested)
// as attributes, alone and inside MultiplexLogHandler, and the filters that keep it cheap.
#if canImport(Glibc)
  import Glibc
#endif

/// A second handler for MultiplexLogHandler that remembers what it was given.
private final class RecordingStream: TextOutputStream, @unchecked Sendable {
  var text = ""
  func write(_ string: String) { text += string }
}

private struct TestFailure: Error, CustomStringConvertible {
  var description: String { "disk on fire" }
}

private func attributes(_ crumb: Breadcrumb?) -> [String: String] {
  Dictionary((crumb?.attributes ?? []).map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
}

@Suite struct LogHandlerTests {
  @Test func eventsBecomeLogBreadcrumbsWithCategoryAndMetadata() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    defer { ring.close() }
    var logger = Logger(label: "app.db") { BreadcrumbLogHandler(label: $0, target: .ring(ring)) }
    logger[metadataKey: "request"] = "r-1"
    logger[metadataKey: "shard"] = .stringConvertible(7)
    logger.info(
      "query done",
      metadata: ["rows": "42", "request": "r-2", "peer": ["host": "db1", "port": .stringConvertible(5432)]])
    logger.error("query failed", error: TestFailure())

    let crumbs = ring.snapshot().breadcrumbs
    #expect(crumbs.count == 2)
    let done = crumbs.first
    #expect(done?.message == "query done")
    #expect(done?.type == .log)
    #expect(done?.level == .info)
    #expect(done?.attributes.first?.key == "category")
    #expect(
      attributes(done) == [
        "category": "app.db", "shard": "7", "rows": "42", "request": "r-2", "peer.host": "db1",
        "peer.port": "5432",
      ])
    #expect(done?.attributes.filter { $0.key == "request" }.count == 1)  // the event's value wins, once
    let failed = crumbs.last
    #expect(failed?.level == .error)
    #expect(attributes(failed)["error"] == "disk on fire")
  }

  @Test func levelsMapAndTheHandlersLevelFilters() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    defer { ring.close() }
    var logger = Logger(label: "levels") { BreadcrumbLogHandler(label: $0, target: .ring(ring)) }
    logger.logLevel = .trace
    for level in Logger.Level.allCases { logger.log(level: level, "\(level)") }
    let crumbs = ring.snapshot().breadcrumbs.sorted { $0.threadSequence < $1.threadSequence }
    #expect(crumbs.map(\.message) == ["trace", "debug", "info", "notice", "warning", "error", "critical"])
    #expect(crumbs.map(\.level) == [.debug, .debug, .info, .info, .warning, .error, .fatal])

    logger.logLevel = .warning
    logger.info("below the handler's level")
    #expect(ring.snapshot().breadcrumbs.count == 7)
  }

  /// docs/server.md, "What the log handler records": `.info` and above by default, and inside a
  /// MultiplexLogHandler each handler keeps its own level (a console at `.info`, breadcrumbs at
  /// `.debug`).
  @Test func theDefaultLevelIsInfoAndAMultiplexKeepsEachHandlersLevel() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    defer { ring.close() }
    #expect(BreadcrumbLogHandler(label: "default").logLevel == .info)
    let plain = Logger(label: "default") { BreadcrumbLogHandler(label: $0, target: .ring(ring)) }
    plain.debug("below the default level")
    plain.info("at the default level")
    #expect(ring.snapshot().breadcrumbs.map(\.message) == ["at the default level"])

    let stream = RecordingStream()
    let both = Logger(label: "both") { label in
      MultiplexLogHandler([
        StreamLogHandler(label: label, stream: stream),
        BreadcrumbLogHandler(label: label, target: .ring(ring), logLevel: .debug),
      ])
    }
    both.debug("debug detail")
    #expect(ring.snapshot().breadcrumbs.map(\.message).contains("debug detail"))
    #expect(!stream.text.contains("debug detail"), "the console's .info let a debug event through")
  }

  @Test func theRingsFiltersAreCheckedBeforeAnyWork() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    defer { ring.close() }
    let logger = Logger(label: "filtered") { BreadcrumbLogHandler(label: $0, target: .ring(ring)) }
    ring.setFilter(minimumLevel: .warning, enabledTypes: nil)
    logger.info("dropped by the ring's level")
    ring.setFilter(minimumLevel: .debug, enabledTypes: [.system])
    logger.error("dropped by the ring's types")
    #expect(ring.snapshot().breadcrumbs.isEmpty)
  }

  @Test func insideAMultiplexBothHandlersGetTheEventWithTheirOwnMetadata() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    defer { ring.close() }
    let stream = RecordingStream()
    var logger = Logger(label: "multi") { label in
      var crumbs = BreadcrumbLogHandler(label: label, target: .ring(ring), includesSourceLocation: true)
      crumbs[metadataKey: "only.crumbs"] = "yes"
      return MultiplexLogHandler([StreamLogHandler(label: label, stream: stream), crumbs])
    }
    logger[metadataKey: "both"] = "1"
    logger.warning("disk almost full", metadata: ["free": "3%"])

    #expect(stream.text.contains("disk almost full"))
    #expect(stream.text.contains("free=3%"))
    let crumb = ring.snapshot().breadcrumbs.first
    #expect(crumb?.message == "disk almost full")
    #expect(crumb?.level == .warning)
    let found = attributes(crumb)
    #expect(found["category"] == "multi")
    #expect(found["both"] == "1")
    #expect(found["free"] == "3%")
    #expect(found["only.crumbs"] == "yes")
    #expect(found["file"]?.hasSuffix("LogHandlerTests.swift") == true)
    #expect(found["line"].flatMap(Int.init) != nil)
    #expect(found["source"] == "CrumbsLoggingTests")
  }

  @Test func aMetadataProviderSitsBetweenHandlerAndEventMetadata() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    defer { ring.close() }
    let provider = Logger.MetadataProvider { ["trace.id": "abc", "tenant": "from-provider"] }
    var logger = Logger(label: "provided") {
      BreadcrumbLogHandler(label: $0, target: .ring(ring), metadataProvider: provider)
    }
    logger[metadataKey: "tenant"] = "from-handler"
    logger[metadataKey: "region"] = "eu"
    logger.info("with provider")
    logger.info("event wins", metadata: ["tenant": "from-event"])
    let crumbs = ring.snapshot().breadcrumbs.sorted { $0.threadSequence < $1.threadSequence }
    #expect(
      attributes(crumbs.first) == [
        "category": "provided", "region": "eu", "trace.id": "abc", "tenant": "from-provider",
      ])
    #expect(attributes(crumbs.last)["tenant"] == "from-event")
    #expect(crumbs.last?.attributes.filter { $0.key == "tenant" }.count == 1)
  }

  /// swift-otel's metadata provider names the current span `trace_id`, `span_id` and
  /// `trace_flags`: they come right after the category, so the slot's 16-attribute limit never
  /// cuts them, whatever else the logger carries; and they read back as the breadcrumb's trace.
  @Test func theTraceFromAMetadataProviderSurvivesAFullSlot() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    defer { ring.close() }
    let provider = Logger.MetadataProvider {
      ["trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7", "trace_flags": "1"]
    }
    var logger = Logger(label: "app") {
      BreadcrumbLogHandler(label: $0, target: .ring(ring), metadataProvider: provider)
    }
    for index in 0..<20 { logger[metadataKey: "key\(index)"] = "value \(index)" }
    logger.info("inside a span", metadata: ["event": "e"])
    logger.info("the event's own span wins", metadata: ["span_id": "b7ad6b7169203331"])

    let crumbs = ring.snapshot().breadcrumbs
    let first = try #require(crumbs.first)
    #expect(first.attributesTruncated)
    #expect(first.attributes.prefix(4).map(\.key) == ["category", "trace_id", "span_id", "trace_flags"])
    let trace = TraceContext(attributes: attributes(first))
    #expect(
      trace == TraceContext(traceID: "4bf92f3577b34da6a3ce929d0e0e4736", spanID: "00f067aa0ba902b7", flags: 1)
    )
    let second = try #require(crumbs.last)
    #expect(TraceContext(attributes: attributes(second))?.spanID == "b7ad6b7169203331")
    #expect(second.attributes.filter { $0.key == "span_id" }.count == 1)
  }

  /// Without trace metadata nothing changes: no trace keys appear.
  @Test func eventsOutsideASpanCarryNoTrace() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    defer { ring.close() }
    let logger = Logger(label: "app") { BreadcrumbLogHandler(label: $0, target: .ring(ring)) }
    logger.info("plain", metadata: ["k": "v"])
    let crumb = try #require(ring.snapshot().breadcrumbs.first)
    #expect(attributes(crumb) == ["category": "app", "k": "v"])
    #expect(TraceContext(attributes: attributes(crumb)) == nil)
  }
}
