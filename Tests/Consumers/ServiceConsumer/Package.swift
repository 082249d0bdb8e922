// swift-tools-version:6.1
// A server the way users write one: swift-service-lifecycle's ServiceGroup running the
// `CrumbsServiceLifecycle` product's service beside the server's own. `ServiceConsumerTests`
// copies this folder, points the path dependency at the Crumbs checkout, builds it, sends it
// SIGTERM and checks how the next launch says the session ended.
import PackageDescription

let package = Package(
  name: "ServiceConsumer",
  dependencies: [
    .package(name: "Crumbs", path: "../../.."),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
  ],
  targets: [
    .executableTarget(
      name: "ServiceConsumer",
      dependencies: [
        .product(name: "Crumbs", package: "Crumbs"),
        .product(name: "CrumbsServiceLifecycle", package: "Crumbs"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
      ]
    )
  ]
)
