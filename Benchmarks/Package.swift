// swift-tools-version:6.1
// Crumbs benchmarks: a package of its own, so the main package's `make test` never builds
// ordo-one/benchmark. Run with `make bench` from the repository root (see README.md).
//
// Targets:
//   CBaselineAppend   (C)  the honest floor: fetch_add + memcpy + release store into a MAP_SHARED file
//   AppendWorkloads        what every runner shares: the message, the rings, the two-thread runner
//   RingAppend             the ordo-one/benchmark suite (wall clock, malloc counts)
//   RingAppendFigures      same-run ratios against the baseline, and malloc counts per append
//   AppendCallgrind        N appends of one kind, for callgrind.sh (instructions per append)
//   LogHandler             swift-log events through BreadcrumbLogHandler vs StreamLogHandler
//                          to /dev/null, same run (ordo-one suite at Benchmarks/LogHandler)
//   ReportFigures          crash handler, install, next-launch processing, LZ4, client start and
//                          non-fatal reports, from real crashing children
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
    .target(name: "CBaselineAppend"),
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
        "AppendWorkloads",
        .product(name: "Benchmark", package: "benchmark"),
      ],
      path: "RingAppend",
      plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    ),
    .executableTarget(
      name: "RingAppendFigures",
      dependencies: [
        "AppendWorkloads",
        .product(name: "MallocInterposerSwift", package: "malloc-interposer"),
      ]
    ),
    .executableTarget(name: "AppendCallgrind", dependencies: ["AppendWorkloads"]),
    .executableTarget(
      name: "ReportFigures",
      dependencies: [.product(name: "Crumbs", package: "Crumbs")]
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
