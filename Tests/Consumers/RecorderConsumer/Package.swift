// swift-tools-version:6.1
// A user's program that only records: it depends on the `CrumbsRecorder` product and nothing
// else. `ConsumerPackageTests` copies this folder, points the path dependency at the Crumbs
// checkout, builds it, runs it, and checks with ldd what the binary links.
import PackageDescription

let package = Package(
  name: "RecorderConsumer",
  dependencies: [.package(name: "Crumbs", path: "../../..")],
  targets: [
    .executableTarget(
      name: "RecorderConsumer",
      dependencies: [.product(name: "CrumbsRecorder", package: "Crumbs")]
    )
  ]
)
