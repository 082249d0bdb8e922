// LedgerTests.swift — the in-flight ledger (crumbs_ledger.h): operations begun, renamed, given
// attributes and ended are read back live and from the file; a full table counts what it could
// not hold; a stale handle frees nothing; threads racing never tear an entry; damaged bytes are
// named or counted, never trusted, and never hide the breadcrumbs.

import CrumbsPlatform
import CrumbsSignalPath
import CrumbsTestSupport
import Synchronization
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct LedgerTests {
  static let trace = TraceContext(traceID: "4bf92f3577b34da6a3ce929d0e0e4736", spanID: "00f067aa0ba902b7")!

  @Test func openOperationsAreReadLiveAndFromTheFileOldestFirst() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("a.ring"))
    let first = ring.beginOperation(
      "HTTP GET route not found", trace: Self.trace, parentSpanID: "b7ad6b7169203331")
    let route = "/v1/orders/" + String(42)  // a run-time string, as apps make them
    let second = ring.beginOperation("GET " + route, kind: .consumer)
    let done = ring.beginOperation("ended")
    #expect(first.isRecorded && second.isRecorded && done.isRecorded)
    #expect(ring.renameOperation(first, to: "GET /v1/orders/:id"))
    #expect(ring.addOperationAttribute(first, key: "url.path", value: route))
    #expect(ring.addOperationAttribute(first, key: "http.route", value: "/v1/orders/:id"))
    #expect(ring.endOperation(done))
    #expect(!ring.endOperation(done), "a second end frees nothing")
    #expect(!ring.renameOperation(done, to: "late"), "an ended operation is not renamed")
    ring.append("a breadcrumb beside them")

    let live = try #require(ring.snapshot().ledger)
    ring.close(clean: false)
    let offline = try RingReader.read(file: directory.file("a.ring"))
    #expect(offline.breadcrumbs.map(\.message) == ["a breadcrumb beside them"])
    let fromFile = try #require(offline.ledger)
    for ledger in [live, fromFile] {
      #expect(ledger.capacity == 512)
      #expect(ledger.overflow == 0 && ledger.unreadable == 0 && ledger.damage == nil)
      #expect(ledger.open.map(\.name) == ["GET /v1/orders/:id", "GET /v1/orders/42"])
      let request = ledger.open[0]
      #expect(request.kind == .server)
      #expect(request.trace == Self.trace)
      #expect(request.parentSpanID == "b7ad6b7169203331")
      #expect(request.threadID == crumbs_current_thread_id())
      #expect(
        request.attributes == [
          .init(key: "url.path", value: "/v1/orders/42"), .init(key: "http.route", value: "/v1/orders/:id"),
        ])
      #expect(ledger.open[1].kind == .consumer && ledger.open[1].trace == nil)
      let now = SystemClock.wallNanoseconds()
      #expect(request.startWallNanoseconds <= now && now - request.startWallNanoseconds < 600_000_000_000)
      #expect(request.startMonotonicNanoseconds <= ledger.open[1].startMonotonicNanoseconds)
    }
  }

  @Test func aFullLedgerCountsWhatItCouldNotHoldAndAnEndMakesRoom() throws {
    var options = RingOptions()
    options.ledgerEntryCount = 8
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("a.ring"), options: options)
    let entries = (0..<10).map { ring.beginOperation("job \($0)", kind: .job) }
    #expect(entries.filter(\.isRecorded).count == 8)
    var ledger = try #require(ring.snapshot().ledger)
    #expect(ledger.open.count == 8 && ledger.overflow == 2)
    let ended = try #require(entries.first { $0.isRecorded })
    #expect(ring.endOperation(ended))
    let again = ring.beginOperation("after room")
    #expect(again.isRecorded)
    #expect(!ring.endOperation(ended), "the old handle does not free the entry's new operation")
    ledger = try #require(ring.snapshot().ledger)
    #expect(ledger.open.count == 8)
    #expect(ledger.open.contains { $0.name == "after room" })
  }

  @Test func namesAndAttributesAreCutAtTheirBoundsAndFlagged() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("a.ring"))
    let long = String(repeating: "é", count: 100)  // 200 bytes: cut at 128, on a character
    let entry = ring.beginOperation(long)
    for index in 0..<6 {
      ring.addOperationAttribute(entry, key: "k\(index)", value: String(repeating: "v", count: 100))
    }
    let operation = try #require(ring.snapshot().ledger?.open.first)
    #expect(operation.name == String(repeating: "é", count: 64) && operation.nameTruncated)
    #expect(
      operation.attributes.count == 3 && operation.attributesTruncated,
      "288 bytes hold two whole pairs and a cut one")
    #expect(operation.attributes.prefix(2).allSatisfy { $0.value.utf8.count == 100 })
  }

  @Test func aRingThatTakesNoBreadcrumbTypeBeginsNoOperation() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("a.ring"))
    let before = ring.beginOperation("before")
    ring.setFilter(minimumLevel: .debug, enabledTypes: [])  // what a disabled client sets
    #expect(!ring.beginOperation("while disabled").isRecorded)
    #expect(ring.endOperation(before), "one begun before still ends")
    ring.setFilter(minimumLevel: .debug, enabledTypes: nil)
    #expect(ring.beginOperation("enabled again").isRecorded)
    #expect(ring.snapshot().ledger?.open.map(\.name) == ["enabled again"])
  }

  /// What CrumbsTracer asks for a span whose context does not carry its operation: the span's own
  /// open operation, else its trace's newest, never an ended one or another trace's.
  @Test func anOperationIsFoundByItsSpanOrElseTheNewestOfItsTrace() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("a.ring"))
    let trace = try #require(TraceIDs(Self.trace))
    func span(_ spanID: UInt64, of ids: TraceIDs = trace) -> TraceIDs {
      var span = ids
      span.spanID = spanID
      return span
    }
    let other = span(7, of: try #require(TraceIDs(traceHigh: 1, traceLow: 2, spanID: 3)))
    let request = ring.beginOperation("request", kind: .server, ids: span(0xA1), parentSpanID: 0)
    _ = ring.beginOperation("other trace", kind: .server, ids: other, parentSpanID: 0)
    let job = ring.beginOperation("job", kind: .consumer, ids: span(0xA2), parentSpanID: 0xA1)

    let exact = try #require(ring.findOperation(span(0xA1)))
    #expect(exact.exact && exact.spanID == 0xA1 && exact.entry == request)
    let newest = try #require(ring.findOperation(span(0xB0)), "a span of the trace with no operation")
    #expect(!newest.exact && newest.spanID == 0xA2 && newest.entry == job)
    #expect(ring.endOperation(job))
    #expect(ring.findOperation(span(0xA2))?.entry == request, "an ended operation is never found")
    #expect(
      ring.findOperation(span(5, of: try #require(TraceIDs(traceHigh: 9, traceLow: 9, spanID: 9)))) == nil)
    #expect(ring.findOperation(other)?.exact == true)
    ring.close(clean: true)
    #expect(ring.findOperation(span(0xA1)) == nil, "a closed ring is not searched")
  }

  @Test func aRingWithoutALedgerRecordsNothingAndIsReadWithoutOne() throws {
    var options = RingOptions()
    options.ledgerEntryCount = 0
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("a.ring"), options: options)
    #expect(!ring.beginOperation("nothing").isRecorded)
    #expect(ring.findOperation(try #require(TraceIDs(Self.trace))) == nil)
    ring.close(clean: true)
    #expect(try RingReader.read(file: directory.file("a.ring")).ledger == nil)
    options.ledgerEntryCount = 100
    #expect(throws: RingCreationError.self) {
      try BreadcrumbRing.create(at: directory.file("b.ring"), options: options)
    }
  }

  @Test func threadsBeginningAndEndingAtOnceNeverTearAnEntry() throws {
    var options = RingOptions()
    options.ledgerEntryCount = 64
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("a.ring"), options: options)
    let threads = 4
    let rounds = 20_000
    let torn = Atomic<Int>(0)
    onThreads(threads) { thread in
      for round in 0..<rounds {
        let entry = ring.beginOperation("thread \(thread)", kind: .job)
        ring.addOperationAttribute(entry, key: "round", value: String(round))
        if round % 1000 == 0, let ledger = ring.snapshot().ledger {
          // Every entry read whole is one a thread wrote: its name and attribute agree.
          for operation in ledger.open
          where !operation.name.hasPrefix("thread ") || operation.attributes.count > 1 {
            _ = operation
            torn.add(1, ordering: .relaxed)
          }
        }
        ring.endOperation(entry)
      }
    }
    #expect(torn.load(ordering: .relaxed) == 0)
    let ledger = try #require(ring.snapshot().ledger)
    #expect(ledger.open.isEmpty && ledger.unreadable == 0 && ledger.overflow == 0)
  }

  /// `crumbs threads` reads the ledger alone from the file of a process still writing it:
  /// the operations as the live reader sees them; damaged or cut bytes named, never a trap.
  @Test func theLedgerAloneIsReadFromTheFileOfARunningProcess() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("a.ring"))
    defer { ring.close() }
    let held = ring.beginOperation("GET /v1/orders/:id", trace: Self.trace)
    _ = ring.beginOperation("orders.export", kind: .job)
    ring.endOperation(ring.beginOperation("ended"))
    func readLedger(_ name: String) throws -> LedgerContents? {
      let folder = try Syscall.open(directory.path, O_RDONLY | O_DIRECTORY)
      defer { Syscall.close(folder) }
      let file = try Syscall.openRegularFile(named: name, in: folder, path: directory.file(name))
      defer { Syscall.close(file.fd) }
      return try RingReader.readLedger(descriptor: file.fd, size: file.size, path: directory.file(name))
    }
    let ledger = try #require(try readLedger("a.ring"))
    // As the live reader sees them (times aside: a ring this young is calibrated anew at each read).
    let live = try #require(ring.openOperations())
    #expect(ledger.open.map(\.name) == live.open.map(\.name))
    #expect(ledger.open.map(\.threadID) == live.open.map(\.threadID))
    #expect(ledger.open.map(\.name) == ["GET /v1/orders/:id", "orders.export"])
    #expect(ledger.open.first?.trace == Self.trace && ledger.unreadable == 0)
    ring.endOperation(held)
    #expect(try readLedger("a.ring")?.open.map(\.name) == ["orders.export"])

    let original = try Syscall.readFile(directory.file("a.ring"))
    let place = try #require(try original.withUnsafeBytes { try RingHeaderValidation.validate($0) }.ledger)
    var damaged = original
    damaged[place.offset] ^= 0xFF
    try Syscall.writeFileAtomically(directory.file("b.ring"), damaged)
    #expect(try readLedger("b.ring")?.damage == "the ledger's magic is damaged")
    try Syscall.writeFileAtomically(directory.file("c.ring"), Array(original.prefix(place.offset + 100)))
    #expect(throws: PersistedFileError.self) { try readLedger("c.ring") }
  }

  @Test func damagedLedgerBytesAreNamedOrCountedAndTheBreadcrumbsStand() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("a.ring"))
    let entry = ring.beginOperation("held")
    ring.addOperationAttribute(entry, key: "a", value: "b")
    _ = ring.beginOperation("second")
    ring.append("kept")
    ring.close(clean: false)
    let original = try Syscall.readFile(directory.file("a.ring"))
    let layout = try original.withUnsafeBytes { try RingHeaderValidation.validate($0) }
    let place = try #require(layout.ledger)

    // The ledger's magic: named, nothing of it trusted, the breadcrumbs read.
    var bytes = original
    bytes[place.offset] ^= 0xFF
    var contents = try bytes.withUnsafeBytes { try RingReader.read(image: $0) }
    #expect(contents.breadcrumbs.map(\.message) == ["kept"])
    #expect(
      contents.ledger?.damage == "the ledger's magic is damaged" && contents.ledger?.open.isEmpty == true)

    // An entry's lengths out of range, and one left WRITING: counted, not read.
    bytes = original
    let entries = place.offset + Int(CRUMBS_LEDGER_HEADER_SIZE)
    let open = (0..<place.entryCount).map { entries + $0 * Int(CRUMBS_LEDGER_ENTRY_SIZE) }.filter {
      bytes[$0] & 3 == UInt8(CRUMBS_LEDGER_OPEN)
    }
    #expect(open.count == 2)
    bytes[open[0] + 56 + 2] = 200  // name_length past 128
    bytes[open[1]] = (bytes[open[1]] & ~3) | UInt8(CRUMBS_LEDGER_WRITING)
    contents = try bytes.withUnsafeBytes { try RingReader.read(image: $0) }
    #expect(contents.ledger?.open.isEmpty == true && contents.ledger?.unreadable == 2)

    // Bytes of the ledger flipped in turn: never a trap, never an entry that was never written
    // (a never-used entry is all zero: no thread, no start). Entries have no checksum: a flip
    // that makes a FREE entry OPEN again could show the operation that last ended in it; here
    // none ended, so at most the two that are open.
    for offset in stride(from: place.offset, to: place.offset + LedgerReader.byteCount(place), by: 7) {
      bytes = original
      bytes[offset] ^= 0x5A
      let ledger = try bytes.withUnsafeBytes { try RingReader.read(image: $0) }.ledger
      #expect((ledger?.open.count ?? 0) <= 2, "byte \(offset - place.offset) of the ledger")
    }

    // The header's ledger fields: a count that is not a power of two, an offset elsewhere.
    for (field, value) in [(3600, UInt32(100)), (3592, UInt32(4096))] {
      bytes = original
      withUnsafeBytes(of: value.littleEndian) { bytes.replaceSubrange(field..<field + 4, with: $0) }
      #expect(throws: PersistedFileError.self) {
        try bytes.withUnsafeBytes { try RingReader.read(image: $0) }
      }
    }
  }
}
