// PackageNoteFixtures.swift — systemd package notes for tests: the note section's bytes, and a
// binary given one with objcopy (as any build can add it after linking).

import CrumbsPlatform
import CrumbsReports

extension PackageNote {
  /// An FDO package note (name "FDO\0", type 0xcafe1a7e), as a linker writes it: 4-byte aligned.
  package static func sectionBytes(_ json: String) -> [UInt8] {
    var payload = Array(json.utf8) + [0]
    while payload.count % 4 != 0 { payload.append(0) }
    func le(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
    return le(4) + le(UInt32(payload.count)) + le(PackageNote.noteType) + Array("FDO\0".utf8) + payload
  }

  /// Copies `binary` to `output` with a `.note.package` section holding `json` (the section's
  /// bytes written first to `output` + ".note"); objcopy's exit status and standard error.
  package static func add(_ json: String, to binary: String, output: String) throws -> (Int32?, String) {
    let notes = output + ".note"
    try Syscall.writeFileAtomically(notes, sectionBytes(json))
    let added = try Subprocess.run(
      "/usr/bin/objcopy",
      [
        "--add-section", ".note.package=\(notes)", "--set-section-flags", ".note.package=alloc,readonly",
        "--set-section-alignment", ".note.package=4", binary, output,
      ], timeoutMilliseconds: 120_000)
    return (added.exitStatus, String(decoding: added.standardError, as: UTF8.self))
  }
}
