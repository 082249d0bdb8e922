// DebugFileLocator.swift — where a module's symbols are when its own file has none: stripped
// release binaries (the norm in production images) keep only module, offset and build ID, and
// the unstripped binary or its `.debug` file lives on the developer's machine or in a symbols
// directory.
//
// Entry points, in call order:
//   DebugFileLocator(directories:)           nothing is read yet
//   locator.file(buildID:modulePath:debugLink:)  the first file whose GNU build ID matches, tried
//                                            in this order:
//     1. <dir>/.build-id/xx/rest.debug for each directory, then /usr/lib/debug: the layout
//        distributions ship and `objcopy --only-keep-debug` users copy into
//     2. the module's `.gnu_debuglink` name: <dir>/NAME for each directory, then beside the
//        module (<module dir>/NAME, <module dir>/.debug/NAME, /usr/lib/debug<module dir>/NAME)
//     3. every ELF file under the directories (indexed once, on the first miss: at most
//        `maxDepth` levels and `maxFiles` files; symbolic links to files are followed, to
//        directories not): a folder of unstripped binaries works as it is
//
// A candidate counts only when its build ID equals the module's: a file of the right name from
// another build is never used. Files are untrusted input (ELFImage.read bounds every read).
// Not signal-safe; not thread-safe (caches).

import CrumbsPlatform
import CrumbsRecorder

public final class DebugFileLocator {
  /// The directories searched, in order; /usr/lib/debug is searched after them.
  public let directories: [String]
  /// How deep and how wide the index of step 3 goes.
  public static let maxDepth = 4
  public static let maxFiles = 20_000

  private static let systemDebugRoot = "/usr/lib/debug"
  /// Build ID (hex) → path, from step 3; nil until built.
  private var index: [String: String]?
  /// Build IDs read per path (nil: not an ELF file).
  private var buildIDs: [String: [UInt8]?] = [:]

  public init(directories: [String]) {
    self.directories = directories.map { $0.count > 1 && $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
  }

  /// The path of a file with this build ID holding the module's symbols, or nil.
  public func file(buildID: [UInt8], modulePath: String, debugLink: String?) -> String? {
    guard !buildID.isEmpty else { return nil }
    let hex = LoadedModule.hex(buildID)
    let roots = directories + [Self.systemDebugRoot]
    var candidates = roots.map { $0 + "/.build-id/" + hex.prefix(2) + "/" + hex.dropFirst(2) + ".debug" }
    if let debugLink {
      let moduleDirectory = Syscall.directoryName(of: modulePath)
      candidates += directories.map { $0 + "/" + debugLink }
      candidates += [
        moduleDirectory + "/" + debugLink, moduleDirectory + "/.debug/" + debugLink,
        Self.systemDebugRoot + moduleDirectory + "/" + debugLink,
      ]
    }
    if let found = candidates.first(where: { self.buildID(of: $0) == buildID }) { return found }
    if index == nil { index = buildIndex() }
    return index?[hex]
  }

  private func buildID(of path: String) -> [UInt8]? {
    if let known = buildIDs[path] { return known }
    let found = try? ELFImage.read(path: path, symbols: false).buildID
    let result = found.flatMap { $0.isEmpty ? nil : $0 }
    buildIDs[path] = result
    return result
  }

  /// Build ID → path for every ELF file under the directories (the first found wins).
  private func buildIndex() -> [String: String] {
    var found: [String: String] = [:]
    for path in Self.files(under: directories) {
      guard let buildID = buildID(of: path) else { continue }
      let hex = LoadedModule.hex(buildID)
      if found[hex] == nil { found[hex] = path }
    }
    return found
  }

  /// Every file under `directories` (a path that is a file is itself), folders in breadth-first
  /// order and names sorted within each: at most `maxDepth` levels and `maxFiles` files.
  /// Symbolic links to directories are not followed (no loops, no escaping the tree).
  package static func files(under directories: [String]) -> [String] {
    var files: [String] = []
    var queue: [(path: String, depth: Int)] = []
    for path in directories {
      if Syscall.isDirectory(path) {
        queue.append((path, 0))
      } else if Syscall.fileExists(path) {
        files.append(path)
      }
    }
    while !queue.isEmpty, files.count < maxFiles {
      let (folder, depth) = queue.removeFirst()
      for name in ((try? Syscall.directoryEntries(folder)) ?? []).sorted() where files.count < maxFiles {
        let path = folder + "/" + name
        if Syscall.isDirectory(path) {
          if depth + 1 < maxDepth, Syscall.readLink(path) == nil { queue.append((path, depth + 1)) }
          continue
        }
        files.append(path)
      }
    }
    return files
  }
}
