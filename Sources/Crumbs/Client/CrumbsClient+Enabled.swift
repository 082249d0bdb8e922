// CrumbsClient+Enabled.swift — the persisted on/off switch (the directory's `disabled` file,
// CrumbsDirectory): disabled records nothing and sends nothing, across launches. CRUMBS_DISABLED
// turns one process's client off the same way, without persisting anything.

import CrumbsPlatform
import Synchronization

extension CrumbsClient {
  /// Whether Crumbs records and sends: neither the directory's persisted switch nor
  /// CRUMBS_DISABLED (for this process) turned it off.
  public var isEnabled: Bool { !turnedOffByEnvironment.withLock { $0 } && crumbsDirectory.isEnabled }

  /// Turns Crumbs off (no breadcrumbs, no crash handler, no delivery) or back on; persisted.
  /// Turning it on also overrides CRUMBS_DISABLED for this process: code wins.
  public func setEnabled(_ enabled: Bool) {
    if enabled {
      try? crumbsDirectory.setEnabled(true)
      turnedOffByEnvironment.withLock { $0 = false }
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
