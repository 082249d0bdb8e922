// swift-tools-version:6.1
// A real Vapor 4 server with Crumbs, in a package of its own so the main package's `make test`
// never builds Vapor (ExampleServerTests builds it, into .build-consumers/VaporServer). Crumbs is
// a path dependency with its `Vapor` trait on: that trait builds the CrumbsVapor product.
import PackageDescription

let package = Package(
  name: "VaporServer",
  platforms: [.macOS(.v13)],
  dependencies: [
    .package(name: "Crumbs", path: "../..", traits: ["Vapor"]),
    .package(url: "https://github.com/vapor/vapor", from: "4.122.3"),
    .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
  ],
  targets: [
    .executableTarget(
      name: "VaporServer",
      dependencies: [
        .product(name: "Crumbs", package: "Crumbs"),
        .product(name: "CrumbsVapor", package: "Crumbs"),
        .product(name: "CrumbsTracing", package: "Crumbs"),
        .product(name: "Tracing", package: "swift-distributed-tracing"),
        .product(name: "Instrumentation", package: "swift-distributed-tracing"),
        .product(name: "Vapor", package: "vapor"),
      ]
    )
  ]
)
