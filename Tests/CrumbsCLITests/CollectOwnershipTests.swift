// CollectOwnershipTests.swift — a collector never leaves in an app's Crumbs directory a file or
// folder the app cannot use. Two real users (useradd) and real processes run as them (setpriv):
// the app crashes a real child as its own uid; the collector runs as root (it works there as the
// directory's owner) or as another uid in the app's group (it refuses, creating nothing); the
// app's next launch as its uid then works and nothing is reported twice. Root only (it makes
// users and switches to them).

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A system user made once per machine (idempotent), and its ids.
struct TestUser {
  let uid: uid_t
  let gid: gid_t

  /// `name`, made with its own group when missing.
  static func ensure(_ name: String) throws -> TestUser {
    if getpwnam(name) == nil {
      let made = try Subprocess.run(
        "/usr/sbin/useradd",
        ["--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        timeoutMilliseconds: 60_000)
      // Another test process may have made it meanwhile: the lookup below decides.
      _ = made
    }
    let entry = try #require(getpwnam(name), "cannot make the user \(name)")
    return TestUser(uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid)
  }

  /// A group (made when missing) and its id.
  static func ensureGroup(_ name: String) throws -> gid_t {
    if getgrnam(name) == nil {
      _ = try Subprocess.run("/usr/sbin/groupadd", ["-f", name], timeoutMilliseconds: 60_000)
    }
    return try #require(getgrnam(name), "cannot make the group \(name)").pointee.gr_gid
  }

  /// `command` run as this user, with group `gid` and only the supplementary `groups`.
  func argv(_ command: [String], gid: gid_t? = nil, groups: [gid_t] = []) -> (String, [String]) {
    let groupOption =
      groups.isEmpty ? ["--clear-groups"] : ["--groups=" + groups.map(String.init).joined(separator: ",")]
    return (
      "/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(gid ?? self.gid)"] + groupOption + ["--"] + command
    )
  }
}

@Suite(
  .serialized,
  .enabled(
    if: getuid() == 0 && Syscall.fileExists("/usr/bin/setpriv") && Syscall.fileExists("/usr/sbin/useradd"))
)
struct CollectOwnershipTests {
  /// Every entry under `root` (itself included) whose owner is not `uid`, with its owner.
  func notOwned(by uid: uid_t, under root: String) -> [String] {
    var found: [String] = []
    var folders = [root]
    while let folder = folders.popLast() {
      var info = stat()
      guard lstat(folder, &info) == 0 else { continue }
      if info.st_uid != uid { found.append("\(folder) (uid \(info.st_uid))") }
      for name in (try? Syscall.directoryEntries(folder)) ?? [] {
        let path = folder + "/" + name
        guard lstat(path, &info) == 0 else { continue }
        if info.st_mode & S_IFMT == S_IFDIR {
          folders.append(path)
        } else if info.st_uid != uid {
          found.append("\(path) (uid \(info.st_uid))")
        }
      }
    }
    return found
  }

  /// The app, as `app`, crashes in `crumbs`; returns its session.
  func appCrashes(_ app: TestUser, in crumbs: String, groups: [gid_t] = []) throws -> String {
    let (program, arguments) = app.argv([ChildProcess.testChild, "client-crash", crumbs], groups: groups)
    let child = try ChildProcess(program, arguments, environment: ["SWIFT_BACKTRACE": "enable=no"])
    let session = try #require(child.value(after: "session "), "the app did not start")
    #expect(child.wait(seconds: 60) & 0x7f == SIGSEGV)
    return session
  }

  /// The app's next launch, as `app`: a client that starts, delivers and exits. Its output.
  func appLaunchesAgain(_ app: TestUser, in crumbs: String, server: String, groups: [gid_t] = []) throws
    -> [String]
  {
    let (program, arguments) = app.argv(
      [ChildProcess.testChild, "client-cli-flush", crumbs, server, "30"], groups: groups)
    let output = try Subprocess.run(
      program, arguments, environment: ["SWIFT_BACKTRACE": "enable=no"], timeoutMilliseconds: 120_000)
    #expect(output.exitStatus == 0, "the app's next launch failed: \(output)")
    return String(decoding: output.standardOutput + output.standardError, as: UTF8.self)
      .split(separator: "\n").map(String.init)
  }

  /// Reports of `session` the server received (by report id).
  func reportIDs(of session: String, _ arrivals: ServerArrivals) throws -> Set<String> {
    Set(
      try arrivals.reports().filter { attributes($0.record)["session.id"] as? String == session }
        .compactMap { attributes($0.record)["crumbs.report.id"] as? String })
  }

  /// Issue 35 case 6. A collector run as root stored reports/, session files and counts as
  /// root (0700, 0600), and the app's next launch could not use them. Now it works in the
  /// directory as its owner: every file there stays the app's, and the app's next launch works
  /// and reports nothing twice.
  @Test func rootCollectorWorksAsTheDirectoryOwner() throws {
    let app = try TestUser.ensure("crumbs-test-app")
    let directory = TestDirectory()
    chmod(directory.path, 0o755)  // the app may reach its folder
    let crumbs = directory.file("crumbs")
    try Syscall.makeDirectory(crumbs)  // the app's own, as a service's state directory is
    chown(crumbs, app.uid, app.gid)
    let arrivals = try ServerArrivals()
    defer { arrivals.server.stop() }

    let session = try appCrashes(app, in: crumbs)
    let collected = try CLIProcess.run(["collect", "--dir", crumbs, "--otlp", arrivals.server.baseURL])
    #expect(collected.status == 0, "\(collected.stdout)\(collected.stderr)")
    let foreign = notOwned(by: app.uid, under: crumbs)
    #expect(foreign.isEmpty, "the collector left entries the app does not own: \(foreign)")

    let lines = try appLaunchesAgain(app, in: crumbs, server: arrivals.server.baseURL)
    #expect(!lines.contains { $0.hasPrefix("problem") || $0.hasPrefix("error") }, "\(lines)")
    #expect(try reportIDs(of: session, arrivals).count == 1, "the crash is reported once")
    #expect(notOwned(by: app.uid, under: crumbs).isEmpty)
  }

  /// Issue 35 case 6. The group deployment docs/collector.md described (the app's directory
  /// group-writable, the collector another uid in that group) made the collector create
  /// reports/ and session starts as its own uid, and the app's next launch failed on them. Now
  /// a collector of another uid refuses the directory, says why, and creates nothing; the app's
  /// next launch reports the crash itself, once.
  @Test func collectorOfAnotherUidCreatesNothingTheOwnerCannotUse() throws {
    let app = try TestUser.ensure("crumbs-test-app")
    let other = try TestUser.ensure("crumbs-test-collector")
    let share = try TestUser.ensureGroup("crumbs-test-share")
    let directory = TestDirectory()
    chmod(directory.path, 0o755)
    let crumbs = directory.file("crumbs")
    // As the old documentation said: the app's directory, writable by a group both are in.
    try Syscall.makeDirectory(crumbs)
    chown(crumbs, app.uid, share)
    chmod(crumbs, 0o2770)
    let arrivals = try ServerArrivals()
    defer { arrivals.server.stop() }

    let session = try appCrashes(app, in: crumbs, groups: [share])
    let (program, arguments) = other.argv(
      [CLIProcess.executable, "collect", "--dir", crumbs, "--otlp", arrivals.server.baseURL], gid: share)
    let collected = try Subprocess.run(program, arguments, timeoutMilliseconds: 120_000)
    let said = String(decoding: collected.standardError, as: UTF8.self)
    #expect(collected.exitStatus == 1, "\(said)")
    #expect(said.contains("belongs to uid \(app.uid)"), "\(said)")
    let foreign = notOwned(by: app.uid, under: crumbs)
    #expect(foreign.isEmpty, "the collector left entries the app does not own: \(foreign)")

    let lines = try appLaunchesAgain(app, in: crumbs, server: arrivals.server.baseURL, groups: [share])
    #expect(!lines.contains { $0.hasPrefix("problem") || $0.hasPrefix("error") }, "\(lines)")
    #expect(try reportIDs(of: session, arrivals).count == 1, "the crash is reported once")
  }
}
