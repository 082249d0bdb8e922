// CrumbsTracingTests.swift — ServiceContext (swift-distributed-tracing) → the trace of
// breadcrumbs and non-fatal reports, through an instrument that propagates W3C trace context
// (as swift-otel's does), with a real client and ring.

import CrumbsTestSupport
import Instrumentation
import ServiceContextModule
import Testing

@testable import Crumbs
@testable import CrumbsTracing

/// Where the test instrument keeps the span: the `traceparent` it propagates.
private enum TestSpanKey: ServiceContextKey {
  typealias Value = String
}

/// Propagates the context's span as W3C `traceparent`, as swift-otel's W3C propagator does.
private struct W3CTestInstrument: Instrument {
  func inject<Carrier, Inject: Injector>(
    _ context: ServiceContext, into carrier: inout Carrier, using injector: Inject
  ) where Inject.Carrier == Carrier {
    if let parent = context[TestSpanKey.self] {
      injector.inject(parent, forKey: "traceparent", into: &carrier)
    }
  }

  func extract<Carrier, Extract: Extractor>(
    _ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract
  ) where Extract.Carrier == Carrier {}
}

/// The process-wide instrument, bootstrapped once (swift-distributed-tracing allows one).
private let bootstrapped: Void = InstrumentationSystem.bootstrap(W3CTestInstrument())

@Suite(.serialized) struct CrumbsTracingTests {
  static let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

  func traced() -> ServiceContext {
    var context = ServiceContext.topLevel
    context[TestSpanKey.self] = Self.parent
    return context
  }

  @Test func theInstrumentsTraceparentIsTheContextsTrace() {
    let trace = TraceContext(traced(), instrument: W3CTestInstrument())
    #expect(trace == TraceContext(traceparent: Self.parent))
    #expect(TraceContext(.topLevel, instrument: W3CTestInstrument()) == nil)
    // An instrument that propagates no W3C context gives none.
    #expect(TraceContext(traced(), instrument: NoOpInstrument()) == nil)
  }

  @Test func breadcrumbsAndNonFatalReportsCarryTheSpan() throws {
    _ = bootstrapped
    try withClient { client in
      let expected = try #require(TraceContext(traceparent: Self.parent))

      client.addBreadcrumb("charging card", attributes: ["order": "A-1"], context: traced())
      client.addBreadcrumb("outside", context: nil)
      let crumbs = client.ring.snapshot().breadcrumbs
      let inside = try #require(crumbs.first { $0.message == "charging card" })
      let pairs = Dictionary(inside.attributes.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a })
      #expect(TraceContext(attributes: pairs) == expected)
      #expect(pairs["order"] == "A-1")
      let outside = try #require(crumbs.first { $0.message == "outside" })
      #expect(outside.attributes.isEmpty)

      let stored = try #require(client.send(message: "declined", context: traced()))
      #expect(stored.report.trace == expected)
      let untraced = try #require(client.send(message: "declined", context: nil))
      #expect(untraced.report.trace == nil)
      // The task-local context is the default way in.
      try ServiceContext.withValue(traced()) {
        #expect(TraceContext.current == expected)
        let report = try #require(client.send(error: SampleFailure(), context: ServiceContext.current))
        #expect(report.report.trace == expected)
      }
    }
  }
}

private struct SampleFailure: Error {}
