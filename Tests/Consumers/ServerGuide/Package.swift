// swift-tools-version:6.1
// The README's server: a Hummingbird 2 server under swift-service-lifecycle's ServiceGroup with
// the `CrumbsServiceLifecycle`, `CrumbsLogging` and `CrumbsHummingbird` products (the last
// behind Crumbs' `Hummingbird` trait). Its one source file is not kept
// here: `ServerGuideTests` takes the Swift block that follows README.md's `server-snippet`
// marker, writes it as Sources/ServerGuide/main.swift into a copy of this folder (its path
// dependency pointed at the Crumbs checkout), builds it and runs it, so the README's code is
// the code that is proven to build and to serve.
import PackageDescription

let package = Package(
  name: "ServerGuide",
  dependencies: [
    .package(name: "Crumbs", path: "../../..", traits: ["Hummingbird"]),
    // Without its default traits: swift-configuration and full Foundation are not what the
    // snippet needs, and they would lengthen every first build of this package.
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0", traits: []),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
  ],
  targets: [
    .executableTarget(
      name: "ServerGuide",
      dependencies: [
        .product(name: "Crumbs", package: "Crumbs"),
        .product(name: "CrumbsLogging", package: "Crumbs"),
        .product(name: "CrumbsServiceLifecycle", package: "Crumbs"),
        .product(name: "CrumbsHummingbird", package: "Crumbs"),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
      ]
    )
  ]
)
