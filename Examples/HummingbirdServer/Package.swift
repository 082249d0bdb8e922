// swift-tools-version:6.1
// A real Hummingbird 2 server with Crumbs, in a package of its own so the main package's
// `make test` never builds Hummingbird (ExampleServerTests builds it, into
// .build-consumers/HummingbirdServer). Crumbs is a path dependency with its `Hummingbird` trait
// on: that trait builds the CrumbsHummingbird product. It is also what
// `Benchmarks/server-bench.py` (run by `make bench`) measures: one binary, the variant chosen at
// run time (see Sources/.../main.swift).
import PackageDescription

let package = Package(
  name: "HummingbirdServer",
  platforms: [.macOS(.v14)],
  dependencies: [
    .package(name: "Crumbs", path: "../..", traits: ["Hummingbird"]),
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
    .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
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
      ]
    )
  ]
)
