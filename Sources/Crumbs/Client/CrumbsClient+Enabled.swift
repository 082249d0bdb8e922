// CrumbsClient+Enabled.swift — the persisted on/off switch (the directory's `disabled` file,
// CrumbsDirectory): disabled records nothing and sends nothing, across launches.

import CrumbsPlatform
import Synchronization

extension CrumbsClient {
  /// Whether Crumbs records and sends (persisted across launches).
  public var isEnabled: Bool { crumbsDirectory.isEnabled }

  /// Turns Crumbs off (no breadcrumbs, no crash handler, no delivery) or back on; persisted.
  public func setEnabled(_ enabled: Bool) {
    if enabled {
      try? crumbsDirectory.setEnabled(true)
      ring.setFilter(
        minimumLevel: configuration.ring.minimumLevel, enabledTypes: configuration.ring.enabledTypes)
      if configuration.installsCrashHandler {
        _ = try? CrashHandler.install(ring: ring, options: configuration.crashHandler)
      }
      startAutomaticBreadcrumbs()
      uploader?.start()
    } else {
      try? crumbsDirectory.setEnabled(false)
      ring.setFilter(minimumLevel: .debug, enabledTypes: [])
      CrashHandler.uninstall()
      stopAutomaticBreadcrumbs()
      uploader?.stop(timeout: configuration.closeTimeout)
    }
  }

  /// The Crumbs directory's shared state (the `disabled` switch, consent, counts).
  var crumbsDirectory: CrumbsDirectory { CrumbsDirectory(configuration.directory) }
}
