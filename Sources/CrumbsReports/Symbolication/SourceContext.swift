// SourceContext.swift — a few lines of source around each of the app's frames, when the source
// is on this machine (or another SourceProvider has it); redacted afterwards with the rest of
// the report (Redactor.report), capped per report.
//
// Entry points, in call order:
//   report.addSourceContext(_:)          after the frames are named (CrashReportBuilder.crash:
//                                        the next launch and the collector; CrashReport
//                                        .symbolicated: `crumbs symbolicate`, `reports show
//                                        --symbolicate`), before the report is redacted; not for
//                                        the reports a running app makes (no file reads there)
//     → SourceContextReader.add(to:)     each frame in the app's code (the executable) with a
//                                        file and a line, innermost first, until `maxFrames`
//                                        frames or `maxBytes` bytes of lines are taken
//       → provider.source(path:buildID:limit:)   the file's bytes, from the first provider that
//                                        has them (LocalSourceFiles: the path DWARF names, on
//                                        this machine; then, where a debuginfod client is set,
//                                        DebuginfodClient: the server's /buildid/<id>/source),
//                                        read once per report; a fetching provider's failure
//                                        goes into the frame's note
//       → SourceExcerpt.lines(in:around:…)       the lines, split and cut (fuzzed:
//                                        Fuzz/SourceLines)
//
// A path from DWARF is untrusted (a hostile binary can name any file): LocalSourceFiles opens it
// read-only and without blocking, reads regular files only, at most `maxFileBytes`, and only
// files named like source code (LocalSourceFiles.sourceExtensions), so a report never quotes
// a key file or a password database the reading process could open. The collector reads them as
// the Crumbs directory's owner (CollectEngine), never with root's rights. Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder

/// Where the lines of a source file come from (the hook for other sources: a debuginfod
/// server's `/buildid/<id>/source/<path>`, a checkout of the app's repository).
///
/// Requirements: `source` is called off the signal path, at most once per path per report, in
/// the order the app's frames come; it returns at most `limit` bytes (more is a failure, not a
/// cut), never blocks without a bound, and treats `path` as untrusted input (it comes from the
/// module's DWARF). Failures carry a short reason a person reads in the report.
public protocol SourceProvider: Sendable {
  /// What the report says the lines came from (`CrashReport.SourceLines.origin`): "file", …
  var name: String { get }
  /// The source file `path`, as the DWARF of the module with GNU build ID `buildID` (hex, nil
  /// when unknown) names it.
  func source(path: String, buildID: String?, limit: Int) -> Result<SourceFile, SourceUnavailable>
}

/// A source file's bytes, as a provider found them.
public struct SourceFile: Sendable, Equatable {
  public var bytes: [UInt8]
  /// Its last modification, ns since the epoch, when the provider knows it: a file changed
  /// after the module was built may no longer hold the lines that were compiled.
  public var modifiedNanoseconds: UInt64?

  public init(bytes: [UInt8], modifiedNanoseconds: UInt64? = nil) {
    self.bytes = bytes
    self.modifiedNanoseconds = modifiedNanoseconds
  }
}

/// Why a provider has no source for a path.
public struct SourceUnavailable: Error, Sendable, Equatable {
  public var reason: String
  public init(_ reason: String) { self.reason = reason }
}

/// How much source a report carries, and from where (`Symbolicator.Options.sourceContext`).
public struct SourceContextOptions: Sendable {
  /// Lines shown before and after a frame's line (3: seven lines a frame).
  public var linesAround = 3
  /// Frames of a report that get lines: the innermost of the app's frames first.
  public var maxFrames = 12
  /// Bytes of source lines in one report, all frames together (what a frame's lines would take
  /// past it, that frame and the rest go without).
  public var maxBytes = 12 * 1024
  /// A longer line is cut, at a character boundary, and ends with "…".
  public var maxLineBytes = 240
  /// A larger source file is not read.
  public var maxFileBytes = 4 << 20
  /// Asked in order; the first with the file wins. Default: the path on this machine.
  public var providers: [any SourceProvider] = [LocalSourceFiles()]

  public init() {}
}

/// The source files named by DWARF, read where they are on this machine (see the file comment
/// for what is refused).
public struct LocalSourceFiles: SourceProvider {
  /// What is read: files whose names end so (compared case-insensitively).
  public static let sourceExtensions: Set<String> = [
    "swift", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx", "m", "mm", "s", "def", "inc", "gyb",
  ]

  public var name: String { "file" }

  public init() {}

  /// Whether `path` ends like a source file's name (`sourceExtensions`).
  public static func isNamedLikeSource(_ path: String) -> Bool {
    let base = Syscall.baseName(of: path)
    guard let dot = base.lastIndex(of: ".") else { return false }
    return sourceExtensions.contains(base[base.index(after: dot)...].lowercased())
  }

  public func source(path: String, buildID: String?, limit: Int) -> Result<SourceFile, SourceUnavailable> {
    guard path.hasPrefix("/") else { return .failure(SourceUnavailable("a relative path")) }
    guard Self.isNamedLikeSource(path) else {
      return .failure(SourceUnavailable("not named like source code"))
    }
    let modified: UInt64?
    switch Syscall.followedStatus(ofPath: path) {
    case .failure(let error):
      return .failure(
        SourceUnavailable(
          error == .noSuchFileOrDirectory || error == .notDirectory ? "not on this machine" : "\(error)"))
    case .success(let status):
      guard status.kind == .regular else { return .failure(SourceUnavailable("not a regular file")) }
      modified = status.modifiedNanoseconds
    }
    do {
      return .success(
        SourceFile(bytes: try Syscall.readFile(path, limit: limit), modifiedNanoseconds: modified))
    } catch {
      switch error.refusal {
      case .tooLarge: return .failure(SourceUnavailable("over \(limit) bytes"))
      case .notARegularFile: return .failure(SourceUnavailable("not a regular file"))
      default: return .failure(SourceUnavailable("unreadable: \(error.cause)"))
      }
    }
  }
}

/// Lines cut out of a source file's bytes.
package enum SourceExcerpt {
  /// The lines `line − around … line + around` of `bytes` (1-based; fewer at either end of the
  /// file), each cut to `maxLineBytes` bytes at a character boundary with "…" after it, a CR
  /// before the LF dropped, invalid UTF-8 replaced. Nil when the file has no line `line`, or
  /// the excerpt holds a NUL byte (not text). Reads `bytes` once, up to the last line wanted.
  package static func lines(in bytes: [UInt8], around line: Int, radius: Int, maxLineBytes: Int) -> (
    startLine: Int, lines: [String]
  )? {
    guard line >= 1, radius >= 0, maxLineBytes >= 1 else { return nil }
    let first = line > radius ? line - radius : 1
    let (last, overflow) = line.addingReportingOverflow(radius)
    let lastWanted = overflow ? Int.max : last
    var lines: [String] = []
    var number = 1
    var start = 0
    var index = 0
    while index <= bytes.count, number <= lastWanted {
      // A line ends at LF, or at the end of the file when something is there.
      if index == bytes.count || bytes[index] == 0x0A {
        if index == bytes.count && start == index { break }
        if number >= first {
          var end = index
          if end > start && bytes[end - 1] == 0x0D { end -= 1 }
          let slice = bytes[start..<end]
          if slice.contains(0) { return nil }
          lines.append(cut(slice, maxLineBytes: maxLineBytes))
        }
        number += 1
        start = index + 1
      }
      index += 1
    }
    guard number > line else { return nil }  // the file ends before `line`
    return (first, lines)
  }

  /// `bytes` as text, at most `maxLineBytes` of them, ending on a whole character.
  static func cut(_ bytes: ArraySlice<UInt8>, maxLineBytes: Int) -> String {
    guard bytes.count > maxLineBytes else { return String(decoding: bytes, as: UTF8.self) }
    var end = bytes.startIndex + maxLineBytes
    // Back to the first byte of a character (continuation bytes are 10xxxxxx).
    while end > bytes.startIndex && bytes[end] & 0xC0 == 0x80 { end -= 1 }
    return String(decoding: bytes[bytes.startIndex..<end], as: UTF8.self) + "…"
  }
}

/// Adds source lines to a report's frames (see the file comment).
package struct SourceContextReader {
  package var options: SourceContextOptions
  /// Files read so far, by path: each read once per report, a failure too.
  private var files: [String: Result<SourceFile, SourceUnavailable>] = [:]
  private var bytesTaken = 0
  private var framesTaken = 0

  package init(options: SourceContextOptions) { self.options = options }

  /// `frames` with lines added to those in `executable` that have a file and a line, within the
  /// report's caps (shared by every call on this reader).
  package mutating func add(to frames: [CrashReport.Frame], executable: String?) -> [CrashReport.Frame] {
    guard let executable else { return frames }
    var result = frames
    for index in result.indices {
      let frame = result[index]
      guard frame.module == executable, let file = frame.file, let line = frame.line, frame.source == nil
      else { continue }
      guard framesTaken < options.maxFrames, bytesTaken < options.maxBytes else { break }
      guard let (read, origin) = self.file(file, buildID: frame.buildID) else {
        // Why a provider that fetches from elsewhere had nothing (a refused answer, a server
        // down): the frame says so. The machine's own missing file goes unsaid (the common case).
        if let reason = remoteFailure(file) {
          result[index].note = [frame.note, "no source lines: " + reason].compactMap { $0 }.joined(
            separator: "; ")
        }
        continue
      }
      guard
        let excerpt = SourceExcerpt.lines(
          in: read.bytes, around: line, radius: options.linesAround, maxLineBytes: options.maxLineBytes)
      else { continue }
      let size = excerpt.lines.reduce(0) { $0 + $1.utf8.count + 1 }
      guard bytesTaken + size <= options.maxBytes else { break }
      bytesTaken += size
      framesTaken += 1
      var lines = CrashReport.SourceLines(startLine: excerpt.startLine, lines: excerpt.lines, origin: origin)
      if let modified = read.modifiedNanoseconds, let built = Self.modified(executable), modified > built {
        lines.newerThanModule = true
      }
      result[index].source = lines
    }
    return result
  }

  /// Paths asked of each provider other than the machine's own files, by name.
  private var remoteAsks: [String: Int] = [:]

  /// The file from the first provider that has it, and that provider's name. A provider other
  /// than the machine's own files (one that may wait on a network) is asked at most `maxFrames`
  /// paths per report: a hostile DWARF naming a file per frame costs no more requests.
  private mutating func file(_ path: String, buildID: String?) -> (SourceFile, String)? {
    for provider in options.providers {
      let key = provider.name + "\u{0}" + path
      var found = files[key]
      if found == nil {
        if provider is LocalSourceFiles {
          found = provider.source(path: path, buildID: buildID, limit: options.maxFileBytes)
        } else if remoteAsks[provider.name, default: 0] < options.maxFrames {
          remoteAsks[provider.name, default: 0] += 1
          found = provider.source(path: path, buildID: buildID, limit: options.maxFileBytes)
        } else {
          found = .failure(
            SourceUnavailable("\(provider.name): not asked (\(options.maxFrames) files asked already)"))
        }
      }
      files[key] = found
      if case .success(let file)? = found { return (file, provider.name) }
    }
    return nil
  }

  /// The reasons the providers other than the machine's own files gave for `path`, if any.
  private func remoteFailure(_ path: String) -> String? {
    let reasons = options.providers.filter { !($0 is LocalSourceFiles) }.compactMap { provider in
      if case .failure(let failure)? = files[provider.name + "\u{0}" + path] { return failure.reason }
      return nil
    }
    return reasons.isEmpty ? nil : reasons.joined(separator: "; ")
  }

  private static func modified(_ path: String) -> UInt64? {
    if case .success(let status) = Syscall.followedStatus(ofPath: path) { return status.modifiedNanoseconds }
    return nil
  }
}

extension CrashReport {
  /// The report with source lines added to its app frames (`SourceContextOptions`; the
  /// executable is `process.executable.path`, else the first module): the crashing thread's
  /// frames first (the crashed entry of `threads` gets the same), then every other thread's,
  /// within one set of caps. Unchanged when `options` is nil.
  package mutating func addSourceContext(_ options: SourceContextOptions?) {
    guard let options, options.maxFrames > 0 else { return }
    var reader = SourceContextReader(options: options)
    let executable = resource["process.executable.path"] ?? modules.first?.path
    frames = reader.add(to: frames, executable: executable)
    guard var threads else { return }
    for index in threads.indices {
      if threads[index].crashed {
        threads[index].frames = frames
      } else {
        threads[index].frames = reader.add(to: threads[index].frames, executable: executable)
      }
    }
    self.threads = threads
  }
}
