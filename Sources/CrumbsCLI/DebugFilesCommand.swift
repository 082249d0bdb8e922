// DebugFilesCommand.swift — `crumbs debug-files list|upload DIR…`: the symbols a server needs
// for reports from stripped builds.
//
//   list DIR… [--json]       every executable and shared object found (DebugFileLocator.files:
//                            the walk `symbolicate` indexes), with its GNU build ID, the Backtrace
//                            debug identifier made from it, whether it carries debug info
//                            (.debug_* sections) and its .gnu_debuglink name
//   upload --backtrace URL --token-file F DIR…
//                            each file with debug info (the first of each build ID) to Backtrace's
//                            symbol store (BacktraceSymbolUpload), a line per file
//
// Exit codes as every command (CLIConventions.swift): 3 when no ELF file (list) or no file with
// debug info (upload) is found; 1 when an upload failed.

import ArgumentParser
import Crumbs
import CrumbsPlatform
import Foundation

struct DebugFilesCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "debug-files",
    abstract: "List debug files by build ID, and upload them to a server that symbolicates.",
    subcommands: [DebugFilesListCommand.self, DebugFilesUploadCommand.self])
}

/// One ELF file found.
struct DebugFile {
  var path: String
  var image: ELFImage

  var buildID: String { image.buildID.isEmpty ? "" : LoadedModule.hex(image.buildID) }

  /// Executables and shared objects under `paths` (files, or directories walked as `symbolicate`
  /// walks them); object files and anything not ELF are left out.
  static func find(_ paths: [String]) -> [DebugFile] {
    DebugFileLocator.files(under: paths.map(absolute)).compactMap { path in
      guard let image = try? ELFImage.read(path: path, symbols: false),
        image.fileType == 2 || image.fileType == 3
      else { return nil }
      return DebugFile(path: path, image: image)
    }
  }
}

struct DebugFilesListCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "list",
    abstract: "List the executables and shared objects under the directories, with their build IDs.",
    discussion: """
      One line per file: the GNU build ID (- when none), 'debug-info' or 'no-debug-info', the path, \
      and the .gnu_debuglink name a stripped file points to. Directories are searched up to \
      \(DebugFileLocator.maxDepth) levels deep. Exit 3 when no ELF file is found.
      """)

  @Argument(help: "Directories (or files) to search.")
  var paths: [String]

  @Flag(help: "One JSON array.")
  var json = false

  func validate() throws {
    if paths.isEmpty { throw ValidationError("give at least one directory") }
  }

  func run() throws {
    for path in paths where !Syscall.fileExists(absolute(path)) {
      throw fail("debug-files list", "no such file or directory: \(path)")
    }
    let files = DebugFile.find(paths)
    if json {
      let objects: [[String: Any]] = files.map { file in
        var object: [String: Any] = [
          "path": file.path, "build_id": file.buildID, "has_debug_info": file.image.hasDebugInfo,
          "type": file.image.fileType == 2 ? "executable" : "shared object",
        ]
        if !file.image.buildID.isEmpty {
          object["debug_identifier"] = BacktraceJSON.debugIdentifier(buildID: file.image.buildID)
        }
        if let link = file.image.debugLink { object["debug_link"] = link }
        return object
      }
      let data = try JSONSerialization.data(
        withJSONObject: objects, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
      print(String(decoding: data, as: UTF8.self))
    } else {
      for file in files {
        var line = (file.buildID.isEmpty ? "-" : file.buildID) + "  "
        line += (file.image.hasDebugInfo ? "debug-info   " : "no-debug-info") + "  " + file.path
        if let link = file.image.debugLink { line += "  (debuglink \(link))" }
        print(line)
      }
    }
    if files.isEmpty {
      throw fail("debug-files list", "no ELF executable or shared object found", CLIExit.nothingFound)
    }
  }
}

struct DebugFilesUploadCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "upload",
    abstract: "Upload every file with debug info under the directories to Backtrace's symbol store.",
    discussion: """
      Each executable, shared object or .debug file that carries debug info is sent once per \
      build ID to {URL}/post?format=symbols&token=T&upload_file=NAME. The token (with the \
      symbol:post capability) comes from --token-file or CRUMBS_BACKTRACE_TOKEN, never the \
      command line. Failures are retried like report delivery (429/503 after Retry-After; 408, \
      5xx and no answer with a doubling wait), other answers fail the file. Exit 0 when every \
      file was uploaded, 1 when one failed, 3 when no file with debug info was found.
      """)

  @Option(help: "The Backtrace instance, e.g. https://UNIVERSE.sp.backtrace.io:6098.")
  var backtrace: String

  @Option(help: "A file holding a symbol upload token (else CRUMBS_BACKTRACE_TOKEN).")
  var tokenFile: String?

  @Option(help: "A tag grouping the uploads in Backtrace (e.g. the release).")
  var tag: String?

  @Option(help: "Seconds to wait for the server per request.")
  var timeout: Double = 120

  @Option(help: "Attempts per file.")
  var retryLimit: Int = 3

  @Option(help: "Seconds before the first retry (doubled after each).")
  var retryInterval: Double = 5

  @Flag(help: "Print one JSON object with every file's result instead of lines.")
  var json = false

  @Argument(help: "Directories (or files) to search.")
  var paths: [String]

  func validate() throws {
    if paths.isEmpty { throw ValidationError("give at least one directory") }
    if retryLimit < 1 { throw ValidationError("--retry-limit must be 1 or more") }
    if !(retryInterval >= 0) { throw ValidationError("--retry-interval must be 0 or more") }
    try validateTimeout(timeout)
  }

  func run() throws {
    let command = "debug-files upload"
    let token: String
    if let tokenFile {
      token = try Secrets.file(tokenFile, command: command, what: "token")
    } else if let value = Environment.value("CRUMBS_BACKTRACE_TOKEN"), !value.isEmpty {
      token = value
    } else {
      throw fail(command, "give the token with --token-file F or CRUMBS_BACKTRACE_TOKEN", CLIExit.usage)
    }
    for path in paths where !Syscall.fileExists(absolute(path)) {
      throw fail(command, "no such file or directory: \(path)")
    }
    var seen: Set<String> = []
    var skipped: [DebugFile] = []
    var chosen: [DebugFile] = []
    for file in DebugFile.find(paths) {
      if file.image.hasDebugInfo && (file.buildID.isEmpty || seen.insert(file.buildID).inserted) {
        chosen.append(file)
      } else {
        skipped.append(file)
      }
    }
    guard !chosen.isEmpty else {
      if json { print(Self.json(results: [], chosen: [], skipped: skipped)) }
      throw fail(command, "no file with debug info found", CLIExit.nothingFound)
    }
    var upload = BacktraceSymbolUpload(endpoint: backtrace, token: token, tag: tag)
    upload.retryLimit = retryLimit
    upload.retryInterval = retryInterval
    let transport = CurlTransport(timeout: timeout)
    var results: [BacktraceSymbolUpload.Result] = []
    for (index, file) in chosen.enumerated() {
      let result = upload.upload(path: file.path, transport: transport)
      results.append(result)
      guard !json else { continue }
      var line = "[\(index + 1)/\(chosen.count)] "
      line += result.uploaded ? "uploaded" : "failed"
      line += " \(result.name) (\(file.buildID.isEmpty ? "no build ID" : file.buildID)) from \(file.path)"
      line += result.uploaded ? " → \(result.status ?? 0)" : ": \(result.failure ?? "")"
      // Unbuffered, so a pipe sees each line as the file is done.
      FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
    let failed = results.filter { !$0.uploaded }.count
    if json {
      print(Self.json(results: results, chosen: chosen, skipped: skipped))
    } else {
      print(
        "\(results.count - failed) uploaded, \(failed) failed, \(skipped.count) skipped (no debug info, or a build ID already sent)"
      )
    }
    if failed > 0 { throw CLIExit.failure }
  }

  static func json(results: [BacktraceSymbolUpload.Result], chosen: [DebugFile], skipped: [DebugFile])
    -> String
  {
    let files: [[String: Any]] = zip(results, chosen).map { result, file in
      var object: [String: Any] = [
        "path": result.path, "name": result.name, "build_id": file.buildID, "attempts": result.attempts,
        "uploaded": result.uploaded,
      ]
      if let status = result.status { object["status"] = status }
      if let failure = result.failure { object["error"] = failure }
      return object
    }
    let summary: [String: Any] = [
      "uploaded": results.filter(\.uploaded).count, "failed": results.filter { !$0.uploaded }.count,
      "files": files, "skipped": skipped.map(\.path),
    ]
    let data =
      (try? JSONSerialization.data(
        withJSONObject: summary, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])) ?? Data()
    return String(decoding: data, as: UTF8.self)
  }
}
