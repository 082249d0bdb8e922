// swift-tools-version:6.1
// Crumbs benchmarks: a package of its own, so the main package's `make test` never builds
// ordo-one/benchmark. Run with `make bench` from the repository root (see README.md).
//
// Targets:
//   CBaselineAppend   (C)  the honest floor: fetch_add + memcpy + release store into a MAP_SHARED file
//   AppendWorkloads        what every runner shares: the kinds of append (AppendKind), the rings,
//                          the two-thread runner
//   RingAppend             the ordo-one/benchmark suite (wall clock, malloc counts)
//   RingAppendFigures      same-run ratios against the floor, two threads, mallocs per append
//   AppendCallgrind        N appends of one kind, for callgrind.sh (instructions per append)
//   CallSites              a consumer with 100 addBreadcrumb call sites, and CallSitesNone, the same
//                          without them, for callsites.sh (machine code per call site in a
//                          release build)
//   ProcessFigures         process start, RSS, fault → death and exit(0) → reaped of child
//                          programs: PlainProcess (no Crumbs), RecorderProcess (CrumbsRecorder
//                          only), ClientProcess (CrumbsClient.start) and, for reference,
//                          NetworkingProcess (no Crumbs, FoundationNetworking linked, as
//                          clients did before the curl transport),
//                          FoundationProcess (no Crumbs, Foundation only);
//                          ProcessChildSupport is what they share
//   ReportFigures          crash handler, install, next-launch processing, LZ4 and non-fatal
//                          reports, from real crashing children
//   HangFigures            what hang detection costs: heartbeat.beat() against a relaxed store
//                          (C floor, same run), mallocs, and the watchdog's idle CPU and
//                          wake-ups against a client without it
//   PoolLookFigures        what the watchdog's look at the pool's seats costs: idle CPU with
//                          hangs off, the watchdog without the look and with it, same run
//   LedgerFigures          what the in-flight ledger costs: beginOperation + end against one
//                          addBreadcrumb of the same name (literal and run-time names) and a C
//                          floor, two threads against one, mallocs
//   TracerFigures          what CrumbsTracer adds to a traced request's span calls (Hummingbird's
//                          TracingMiddleware's), against NoOpTracer and a C floor, mallocs
//   LiveCaptureFigures     a live thread capture of 100 blocked threads: each thread's pause, the
//                          whole capture, and a request loop's latency while captures run
//   LogHandler             swift-log events through BreadcrumbLogHandler vs StreamLogHandler
//                          to /dev/null, same run (ordo-one suite at Benchmarks/LogHandler)
//   BenchSummary           the figures each part adds to `make bench`'s closing table
import PackageDescription

let package = Package(
  name: "CrumbsBenchmarks",
  platforms: [.macOS(.v13)],
  dependencies: [
    // Named, so the name does not depend on what the checkout directory is called.
    .package(name: "Crumbs", path: ".."),
    .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    // Already a dependency of benchmark; named here so RingAppendFigures can read its counters.
    .package(url: "https://github.com/ordo-one/malloc-interposer.git", from: "1.6.1"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
  ],
  targets: [
    // The floor reads the ring's own clock (crumbs_ring_append.h's crumbs_clock_ticks) for its
    // timestamped variant; nothing else of Crumbs.
    .target(name: "CBaselineAppend", dependencies: [.product(name: "CrumbsRecorder", package: "Crumbs")]),
    .target(name: "BenchSummary"),
    .target(
      name: "AppendWorkloads",
      dependencies: [
        "CBaselineAppend",
        .product(name: "Crumbs", package: "Crumbs"),
      ]
    ),
    // The plugin finds benchmark suites as executable targets in a folder named Benchmarks: this
    // package's own folder is that folder, so the suite lives at Benchmarks/RingAppend.
    .executableTarget(
      name: "RingAppend",
      dependencies: [
        "AppendWorkloads", "CBaselineAppend", .product(name: "CrumbsRecorder", package: "Crumbs"),
        .product(name: "Benchmark", package: "benchmark"),
      ],
      path: "RingAppend",
      plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    ),
    .executableTarget(
      name: "RingAppendFigures",
      dependencies: [
        "AppendWorkloads",
        "BenchSummary",
        .product(name: "MallocInterposerSwift", package: "malloc-interposer"),
      ]
    ),
    .executableTarget(name: "AppendCallgrind", dependencies: ["AppendWorkloads"]),
    .target(name: "ProcessChildSupport"),
    .executableTarget(name: "PlainProcess", dependencies: ["ProcessChildSupport"]),
    .executableTarget(
      name: "RecorderProcess",
      dependencies: ["ProcessChildSupport", .product(name: "CrumbsRecorder", package: "Crumbs")]
    ),
    .executableTarget(
      name: "ClientProcess",
      dependencies: ["ProcessChildSupport", .product(name: "Crumbs", package: "Crumbs")]
    ),
    .executableTarget(name: "NetworkingProcess", dependencies: ["ProcessChildSupport"]),
    .executableTarget(name: "FoundationProcess", dependencies: ["ProcessChildSupport"]),
    .executableTarget(name: "ProcessFigures", dependencies: ["BenchSummary"]),
    .executableTarget(
      name: "CallSites",
      dependencies: [.product(name: "CrumbsRecorder", package: "Crumbs")]
    ),
    .executableTarget(
      name: "CallSitesNone",
      dependencies: [.product(name: "CrumbsRecorder", package: "Crumbs")]
    ),
    .executableTarget(
      name: "ReportFigures",
      dependencies: ["BenchSummary", .product(name: "Crumbs", package: "Crumbs")]
    ),
    .executableTarget(
      name: "HangFigures",
      dependencies: [
        "BenchSummary", "CBaselineAppend", .product(name: "Crumbs", package: "Crumbs"),
        .product(name: "MallocInterposerSwift", package: "malloc-interposer"),
      ]
    ),
    .executableTarget(
      name: "PoolLookFigures",
      dependencies: ["BenchSummary", .product(name: "Crumbs", package: "Crumbs")]
    ),
    .executableTarget(
      name: "LedgerFigures",
      dependencies: [
        "AppendWorkloads", "BenchSummary", "CBaselineAppend", .product(name: "Crumbs", package: "Crumbs"),
        .product(name: "MallocInterposerSwift", package: "malloc-interposer"),
      ]
    ),
    .executableTarget(
      name: "TracerFigures",
      dependencies: [
        "AppendWorkloads", "BenchSummary", .product(name: "Crumbs", package: "Crumbs"),
        .product(name: "CrumbsTracing", package: "Crumbs"),
        .product(name: "MallocInterposerSwift", package: "malloc-interposer"),
      ]
    ),
    .executableTarget(
      name: "LiveCaptureFigures",
      dependencies: ["BenchSummary", .product(name: "CrumbsRecorder", package: "Crumbs")]
    ),
    .executableTarget(
      name: "LogHandler",
      dependencies: [
        .product(name: "Crumbs", package: "Crumbs"),
        .product(name: "CrumbsLogging", package: "Crumbs"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Benchmark", package: "benchmark"),
      ],
      path: "LogHandler",
      plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    ),
  ]
)
