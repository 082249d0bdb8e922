// CrumbsClient+Enabled.swift — the persisted on/off switch: disabled records nothing and
// sends nothing, across launches.

import CrumbsPlatform
import Synchronization

extension CrumbsClient {
  /// Whether Crumbs records and sends (persisted across launches).
  public var isEnabled: Bool { Self.persistedEnabled(configuration.directory) }

  /// Turns Crumbs off (no breadcrumbs, no crash handler, no delivery) or back on; persisted.
  public func setEnabled(_ enabled: Bool) {
    let path = configuration.directory + "/disabled"
    if enabled {
      _ = try? Syscall.unlink(path)
      ring.setFilter(
        minimumLevel: configuration.ring.minimumLevel, enabledTypes: configuration.ring.enabledTypes)
      if configuration.installsCrashHandler {
        _ = try? CrashHandler.install(ring: ring, options: configuration.crashHandler)
      }
      startAutomaticBreadcrumbs()
      uploader?.start()
    } else {
      try? Syscall.writeFileAtomically(path, Array("disabled\n".utf8))
      ring.setFilter(minimumLevel: .debug, enabledTypes: [])
      CrashHandler.uninstall()
      stopAutomaticBreadcrumbs()
      uploader?.stop(timeout: configuration.closeTimeout)
    }
  }

  static func persistedEnabled(_ directory: String) -> Bool {
    !Syscall.fileExists(directory + "/disabled")
  }
}
