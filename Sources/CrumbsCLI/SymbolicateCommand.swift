// `crumbs symbolicate ID --symbols DIR…`: names the frames of a stored report from symbol files
// found by GNU build ID (DebugFileLocator), with file and line where they carry DWARF, and writes
// the report back. For reports from stripped release builds, read on the developer's machine.

import ArgumentParser
import Crumbs

struct SymbolicateCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "symbolicate",
    abstract: "Name a stored report's frames from unstripped binaries or .debug files, by build ID.",
    discussion: """
      Each --symbols directory may hold unstripped binaries or .debug files (searched by build ID, \
      up to \(DebugFileLocator.maxDepth) levels deep), or use the .build-id/xx/yyyy.debug layout; \
      /usr/lib/debug is searched too, and so is a module's .gnu_debuglink name. With \
      DEBUGINFOD_URLS set (space-separated servers, as elfutils reads it), a module still without \
      symbols has its debug file fetched by build ID into DEBUGINFOD_CACHE_PATH (default: \
      debuginfod/ in the Crumbs directory), within DEBUGINFOD_TIMEOUT, DEBUGINFOD_MAXTIME and \
      DEBUGINFOD_MAXSIZE. The report is rewritten in place: frames, their files and lines, and \
      its stack text.
      """)

  @OptionGroup var store: StoreOptions

  @Argument(help: "The report id, or a unique prefix of it.")
  var id: String

  @Option(name: .customLong("symbols"), help: "A directory of symbol files (repeatable).")
  var symbolDirectories: [String] = []

  @Option(help: "Where llvm-symbolizer is (default: the first on PATH); file and line need it.")
  var llvmSymbolizer: String?

  func run() throws {
    let reportStore = try store.openStore(command: "symbolicate")
    let stored = try store.load(id, from: reportStore, command: "symbolicate")
    var options = PostMortemProcessor.defaultSymbolication
    options.symbolDirectories = symbolDirectories.map(absolute)
    options.useLLVMSymbolizer = true
    options.readsInstalledDebugFiles = true
    options.llvmSymbolizerPath = llvmSymbolizer
    allowFetching(&options, store: reportStore)
    let report = stored.report.symbolicated(with: options)
    do {
      try reportStore.replace(stored, with: report)
    } catch {
      throw fail("symbolicate", "\(error)")
    }
    let before = stored.report.frames.filter { $0.function != nil }.count
    let after = report.frames.filter { $0.function != nil }.count
    let lines = report.frames.filter { $0.line != nil }.count
    let sources = report.frames.filter { $0.source != nil }.count
    print(
      "\(report.id): \(after) of \(report.frames.count) frames named (\(before) before), \(lines) with a line, "
        + "\(sources) with source lines")

    print(report.exceptionStacktrace)
  }
}
