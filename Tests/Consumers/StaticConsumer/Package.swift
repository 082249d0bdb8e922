// swift-tools-version:6.1
// A user's program linked statically (`swift build -Xswiftc -static-executable`, glibc's
// libc.a) that records with the `CrumbsRecorder` product. `ConsumerPackageTests` copies this
// folder, points the path dependency at the Crumbs checkout, builds it that way, and checks that
// threads of every kind still start (Crumbs' pthread_create stands in front of libc's) and that
// a crash is still recorded.
import PackageDescription

let package = Package(
  name: "StaticConsumer",
  dependencies: [.package(name: "Crumbs", path: "../../..")],
  targets: [
    .executableTarget(
      name: "StaticConsumer",
      dependencies: [.product(name: "CrumbsRecorder", package: "Crumbs")]
    )
  ]
)
