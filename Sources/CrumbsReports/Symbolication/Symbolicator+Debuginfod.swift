// Symbolicator+Debuginfod.swift — the one place a Symbolicator asks the network for a debug
// file: a module whose own file has no full symbol table or DWARF, or is gone or replaced, and
// that no local symbol directory holds (Symbolicator.symbolFile(for:)).
//
// Entry points: fetchedDebugFile(for:ownFileMissing:) → Options.remoteDebugFiles.file(…), once
// per build ID and kind for a Symbolicator's life; remoteFailure(for:) → the reason a frame
// of such a module stays unnamed, joined to its note.
// Not signal-safe (may wait on the network, within the client's bounds).

import CrumbsRecorder

extension Symbolicator {
  /// The path of a fetched debug file for `module` (its `debuginfo`, and when the module's own
  /// file is gone or replaced, else its `executable`), or nil. Asked once per build ID and kind.
  func fetchedDebugFile(for module: LoadedModule, ownFileMissing: Bool) -> String? {
    guard let remote = options.remoteDebugFiles, !module.buildID.isEmpty else { return nil }
    let kinds: [DebugFileKind] = ownFileMissing ? [.debuginfo, .executable] : [.debuginfo]
    for kind in kinds {
      let key = module.buildIDHex + "/" + kind.rawValue
      var answer = remoteAnswers[key] ?? remote.file(buildID: module.buildID, kind: kind)
      // The file as it is now (a cache folder another user may write) must still be the build.
      if case .success(let path) = answer, case .readable(let image) = cachedImage(path),
        image.buildID != module.buildID
      {
        answer = .failure(.init("the kept file \(path) has another build id"))
      }
      remoteAnswers[key] = answer
      if case .success(let path) = answer { return path }
    }
    return nil
  }

  /// Why no fetched file named `module`'s frames ("debuginfod: …"), when one was asked for.
  func remoteFailure(for module: LoadedModule) -> String? {
    guard options.remoteDebugFiles != nil, !module.buildID.isEmpty else { return nil }
    let hex = module.buildIDHex
    var reasons: [String] = []
    for kind in DebugFileKind.allCases {
      if case .failure(let failure) = remoteAnswers[hex + "/" + kind.rawValue] {
        reasons.append(kind == .debuginfo ? failure.reason : "\(kind.rawValue): \(failure.reason)")
      }
    }
    if reasons.isEmpty {
      // Fetched, but the file did not name this frame (it has no symbol there).
      return nil
    }
    return "debuginfod: " + reasons.joined(separator: "; ")
  }
}

extension Result where Success == ELFImage, Failure == ModuleFailure {
  /// Whether the module's own file is not there to read (gone, or another build in its place).
  var isMissingFile: Bool {
    guard case .failure(let failure) = self else { return false }
    return failure.note == SymbolicatedFrame.Note.moduleGone
      || failure.note == SymbolicatedFrame.Note.buildIDChanged
  }
}
