// Quarantine.swift — moving a file or folder that could not be read out of the way, with its
// reason beside it. Used for rings, crash records and report folders alike: bad input is
// reported and kept, never silently deleted. Not signal-safe.

package enum Quarantine {
  /// Moves `item` into `folder` (keeping its name, made unique with `.2`, `.3`…) and writes the
  /// one-line `reason` to `<new path>.reason`. Returns the new path.
  package static func move(_ item: String, into folder: String, reason: String) throws(SystemCallError)
    -> String
  {
    let name = item.split(separator: "/").last.map(String.init) ?? "item"
    var destination = folder + "/" + name
    var attempt = 1
    while Syscall.fileExists(destination) {
      attempt += 1
      destination = folder + "/\(name).\(attempt)"
    }
    let line = String(reason.map { $0 == "\n" || $0 == "\r" ? " " : $0 }) + "\n"
    try Syscall.writeFileAtomically(destination + ".reason", Array(line.utf8))
    try Syscall.rename(item, to: destination)
    try Syscall.fsyncDirectory(folder)
    return destination
  }
}
