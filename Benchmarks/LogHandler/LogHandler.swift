// LogHandler.swift — what one swift-log event costs through BreadcrumbLogHandler, against
// swift-log's own StreamLogHandler writing to /dev/null, in the same run.
//
// Every benchmark logs 1000 events per iteration (scalingFactor .kilo): with `--scale` the wall
// clock reads as nanoseconds per event, and the malloc count is per 1000 events.
//
// The event: `logger.info("user signed in", metadata: ["user": "42"])` on a logger whose handler
// carries `request: r-123`, at level info (recorded by both handlers).
//
// Benchmarks:
//   swift-log → BreadcrumbLogHandler            into a 4096-slot ring file (MAP_SHARED)
//   swift-log → StreamLogHandler to /dev/null   swift-log's handler with a stream that does what
//                                               its stdout stream does (flockfile, fwrite, fflush
//                                               every event), on a FILE opened on /dev/null
//   swift-log → both, in MultiplexLogHandler     what an app that keeps printing logs pays extra
//   swift-log → BreadcrumbLogHandler, no event metadata   the handler's own allocations (the
//                                               event's metadata dictionary is the caller's)
//
// Run: cd Benchmarks && swift package benchmark --target LogHandler --scale

import Benchmark
import Crumbs
import CrumbsLogging
import Logging

#if canImport(Glibc)
  import Glibc
#endif

let eventsPerIteration = 1000

/// swift-log's stdout stream, pointed at /dev/null: locks the FILE, writes, flushes each event.
struct DevNullStream: TextOutputStream, @unchecked Sendable {
  let file: UnsafeMutablePointer<FILE>

  init() {
    guard let file = fopen("/dev/null", "w") else { fatalError("cannot open /dev/null") }
    self.file = file
  }

  func write(_ string: String) {
    var string = string
    string.withUTF8 { bytes in
      flockfile(file)
      defer { funlockfile(file) }
      _ = fwrite(bytes.baseAddress, 1, bytes.count, file)
      fflush(file)
    }
  }
}

@inline(__always)
func logEventsWithoutMetadata(_ logger: Logger, count: Int) {
  for _ in 0..<count {
    logger.info("user signed in")
  }
}

@inline(__always)
func logEvents(_ logger: Logger, count: Int) {
  for _ in 0..<count {
    logger.info("user signed in", metadata: ["user": "42"])
  }
}

let benchmarks: @Sendable () -> Void = {
  Benchmark.defaultConfiguration = .init(
    metrics: [.wallClock, .throughput, .mallocCountTotal],
    timeUnits: .nanoseconds,
    warmupIterations: 20,
    scalingFactor: .kilo,
    maxDuration: .seconds(2),
    maxIterations: 100_000
  )

  var template = Array("/tmp/crumbs-bench-loghandler-XXXXXX".utf8CString)
  guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
    fatalError("mkdtemp failed")
  }
  let directory = String(cString: template)
  let ring: BreadcrumbRing
  do {
    ring = try BreadcrumbRing.create(at: directory + "/bench.ring")
  } catch {
    fatalError("cannot create the ring: \(error)")
  }
  // The file stays mapped for the process's life; only its name goes now.
  unlink(directory + "/bench.ring")
  rmdir(directory)

  var crumbsLogger = Logger(label: "bench.crumbs") { BreadcrumbLogHandler(label: $0, target: .ring(ring)) }
  crumbsLogger[metadataKey: "request"] = "r-123"

  let devNull = DevNullStream()
  var streamLogger = Logger(label: "bench.stream") { StreamLogHandler(label: $0, stream: devNull) }
  streamLogger[metadataKey: "request"] = "r-123"

  var bothLogger = Logger(label: "bench.both") { label in
    MultiplexLogHandler([
      StreamLogHandler(label: label, stream: devNull),
      BreadcrumbLogHandler(label: label, target: .ring(ring)),
    ])
  }
  bothLogger[metadataKey: "request"] = "r-123"

  Benchmark("swift-log → BreadcrumbLogHandler") { _ in
    withExtendedLifetime(ring) { logEvents(crumbsLogger, count: eventsPerIteration) }
  }

  Benchmark("swift-log → StreamLogHandler to /dev/null") { _ in
    logEvents(streamLogger, count: eventsPerIteration)
  }

  Benchmark("swift-log → both, in MultiplexLogHandler") { _ in
    withExtendedLifetime(ring) { logEvents(bothLogger, count: eventsPerIteration) }
  }

  Benchmark("swift-log → BreadcrumbLogHandler, no event metadata") { _ in
    withExtendedLifetime(ring) { logEventsWithoutMetadata(crumbsLogger, count: eventsPerIteration) }
  }
}
