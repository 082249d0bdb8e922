// ProcessAttributes+Linux.swift — process, OS and host facts for reports, with OpenTelemetry
// resource attribute names. Read at report time, never in a signal handler.

#if canImport(Glibc)
  import Glibc
#endif

package enum ProcessAttributes {
  /// OTel resource attributes of this machine and, where given, of the process that crashed.
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
      "telemetry.sdk.name": "crumbs",
      "telemetry.sdk.language": "swift",
      "telemetry.sdk.version": CrumbsVersion.string,
      "os.type": "linux",
    ]
    if let appVersion { attributes["service.version"] = appVersion }
    var names = utsname()
    if uname(&names) == 0 {
      attributes["os.version"] = field(names.release)
      attributes["os.kernel.build"] = field(names.version)
      attributes["host.arch"] = normalizedArchitecture(field(names.machine))
      attributes["host.name"] = field(names.nodename)
    }
    if let release = osRelease() { attributes["os.description"] = release }
    if let total = meminfo("MemTotal") { attributes["host.memory.total_bytes"] = String(total) }
    if let available = meminfo("MemAvailable") {
      attributes["host.memory.available_bytes"] = String(available)
    }
    return attributes
  }

  private static func field<T>(_ tuple: T) -> String {
    withUnsafeBytes(of: tuple) { raw in
      String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }
  }

  private static func normalizedArchitecture(_ machine: String) -> String {
    switch machine {
    case "x86_64": "amd64"
    case "aarch64": "arm64"
    default: machine
    }
  }

  /// PRETTY_NAME from /etc/os-release, e.g. "Debian GNU/Linux 12 (bookworm)".
  package static func osRelease(file: String = "/etc/os-release") -> String? {
    guard let bytes = try? Syscall.readFile(file, limit: 1 << 16) else { return nil }
    for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n")
    where line.hasPrefix("PRETTY_NAME=") {
      return String(line.dropFirst("PRETTY_NAME=".count)).trimmingCharacters(in: "\"")
    }
    return nil
  }

  /// A /proc/meminfo field in bytes.
  package static func meminfo(_ name: String, file: String = "/proc/meminfo") -> UInt64? {
    guard let bytes = try? Syscall.readFile(file, limit: 1 << 16) else { return nil }
    for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n")
    where line.hasPrefix(name + ":") {
      let fields = line.split(separator: " ")
      guard fields.count >= 2, let kilobytes = UInt64(fields[1]) else { return nil }
      let (bytes, overflow) = kilobytes.multipliedReportingOverflow(by: 1024)
      return overflow ? nil : bytes
    }
    return nil
  }
}

/// This library's version, reported as `telemetry.sdk.version`.
public enum CrumbsVersion {
  public static let string = "0.1.0"
}
