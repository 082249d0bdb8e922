// ProcessAttributes+Linux.swift — process, OS and host facts for reports, with OpenTelemetry
// resource attribute names. Read at report time, never in a signal handler.

import CrumbsPlatform
import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

package enum ProcessAttributes {
  /// The one attribute naming the machine, which an app may keep out of its reports.
  package static let hostNameKey = "host.name"

  /// Who the process is: OTel resource attributes that hold for its whole life (registry names
  /// and types; the values are strings here, typed where they are sent). The machine's facts
  /// are `machine()`'s.
  package static func resource(
    pid: Int32, executable: String, appName: String, appVersion: String? = nil
  ) -> [String: String] {
    var attributes: [String: String] = [
      "service.name": appName.isEmpty
        ? (executable.split(separator: "/").last.map(String.init) ?? "unknown") : appName,
      "process.pid": String(pid),
      "process.executable.path": executable,
      "process.executable.name": executable.split(separator: "/").last.map(String.init) ?? "",
      "process.runtime.name": "swift",
      "process.runtime.version": swiftVersion,
      "telemetry.sdk.name": "crumbs",
      "telemetry.sdk.language": "swift",
      "telemetry.sdk.version": CrumbsVersion.string,
      "os.type": "linux",
    ]
    if let appVersion { attributes["service.version"] = appVersion }
    return attributes
  }

  /// The machine as it is when called: `os.name`, `os.version` (the kernel release),
  /// `os.description`, `host.arch`, `host.name`, and what the registry has no name for under
  /// `crumbs.*` (`crumbs.os.kernel_build`, `crumbs.host.memory.total_bytes`). A session records
  /// them at its start (SessionMetadata.resource), so a crash is reported with the machine it
  /// ran on, not the one that read it.
  package static func machine() -> [String: String] {
    var attributes: [String: String] = [:]
    var names = utsname()
    if uname(&names) == 0 {
      attributes["os.version"] = field(names.release)
      attributes["crumbs.os.kernel_build"] = field(names.version)
      attributes["host.arch"] = normalizedArchitecture(field(names.machine))
      attributes[hostNameKey] = field(names.nodename)
    }
    if let release = SystemFacts.osRelease("NAME") { attributes["os.name"] = release }
    if let release = SystemFacts.osRelease() { attributes["os.description"] = release }
    if let total = SystemFacts.meminfo("MemTotal") {
      attributes["crumbs.host.memory.total_bytes"] = String(total)
    }
    return attributes
  }

  /// The Swift version this code was compiled with (`process.runtime.version`): the runtime a
  /// Swift program on Linux runs with is the toolchain's it was built by.
  package static var swiftVersion: String {
    #if compiler(>=6.5)
      "6.5"
    #elseif compiler(>=6.4)
      "6.4"
    #elseif compiler(>=6.3)
      "6.3"
    #elseif compiler(>=6.2)
      "6.2"
    #elseif compiler(>=6.1)
      "6.1"
    #else
      "6.0"
    #endif
  }

  private static func field<T>(_ tuple: T) -> String {
    withUnsafeBytes(of: tuple) { raw in
      String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }
  }

  /// OpenTelemetry's `host.arch` for a machine name (uname's, or a crash record's
  /// architecture): amd64 and arm64, as the semantic conventions spell them.
  static func normalizedArchitecture(_ machine: String) -> String {
    switch machine {
    case "x86_64": "amd64"
    case "aarch64": "arm64"
    default: machine
    }
  }
}
