// swift-tools-version:6.1
// A real Hummingbird 2 server with Crumbs, in a package of its own so the main package's
// `make test` never builds Hummingbird (ExampleServerTests builds it, into
// .build-consumers/HummingbirdServer). Crumbs is a path dependency with its `Hummingbird` trait
// on: that trait builds the CrumbsHummingbird product. It is also what
// `Benchmarks/server-bench.py` (run by `make bench`) measures: one binary, the variant chosen at
// run time (see Sources/.../main.swift).
//
// With CRUMBS_BENCH_OTEL=1 in the environment it also builds against swift-otel (its OTLP/HTTP
// exporter only), for the bench's `otel` and `otel-tracer` variants: about seven minutes more
// of build, so only the bench asks for it (into a scratch path of its own; see
// Benchmarks/server-bench.py), never the tests.
import Foundation
import PackageDescription

let benchesOTel = ProcessInfo.processInfo.environment["CRUMBS_BENCH_OTEL"] == "1"

let package = Package(
  name: "HummingbirdServer",
  platforms: [.macOS(.v14)],
  dependencies: [
    .package(name: "Crumbs", path: "../..", traits: ["Hummingbird"]),
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
    .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.0.0"),
  ],
  targets: [
    .executableTarget(
      name: "HummingbirdServer",
      dependencies: [
        .product(name: "Crumbs", package: "Crumbs"),
        .product(name: "CrumbsServiceLifecycle", package: "Crumbs"),
        .product(name: "CrumbsHummingbird", package: "Crumbs"),
        .product(name: "CrumbsTracing", package: "Crumbs"),
        .product(name: "Tracing", package: "swift-distributed-tracing"),
        .product(name: "Instrumentation", package: "swift-distributed-tracing"),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
      ] + (benchesOTel ? [.product(name: "OTel", package: "swift-otel")] : []),
      swiftSettings: benchesOTel ? [.define("BENCH_OTEL")] : []
    )
  ]
)
if benchesOTel {
  package.dependencies.append(
    .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]))
}
