// DamagedClientFile.swift — what the client does with one of its own small state files
// (`crash-loop.json`, `session-metrics.json`) that it cannot read: moves it to `quarantine/`
// with its reason (Quarantine, as rings, crash records and report folders are), so the state
// starts again from empty without the old bytes being overwritten, and says so in one sentence
// for the app's `problems` (or the collector's stderr). Bad input is reported and kept, never
// silently replaced. Called under the file's own lock, right before the replacement is
// written. Not signal-safe.

import CrumbsPlatform

enum DamagedClientFile {
  /// Moves `file` (in the Crumbs directory `directory`) to `directory/quarantine/` with
  /// `damage` as its reason; the sentence naming what happened. A file that cannot be moved is
  /// left where it is and the sentence says so (the caller then replaces it: a state file that
  /// stays unreadable would stop every count).
  static func quarantine(_ file: String, directory: String, what: String, damage: String) -> String {
    let folder = directory + "/quarantine"
    do {
      if !Syscall.isDirectory(folder) { try Syscall.makeDirectory(folder) }
      let moved = try Quarantine.move(file, into: folder, reason: "\(what) damaged: \(damage)")
      return "\(what) \(file) damaged (\(damage)); moved to \(moved), counting again from empty"
    } catch {
      return "\(what) \(file) damaged (\(damage)) and could not be quarantined (\(error)); replaced"
    }
  }
}
