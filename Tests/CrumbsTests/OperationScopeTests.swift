// OperationScopeTests.swift — per-operation scope: an operation's own user and attributes (held
// in its ledger entry) and its trace ride on the non-fatal reports made inside it, over the
// session's; outside it the session's apply again. A real client and ring; `withOperation`'s
// task-local, sync and async, and an operation the full ledger could not hold.

import CrumbsTestSupport
import Dispatch
import Synchronization
import Testing

@testable import Crumbs

@Suite(.serialized) struct OperationScopeTests {
  static let trace = TraceContext(
    traceID: "4bf92f3577b34da6a3ce929d0e0e4736", spanID: "00f067aa0ba902b7", flags: 1)!

  func withClient(ledgerEntries: Int = 512, _ body: (CrumbsClient) throws -> Void) throws {
    try ProcessWideState.exclusive { try start(ledgerEntries: ledgerEntries, body) }
  }

  func start(ledgerEntries: Int, _ body: (CrumbsClient) throws -> Void) throws {
    let directory = TestDirectory()
    var configuration = CrumbsConfiguration(directory: directory.path)
    configuration.hangs = nil
    configuration.automaticBreadcrumbs = nil
    configuration.environment = [:]
    configuration.ring.ledgerEntryCount = ledgerEntries
    let client = try CrumbsClient.start(configuration, shared: false)
    defer { client.close() }
    client.setUser(id: "session-user")
    client.setAttribute("session", forKey: "tier")
    try body(client)
  }

  @Test func aReportInsideAnOperationCarriesItsUserAttributesAndTrace() throws {
    try withClient { client in
      let inside = try client.withOperation("POST /v1/orders", trace: Self.trace) { order in
        order.setUser(id: "user-7")
        order.setAttribute("order.id", "A-1")
        order.setAttribute("tier", "operation")
        #expect(CrumbsOperation.current?.trace == Self.trace)
        #expect(order.contents?.attributes.map(\.key) == ["enduser.id", "order.id", "tier"])
        return try #require(client.send(message: "declined", attributes: ["order.id": "given"]))
      }
      #expect(inside.report.attributes["enduser.id"] == .string("user-7"))
      #expect(inside.report.attributes["tier"] == .string("operation"))
      #expect(inside.report.attributes["order.id"] == .string("given"), "the call's own attributes win")
      #expect(inside.report.trace == Self.trace)
      #expect(CrumbsOperation.current == nil)

      let outside = try #require(client.send(message: "declined"))
      #expect(outside.report.attributes["enduser.id"] == .string("session-user"))
      #expect(outside.report.attributes["tier"] == .string("session"))
      #expect(outside.report.attributes["order.id"] == nil && outside.report.trace == nil)
    }
  }

  @Test func theAsyncFormScopesTheTaskAndItsChildren() throws {
    try withClient { client in
      // The client is process-wide state, held under a lock a task may not take: the test's
      // thread waits for the task, which runs on a queue of its own (the concurrency pool may
      // be as narrow as the test threads that wait on that lock).
      let result = Mutex<StoredReport?>(nil)
      let done = DispatchSemaphore(value: 0)
      Task(executorPreference: QueueExecutor()) {
        let stored = await client.withOperation("orders.export", kind: .job) { job in
          job.setUser(id: "user-9")
          await Task.yield()
          // A child task inherits the task-local operation.
          async let child = client.send(error: ExportFailure())
          return await child
        }
        result.withLock { $0 = stored }
        done.signal()
      }
      done.wait()
      let report = try #require(result.withLock { $0 })
      #expect(report.report.attributes["enduser.id"] == .string("user-9"))
      #expect(report.report.trace == nil, "an operation begun without a trace gives none")
    }
  }

  @Test func anOperationTheLedgerCouldNotHoldKeepsItsTrace() throws {
    try withClient(ledgerEntries: 8) { client in
      let held = (0..<8).map { client.beginOperation("held \($0)") }
      defer { held.forEach { $0.end() } }
      let report = try client.withOperation("extra", trace: Self.trace) { extra in
        #expect(!extra.isRecorded)
        extra.setUser(id: "lost")
        return try #require(client.send(message: "declined"))
      }
      #expect(report.report.trace == Self.trace)
      #expect(report.report.attributes["enduser.id"] == .string("session-user"))
    }
  }

  @Test func anEndedOperationLendsNothing() throws {
    try withClient { client in
      let order = client.beginOperation("GET /v1/orders/:id", trace: Self.trace)
      order.setUser(id: "user-7")
      #expect(order.contents?.name == "GET /v1/orders/:id")
      order.end()
      #expect(order.contents == nil)
      let report = try CrumbsOperation.$current.withValue(order) {
        try #require(client.send(message: "late"))
      }
      #expect(report.report.attributes["enduser.id"] == .string("session-user"), "the entry is gone")
      #expect(report.report.trace == Self.trace, "the value still knows its trace")
    }
  }
}

private struct ExportFailure: Error {}

/// Runs tasks on a Dispatch queue's thread instead of the concurrency pool.
private final class QueueExecutor: TaskExecutor {
  let queue = DispatchQueue(label: "operation-scope-tests")

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
  }
}
