// swift-tools-version:6.1
// Crumbs: a flight recorder for Swift processes on Linux.
//
// Modules, and the one direction their dependencies point (each arrow: "is used by"):
//   CrumbsSignalPath (C)  the persisted layouts, the lock-free append, the crash handler:
//                         everything that may run inside a signal handler. Depends on nothing.
//   CrumbsPlatform        internal (no product names it): system calls and their error, clock,
//                         background thread, page buffer, subprocess, abandoned files,
//                         quarantine, facts about the machine. Depends only on swift-system.
//   CrumbsRecorder        the recorder a process carries: ring, crash handler, signal
//                         breadcrumbs and the clean-exit hook, the readers of what they persist
//                         (Reading/), model types. The only module that imports CrumbsSignalPath;
//                         never imports Foundation, so a program that only records links no
//                         Foundation, ICU or curl.
//   CLZ4 (system)         Debian's liblz4, through pkg-config.
//   CZlib (system)        Debian's zlib, through pkg-config: gzip for OTLP bodies (delivery only).
//   CrumbsReports         after the fact: post-mortem, symbolication, crash reports, the store.
//   CCurlLoader (C)       libcurl loaded with dlopen at the first upload (nothing links it).
//   CrumbsDelivery        OTLP and Backtrace uploads, over CCurlLoader.
//   Crumbs                the client and automatic breadcrumbs; re-exports the three above, so
//                         `import Crumbs` is the whole SDK.
//   CrumbsLogging         swift-log LogHandler → breadcrumbs; needs only the recorder.
//   CrumbsServiceLifecycle  Crumbs as a swift-service-lifecycle `Service` (optional product:
//                         only a program that names it pulls in swift-service-lifecycle).
//   CrumbsTracing         swift-distributed-tracing's ServiceContext → the trace and span of
//                         breadcrumbs and non-fatal reports, and CrumbsTracer (server spans as
//                         open operations of the ledger); an optional product, so the core
//                         links no tracing.
//   CrumbsMetrics         session ends per release, hangs and reports as swift-metrics
//                         counters (for swift-prometheus and the like); an optional product, so
//                         the core links no metrics.
//   CrumbsHummingbird, CrumbsVapor  a middleware per framework that puts each request in the
//                         in-flight ledger; each built only with its package trait (`Hummingbird`,
//                         `Vapor`), so a consumer that does not enable it neither fetches nor
//                         builds the framework (docs/server.md).
//   CrumbsCollector       the collector (`crumbs collect`): the client's processor and uploader
//                         run from outside over Crumbs directories, once or watching; a library
//                         (no product names it) so that tests drive it without the command line.
//   CrumbsCLI → `crumbs`  the command line; nothing depends on it.
//
//   CrumbsSignalPath ─┐
//   CrumbsPlatform ───┴→ CrumbsRecorder → CrumbsReports → CrumbsDelivery → Crumbs → CrumbsCollector
//          (CrumbsPlatform is also used   ↘ CrumbsLogging        Crumbs → CrumbsServiceLifecycle    ↓
//           by Reports, Delivery, Crumbs,                        Crumbs → CrumbsTracing         CrumbsCLI
//           the collector and the CLI)                           Crumbs → CrumbsMetrics
import PackageDescription

// Test files import every module whose members they use (SE-0444): a test's imports say what it
// exercises, and a move between modules shows in the files it touches.
let testFileImports: [SwiftSetting] = [.enableUpcomingFeature("MemberImportVisibility")]

let package = Package(
  name: "Crumbs",
  platforms: [.macOS(.v13)],
  products: [
    .library(name: "Crumbs", targets: ["Crumbs"]),
    .library(name: "CrumbsRecorder", targets: ["CrumbsRecorder"]),
    .library(name: "CrumbsLogging", targets: ["CrumbsLogging"]),
    .library(name: "CrumbsServiceLifecycle", targets: ["CrumbsServiceLifecycle"]),
    .library(name: "CrumbsTracing", targets: ["CrumbsTracing"]),
    .library(name: "CrumbsMetrics", targets: ["CrumbsMetrics"]),
    .library(name: "CrumbsHummingbird", targets: ["CrumbsHummingbird"]),
    .library(name: "CrumbsVapor", targets: ["CrumbsVapor"]),
    .executable(name: "crumbs", targets: ["CrumbsCLI"]),
  ],
  // Off by default: SwiftPM resolves a dependency only a disabled trait uses for no one, so a
  // consumer of `Crumbs` clones neither framework (`.package(url:…, traits: ["Vapor"])` opts in).
  traits: [
    .trait(name: "Hummingbird", description: "Builds CrumbsHummingbird, the Hummingbird 2 middleware"),
    .trait(name: "Vapor", description: "Builds CrumbsVapor, the Vapor 4 middleware"),
  ],
  dependencies: [
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
    .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
    // Without its default traits: the middleware needs none of them, and a consumer that turns
    // them off (as the README's server does) keeps them off.
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
    .package(url: "https://github.com/vapor/vapor", from: "4.122.3"),
  ],
  targets: [
    // The signal path's rooms are folders (docs/crash-capture.md): its C files include a private
    // header by its room, `#include "kit/crumbs_format.h"`; include/ is what Swift imports.
    .target(name: "CrumbsSignalPath", cSettings: [.headerSearchPath(".")]),
    .systemLibrary(
      name: "CLZ4",
      pkgConfig: "liblz4",
      providers: [.apt(["liblz4-dev"])]
    ),
    .systemLibrary(
      name: "CZlib",
      pkgConfig: "zlib",
      providers: [.apt(["zlib1g-dev"])]
    ),
    .target(
      name: "CrumbsPlatform",
      dependencies: [.product(name: "SystemPackage", package: "swift-system")]
    ),
    .target(
      name: "CrumbsRecorder",
      dependencies: [
        "CrumbsSignalPath", "CrumbsPlatform",
        .product(name: "SystemPackage", package: "swift-system"),
      ]
    ),
    .target(name: "CrumbsReports", dependencies: ["CrumbsRecorder", "CrumbsPlatform", "CLZ4"]),
    // libcurl's easy interface through dlopen (CrumbsDelivery's transport): nothing links libcurl.
    .target(name: "CCurlLoader", linkerSettings: [.linkedLibrary("dl")]),
    .target(
      name: "CrumbsDelivery",
      dependencies: ["CrumbsReports", "CrumbsRecorder", "CrumbsPlatform", "CZlib", "CCurlLoader"]),
    .target(
      name: "Crumbs",
      dependencies: ["CrumbsDelivery", "CrumbsReports", "CrumbsRecorder", "CrumbsPlatform"]
    ),
    .target(
      name: "CrumbsLogging",
      dependencies: ["CrumbsRecorder", .product(name: "Logging", package: "swift-log")]
    ),
    .target(
      name: "CrumbsServiceLifecycle",
      dependencies: ["Crumbs", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")]
    ),
    .target(
      name: "CrumbsTracing",
      dependencies: [
        "Crumbs", .product(name: "Instrumentation", package: "swift-distributed-tracing"),
        .product(name: "Tracing", package: "swift-distributed-tracing"),
      ]
    ),
    .target(
      name: "CrumbsMetrics",
      dependencies: ["Crumbs", .product(name: "CoreMetrics", package: "swift-metrics")]
    ),
    .target(
      name: "CrumbsHummingbird",
      dependencies: [
        "Crumbs",
        .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
      ]
    ),
    .target(
      name: "CrumbsVapor",
      dependencies: [
        "Crumbs", .product(name: "Vapor", package: "vapor", condition: .when(traits: ["Vapor"])),
      ]
    ),
    // The collector as a library: the CLI parses `crumbs collect`'s arguments and prints.
    .target(name: "CrumbsCollector", dependencies: ["Crumbs", "CrumbsPlatform"]),
    .executableTarget(
      name: "CrumbsCLI",
      dependencies: [
        "CrumbsPlatform",
        "Crumbs",
        "CrumbsCollector",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ]
    ),
    // A child process for tests: appends, gets killed or crashes on demand.
    // Test-only C: signal handlers that append, for tests and the test child.
    .target(
      name: "CrumbsTestSupportC",
      dependencies: ["CrumbsSignalPath"],
      path: "Tests/CrumbsTestSupportC"
    ),
    // Test-only C: the signal path's test hooks and the pure pieces tests feed a buffer. The
    // product reaches the hooks only through kit/crumbs_hooks.h's table, NULL unless this target
    // arms it, so a release build links none of it.
    .target(
      name: "CrumbsSignalPathTesting",
      dependencies: ["CrumbsSignalPath"],
      path: "Tests/CrumbsSignalPathTesting",
      cSettings: [.headerSearchPath("../../Sources/CrumbsSignalPath")]
    ),
    // Test-only C: the exact ways the test child crashes (null store, divide, assert, SIGBUS...).
    .target(name: "CrumbsTestChildC", path: "Tests/CrumbsTestChildC"),
    .executableTarget(
      name: "CrumbsTestChild",
      dependencies: [
        "CrumbsPlatform", "Crumbs", "CrumbsSignalPath", "CrumbsSignalPathTesting", "CrumbsTestSupportC",
        "CrumbsTestChildC", "CrumbsTracing",
      ],
      path: "Tests/CrumbsTestChild"
    ),
    // Fuzz targets: plain executables in a normal build, libFuzzer drivers when built with
    // `-sanitize=fuzzer` (see Fuzz/README.md).
    .target(name: "CFuzzDriver", path: "Fuzz/CFuzzDriver"),
    .target(name: "FuzzSupport", dependencies: ["CFuzzDriver"], path: "Fuzz/Support"),
    .executableTarget(
      name: "FuzzRingReader",
      dependencies: ["CrumbsRecorder", "CrumbsSignalPath", "CFuzzDriver", "FuzzSupport"],
      path: "Fuzz/RingReader"
    ),
    .executableTarget(
      name: "FuzzCrashRecordReader",
      dependencies: ["CrumbsRecorder", "CrumbsSignalPath", "CFuzzDriver", "FuzzSupport"],
      path: "Fuzz/CrashRecordReader"
    ),
    .executableTarget(
      name: "FuzzStoredReport",
      dependencies: ["CrumbsReports", "CFuzzDriver", "FuzzSupport"],
      path: "Fuzz/StoredReport"
    ),
    .executableTarget(
      name: "FuzzELFReader",
      dependencies: ["CrumbsReports", "CFuzzDriver", "FuzzSupport"],
      path: "Fuzz/ELFReader"
    ),
    .executableTarget(
      name: "FuzzCFIReader",
      dependencies: ["CrumbsSignalPath", "CrumbsSignalPathTesting", "CFuzzDriver", "FuzzSupport"],
      path: "Fuzz/CFIReader"
    ),
    .executableTarget(
      name: "FuzzELFSymbol",
      dependencies: ["CrumbsSignalPath", "CrumbsSignalPathTesting", "CFuzzDriver", "FuzzSupport"],
      path: "Fuzz/ELFSymbol"
    ),
    .executableTarget(
      name: "FuzzHTTPHeaders",
      dependencies: ["CrumbsDelivery", "CFuzzDriver", "FuzzSupport"],
      path: "Fuzz/HTTPHeaders"
    ),
    .executableTarget(
      name: "FuzzHTTPResponse",
      dependencies: ["CrumbsDelivery", "CFuzzDriver", "FuzzSupport"],
      path: "Fuzz/HTTPResponse"
    ),
    .executableTarget(
      name: "FuzzThreadDump",
      dependencies: ["CrumbsPlatform", "CrumbsReports", "CrumbsRecorder", "CFuzzDriver", "FuzzSupport"],
      path: "Fuzz/ThreadDump"
    ),
    .executableTarget(
      name: "FuzzCrashLoopTally",
      dependencies: ["Crumbs", "CFuzzDriver", "FuzzSupport"],
      path: "Fuzz/CrashLoopTally"
    ),
    .executableTarget(
      name: "FuzzTrailEntries",
      dependencies: ["CrumbsDelivery", "CrumbsReports", "CrumbsRecorder", "CFuzzDriver", "FuzzSupport"],
      path: "Fuzz/TrailEntries"
    ),
    .executableTarget(
      name: "FuzzSessionFile",
      dependencies: ["CrumbsRecorder", "CrumbsReports", "CFuzzDriver", "FuzzSupport"],
      path: "Fuzz/SessionFile"
    ),
    .executableTarget(
      name: "FuzzSourceLines",
      dependencies: ["CrumbsReports", "CFuzzDriver", "FuzzSupport"],
      path: "Fuzz/SourceLines"
    ),
    // Tests: one target per module, plus the crash scenarios and the fuzz regressions, and what
    // they share in three layers, each needing only the modules below what it tests
    // (Scripts/check-dependency-closure.py, run by `make test`, keeps these arrows):
    //   CrumbsTestSupport          recorder level: spawning children (the test child, the CLI, a
    //                              consumer package), temporary directories, start gates, threads,
    //                              core dumps, shared libraries, the crash-scenario runner, the
    //                              process-wide-state lock. Needs only the recorder.
    //   CrumbsReportTestSupport    report fixtures and the next launch after a crash scenario.
    //   CrumbsDeliveryTestSupport  the other end of the wire: a loopback HTTP server, the
    //                              official OTLP decoder.
    .target(
      name: "CrumbsTestSupport",
      dependencies: [
        "CrumbsPlatform", "CrumbsRecorder", .product(name: "SystemPackage", package: "swift-system"),
      ],
      path: "Tests/CrumbsTestSupport"
    ),
    .target(
      name: "CrumbsReportTestSupport",
      dependencies: ["CrumbsPlatform", "CrumbsReports", "CrumbsRecorder", "CrumbsTestSupport"],
      path: "Tests/CrumbsReportTestSupport"
    ),
    .target(
      name: "CrumbsDeliveryTestSupport",
      dependencies: ["CrumbsPlatform", "CrumbsTestSupport"],
      path: "Tests/CrumbsDeliveryTestSupport"
    ),
    // Never Crumbs, CrumbsReports or CrumbsDelivery here: these prove the recorder stands alone.
    .testTarget(
      name: "CrumbsRecorderTests",
      dependencies: [
        "CrumbsPlatform",
        "CrumbsRecorder", "CrumbsSignalPath", "CrumbsSignalPathTesting", "CrumbsTestSupport",
        "CrumbsTestSupportC", .product(name: "SystemPackage", package: "swift-system"),
      ],
      swiftSettings: testFileImports
    ),
    .testTarget(
      name: "CrumbsReportsTests",
      dependencies: [
        "CrumbsPlatform",
        "CrumbsReports", "CrumbsRecorder", "CrumbsSignalPath", "CrumbsSignalPathTesting", "CrumbsTestSupport",
        "CrumbsReportTestSupport",
      ],
      swiftSettings: testFileImports
    ),
    .testTarget(
      name: "CrumbsDeliveryTests",
      dependencies: [
        "CrumbsPlatform",
        "CrumbsDelivery", "CrumbsReports", "CrumbsRecorder", "CrumbsTestSupport", "CrumbsReportTestSupport",
        "CrumbsDeliveryTestSupport", "CrumbsTestSupportC",
      ],
      swiftSettings: testFileImports
    ),
    .testTarget(
      name: "CrumbsTests",
      dependencies: [
        "CrumbsPlatform",
        "Crumbs", "CrumbsDelivery", "CrumbsReports", "CrumbsRecorder", "CrumbsSignalPath",
        "CrumbsTestSupport", "CrumbsReportTestSupport", "CrumbsDeliveryTestSupport", "CrumbsTestSupportC",
      ],
      swiftSettings: testFileImports
    ),
    // Real children crash (debug and release, Swift backtracer on and off) and the next launch's
    // report is checked end to end: the record the recorder left, read by the reports (Crumbs
    // for the client's `CrashKind`, the ways the test child crashes on purpose).
    .testTarget(
      name: "CrumbsCrashScenarioTests",
      dependencies: [
        "CrumbsPlatform",
        "Crumbs", "CrumbsReports", "CrumbsRecorder", "CrumbsSignalPath", "CrumbsSignalPathTesting",
        "CrumbsTestSupport", "CrumbsReportTestSupport",
      ],
      swiftSettings: testFileImports
    ),
    // Every input a fuzzer ever crashed on (Fuzz/Regressions) and every seed (Fuzz/Corpus),
    // replayed through its parser.
    .testTarget(
      name: "CrumbsFuzzRegressionTests",
      dependencies: [
        "CrumbsPlatform", "CrumbsDelivery", "CrumbsReports", "CrumbsRecorder", "CrumbsSignalPath",
        "CrumbsSignalPathTesting",
      ],
      swiftSettings: testFileImports
    ),
    .testTarget(
      name: "CrumbsLoggingTests",
      dependencies: [
        "CrumbsPlatform",
        "CrumbsLogging", "CrumbsRecorder", "CrumbsTestSupport",
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: testFileImports
    ),
    .testTarget(
      name: "CrumbsTracingTests",
      dependencies: [
        "CrumbsTracing", "Crumbs", "CrumbsTestSupport", "CrumbsReportTestSupport",
        .product(name: "Instrumentation", package: "swift-distributed-tracing"),
        .product(name: "Tracing", package: "swift-distributed-tracing"),
      ],
      swiftSettings: testFileImports
    ),
    .testTarget(
      name: "CrumbsMetricsTests",
      dependencies: [
        "CrumbsMetrics", "Crumbs", "CrumbsTestSupport",
        .product(name: "CoreMetrics", package: "swift-metrics"),
        .product(name: "MetricsTestKit", package: "swift-metrics"),
      ],
      swiftSettings: testFileImports
    ),
    // The CLI run as a process, and the collector it runs driven as a library too.
    .testTarget(
      name: "CrumbsCLITests",
      dependencies: [
        "CrumbsPlatform", "CrumbsCollector", "Crumbs",
        "CrumbsDelivery", "CrumbsReports", "CrumbsRecorder", "CrumbsTestSupport", "CrumbsReportTestSupport",
        "CrumbsDeliveryTestSupport",
      ],
      swiftSettings: testFileImports
    ),
  ]
)
