// ParsedModuleCache.swift — the module files this process has parsed (ELFImage: symbol tables,
// build ID), kept for the next Symbolicator. The next launch's processing names the previous
// crash from the app's own modules; a later non-fatal report, hang report or thread dump (each a
// Symbolicator of its own, or a new one after a dlopen changed the module list) then parses
// none of them again.
//
// Entry points, in call order:
//   ParsedModuleCache.shared.image(for:parse:)           the image kept for the file as it is
//                                                        now, else `parse()`'s, kept
//   Symbolicator.forgetParsedModules()                   drops them all (public: frees the
//                                                        memory; the benchmarks time a cold
//                                                        next launch with it)
//   parseCount, parseCount(of:)                          files parsed through the cache (tests)
//
// Keyed by the file as found now: path, device and inode, size and modification time (`stat`,
// links followed). A file replaced by a rename, or rewritten in place, has another key and is
// parsed again; the Symbolicator still checks each image's build ID against the module map's.
// Only readable images are kept: a failure is cheap to find again and may not last.
//
// Bounded: at most `maxEntries` images and `maxBytes` of tables (their pages), the least
// recently used dropped first; an image larger than `maxBytes` alone is used but not kept.
// Images never change once parsed (SortedSymbols is immutable), so one may serve several
// threads. Thread-safe: a Mutex around the table, parsing outside it (two threads may parse one
// file at once; one result is kept). Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder
import Synchronization

package final class ParsedModuleCache: Sendable {
  /// The process-wide cache every Symbolicator reads through.
  package static let shared = ParsedModuleCache()

  /// A file as `stat` found it: another file (or the same one changed) is another key.
  package struct Key: Hashable, Sendable {
    package var path: String
    package var fileID: Syscall.EntryStatus.FileID
    package var size: Int
    package var modifiedNanoseconds: UInt64

    package init(path: String, status: Syscall.EntryStatus) {
      self.path = path
      fileID = status.fileID
      size = status.size
      modifiedNanoseconds = status.modifiedNanoseconds
    }
  }

  private struct Entry {
    var image: ELFImage
    var bytes: Int
    var lastUse: UInt64
  }

  private struct State {
    var entries: [Key: Entry] = [:]
    var bytes = 0
    var clock: UInt64 = 0
    var parses = 0
    /// Parses by path (a few dozen paths in a process's life: module paths).
    var parsesByPath: [String: Int] = [:]
  }

  package let maxEntries: Int
  package let maxBytes: Int
  private let state = Mutex(State())

  /// 64 modules (more than a Swift server maps) and 256 MiB of tables.
  package init(maxEntries: Int = 64, maxBytes: Int = 256 << 20) {
    self.maxEntries = maxEntries
    self.maxBytes = maxBytes
  }

  /// The image kept for the file `key` names, else the one `parse` makes (kept when it fits).
  package func image(for key: Key, parse: () throws(PersistedFileError) -> ELFImage)
    throws(PersistedFileError) -> ELFImage
  {
    let found: ELFImage? = state.withLock { state in
      state.clock += 1
      guard var entry = state.entries[key] else { return nil }
      entry.lastUse = state.clock
      state.entries[key] = entry
      return entry.image
    }
    if let found { return found }
    state.withLock { state in
      state.parses += 1
      state.parsesByPath[key.path, default: 0] += 1
    }
    let image = try parse()
    keep(image, for: key)
    return image
  }

  private func keep(_ image: ELFImage, for key: Key) {
    let bytes = image.symbolBytes
    guard bytes <= maxBytes, maxEntries > 0 else { return }
    state.withLock { state in
      state.clock += 1
      if let old = state.entries.removeValue(forKey: key) { state.bytes -= old.bytes }
      while !state.entries.isEmpty, state.entries.count >= maxEntries || state.bytes + bytes > maxBytes {
        let oldest = state.entries.min { $0.value.lastUse < $1.value.lastUse }!
        state.entries[oldest.key] = nil
        state.bytes -= oldest.value.bytes
      }
      state.entries[key] = Entry(image: image, bytes: bytes, lastUse: state.clock)
      state.bytes += bytes
    }
  }

  /// Drops every kept image (a Symbolicator holding one keeps it until it goes).
  package func removeAll() {
    state.withLock { state in
      state.entries.removeAll()
      state.bytes = 0
    }
  }

  /// How many files were parsed through the cache since the process started (misses).
  package var parseCount: Int { state.withLock { $0.parses } }

  /// How many times the file at `path` was parsed through the cache (tests: each their own file).
  package func parseCount(of path: String) -> Int { state.withLock { $0.parsesByPath[path] ?? 0 } }

  /// How many images are kept, and their tables' bytes.
  package var usage: (entries: Int, bytes: Int) { state.withLock { ($0.entries.count, $0.bytes) } }
}

extension Symbolicator {
  /// Frees the symbol tables this process has parsed and kept for later symbolication
  /// (ParsedModuleCache): the next Symbolicator reads its modules' files again.
  public static func forgetParsedModules() { ParsedModuleCache.shared.removeAll() }
}
