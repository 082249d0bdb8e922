// ConsumerPackageTests.swift — Crumbs used the way users use it: from another package, through
// its public products only. The consumer's own Package.swift names the product; nothing here
// reaches into the package's internals except to read back what the consumer recorded.

import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized) struct ConsumerPackageTests {
  @Test func aRecorderOnlyProgramLinksNoFoundationCurlOrICUAndRecords() throws {
    let directory = TestDirectory()
    let executable = try ConsumerPackage.build("RecorderConsumer", in: directory)

    let ldd = try Subprocess.run("/usr/bin/ldd", [executable], timeoutMilliseconds: 60_000)
    let libraries = String(decoding: ldd.standardOutput, as: UTF8.self).split(separator: "\n")
    #expect(ldd.exitStatus == 0)
    #expect(libraries.contains { $0.contains("libswiftCore.so") })  // ldd really listed it
    for forbidden in ["libFoundation", "libcurl", "libicu", "libxml2", "libgnutls"] {
      let found = libraries.filter { $0.contains(forbidden) }
      #expect(found.isEmpty, "the recorder consumer links \(found)")
    }
    print("recorder consumer links \(libraries.count) shared libraries")

    let crumbsDirectory = directory.file("crumbs")
    let run = try Subprocess.run(executable, [crumbsDirectory], timeoutMilliseconds: 60_000)
    #expect(run.exitStatus == 0, "\(String(decoding: run.standardError, as: UTF8.self))")
    let ringPath = String(decoding: run.standardOutput, as: UTF8.self).split(separator: "\n").first ?? ""
    let contents = try RingReader.read(file: String(ringPath))
    #expect(contents.header.state == .clean)
    #expect(contents.header.appName == "recorder-consumer")
    #expect(contents.breadcrumbs.map(\.message) == ["GET /items → 200", "consumer done"])
    #expect(contents.breadcrumbs.first?.attributes.first?.value == "200")
  }
}
