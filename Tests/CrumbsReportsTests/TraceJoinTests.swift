// TraceJoinTests.swift — a crash joined to the trace it happened in: the crashing thread's last
// breadcrumb that carried a trace context (TraceContext's reserved attributes) names the
// report's trace, in report.json too; and the session's own resource (recorded while it ran)
// is what its crash is reported with.

import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct TraceJoinTests {
  @Test func aCrashNamesTheCrashingThreadsLastSpan() throws {
    let directory = TestDirectory()
    let run = try runCrashScenario(
      "traced-crash", variant: ChildVariant(release: false, backtracer: false), directory: directory)
    #expect(run.status & 0x7f == SIGSEGV, "\(run.lines)")
    let outcome = PostMortemProcessor(
      directory: try RingDirectory(path: directory.path), store: try ReportStore(directory: directory.path)
    ).run(reportingSession: SessionID())
    let stored = try #require(outcome.reports.first)
    let report = stored.report
    #expect(report.threadID == run.facts["thread"].flatMap(Int.init))
    #expect(
      report.trace
        == TraceContext(traceID: "4bf92f3577b34da6a3ce929d0e0e4736", spanID: "00f067aa0ba902b7", flags: 1))
    #expect(report.traceBreadcrumb?.message == "handling request")
    #expect(report.traceBreadcrumb?.threadID == UInt32(report.threadID ?? -1))
    // Named in the stored report.json.
    let json = try #require(
      try JSONSerialization.jsonObject(with: Data(Syscall.readFile(stored.path + "/report.json")))
        as? [String: Any])
    let trace = try #require(json["crumbs.trace"] as? [String: Any])
    #expect(trace["traceID"] as? String == "4bf92f3577b34da6a3ce929d0e0e4736")
    #expect((json["crumbs.trace.breadcrumb"] as? [String: Any])?["message"] as? String == "handling request")
  }

  @Test func traceContextsAreValidatedAndRoundTrip() throws {
    let trace = try #require(
      TraceContext(traceparent: "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"))
    #expect(trace.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
    #expect(trace.flags == 1)
    #expect(trace.traceparent == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    #expect(
      trace.traceIDBytes.count == 16 && trace.spanIDBytes == [0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7])
    #expect(
      TraceContext(attributes: Dictionary(uniqueKeysWithValues: trace.attributes.map { ($0.key, $0.value) }))
        == trace)
    for bad in [
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f35-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", "garbage", "",
      // Version 00 has exactly four fields; a later one may have more, after a dash.
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
      "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01extra",
      "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
      "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
    ] {
      #expect(TraceContext(traceparent: bad) == nil, "\(bad)")
    }
    let later = TraceContext(traceparent: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-more")
    #expect(later?.traceID == "4bf92f3577b34da6a3ce929d0e0e4736" && later?.spanID == "00f067aa0ba902b7")
  }

  /// The ids as numbers (what the ledger and CrumbsTracer carry) agree with the strings both
  /// ways, and made-up ids are never zero, never repeat, and keep the trace they are made in.
  @Test func traceIDsAgreeWithTheirStringsAndMadeUpOnesAreUnique() throws {
    let trace = try #require(
      TraceContext(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
    let ids = try #require(TraceIDs(trace))
    #expect(ids.traceHigh == 0x4bf9_2f35_77b3_4da6 && ids.traceLow == 0xa3ce_929d_0e0e_4736)
    #expect(ids.spanID == 0x00f0_67aa_0ba9_02b7 && ids.flags == 1)
    #expect(ids.context == trace && ids.spanIDHex == "00f067aa0ba902b7")
    #expect(TraceIDs(traceparent: trace.traceparent) == ids)
    #expect(TraceIDs.spanID(hex: "00f067aa0ba902b7") == ids.spanID)
    for bad in [nil, "", "00f067aa0ba902b", "00f067aa0ba902b7a", "00f067aa0ba902bz"] {
      #expect(TraceIDs.spanID(hex: bad) == 0, "\(bad ?? "nil")")
    }
    var seen = Set<UInt64>()
    for _ in 0..<10_000 {
      let child = TraceIDs.madeUp(in: ids)
      #expect(child.traceHigh == ids.traceHigh && child.traceLow == ids.traceLow && child.flags == 1)
      #expect(child.spanID != 0 && seen.insert(child.spanID).inserted)
    }
    let fresh = TraceIDs.madeUp(in: nil)
    #expect(
      fresh.traceHigh | fresh.traceLow != 0
        && (fresh.traceHigh, fresh.traceLow) != (ids.traceHigh, ids.traceLow))
    #expect(TraceContext(traceID: fresh.context.traceID, spanID: fresh.spanIDHex) != nil)
  }

  /// A crash is reported with the resource its session recorded while it ran, not with what the
  /// reading launch measures; without one the report says where its machine facts came from.
  @Test func aCrashedSessionsRecordedResourceIsItsReportsResource() throws {
    let directory = TestDirectory()
    let rings = try RingDirectory(path: directory.path)
    let ring = try rings.createRing()
    ring.append("step", level: .info, type: .manual)
    var metadata = SessionMetadata(sessionID: ring.sessionID, appVersion: "1.2.3")
    metadata.resource = [
      "host.name": "the-crashed-host", "os.version": "5.10.0-crashed", "process.parent_pid": "4242",
      "process.executable.build_id.gnu": "c0ffee", "deployment.environment.name": "prod",
    ]
    try Syscall.writeFileAtomically(RingDirectory.sessionFilePath(forRing: ring.path), metadata.encoded())
    // The file reads back whole.
    #expect(try SessionMetadata.read(file: RingDirectory.sessionFilePath(forRing: ring.path)) == metadata)
    ring.close(clean: false)
    let store = try ReportStore(directory: directory.path)
    let report = try #require(PostMortemProcessor(directory: rings, store: store).run().reports.first).report
    for (key, value) in metadata.resource! { #expect(report.resource[key] == value, "\(key)") }
    #expect(report.resource["service.version"] == "1.2.3")
    #expect(report.resource["host.memory.available_bytes"] == nil)
    #expect(report.resource["crumbs.resource.measured_at"] == nil)

    // A session that recorded none: the machine read now, and said so.
    let bare = try rings.createRing()
    bare.close(clean: false)
    let other = try #require(PostMortemProcessor(directory: rings, store: store).run().reports.first).report
    #expect(other.resource["crumbs.resource.measured_at"] == "report")
    #expect(other.resource["os.type"] == "linux")
  }
}
