// Symbolicator.swift — return addresses to function names, on the device, after the fact.
//
// Entry points, in call order:
//   Symbolicator(modules:options:)       the module map of the process that recorded the
//                                        addresses (a crash record's, or CurrentProcessModules)
//   symbolicator.symbolicate(_:firstIsExactPC:)
//     → module(containing:)              which module each address falls in (its executable
//                                        segments first, then its whole mapping)
//     → symbolFile(for:)                 the module's ELF file, read once per process while
//                                        it is unchanged (ELFImage.read through
//                                        ParsedModuleCache; the first time only scanned for
//                                        this call's addresses in it, SymbolScan: a next launch
//                                        names 70 frames without sorting whole tables, a later
//                                        lookup of other addresses reads the sorted table once)
//                                        and checked: gone? build ID changed?
//                                        stripped? — then a file with its build ID from
//                                        `symbolDirectories` (DebugFileLocator), when set,
//                                        else from `remoteDebugFiles` (a debuginfod client,
//                                        Symbolicator+Debuginfod.swift), when set
//     → ELFImage.symbol(containing:)     `.symtab`, else `.dynsym`, by binary search, on
//                                        address − 1 for return addresses
//     → SymbolDemangler.demangle         Swift and C++ names, in process
//     → LLVMSymbolizer.lineInfo          file, line and column from the DWARF line tables, and
//                                        the calls inlined at the address (DWARF's inlined
//                                        subroutines, as `llvm-symbolizer --inlines` prints
//                                        them): one batched run per module that carries DWARF
//                                        (Symbolicator.hasLineInfo), when one is on PATH
//
// Whatever a module's state, a frame keeps its module, offset and build ID, which is what a
// server needs to symbolicate it later; `note` says why a name is missing. Never traps on any
// input (missing, changed, stripped or garbage files, addresses outside every module). Not
// signal-safe: reads files, allocates, may run a subprocess. Not thread-safe: use one
// Symbolicator from one task at a time (it caches parsed modules).

import CrumbsPlatform
import CrumbsRecorder

/// Names the frames of a backtrace from a module map, reading each module's ELF file once.
public final class Symbolicator {
  /// What a Symbolicator does beyond the ELF symbol tables.
  public struct Options: Sendable {
    /// Ask `llvm-symbolizer` for file, line and inlined calls when it can be found, for the
    /// modules that carry DWARF (an app's own code; a module without costs no run), or whose
    /// debug file `symbolDirectories` holds. Never required: without it, or when it fails,
    /// frames keep their ELF names and `note` says what happened.
    public var useLLVMSymbolizer: Bool = true
    /// Ask it also for the modules whose DWARF is only in a debug file installed where it looks
    /// by itself (a distribution's debug package under /usr/lib/debug: libc's is 0.15–0.2 s a
    /// run here, for a system library's lines). Off by default; `crumbs threads` and `crumbs
    /// symbolicate`, which a person runs and waits for, turn it on.
    public var readsInstalledDebugFiles: Bool = false
    /// Where `llvm-symbolizer` is; nil: the first one on PATH.
    public var llvmSymbolizerPath: String? = nil
    /// How long one `llvm-symbolizer` run may take before it is killed.
    public var llvmSymbolizerTimeoutMilliseconds: Int = 5_000
    /// Full or simplified Swift names.
    public var nameStyle: SymbolNameStyle = .full
    /// Where to look, by GNU build ID, for the symbols of a module whose own file is stripped,
    /// gone or replaced: folders of unstripped binaries or `.debug` files, or roots with the
    /// `.build-id/xx/yyyy.debug` layout (DebugFileLocator). Empty: only the modules' own files.
    public var symbolDirectories: [String] = []
    /// Whether module files are read at all. When false nothing is named: frames keep their
    /// module, offset and build ID (what a server needs to symbolicate) and a note saying so;
    /// for processing that must stay cheap (a backlog of sessions, see PostMortemProcessor).
    public var readsModuleFiles: Bool = true
    /// Lines of source around the app's frames, where the source is found (SourceContext.swift:
    /// caps, providers); nil leaves them out. Only with `readsModuleFiles`.
    public var sourceContext: SourceContextOptions? = SourceContextOptions()

    /// `sourceContext` when this symbolication reads files at all; a `remoteDebugFiles` that
    /// serves sources too (a debuginfod client) is asked after the providers given.
    package var effectiveSourceContext: SourceContextOptions? {
      guard readsModuleFiles, var context = sourceContext else { return nil }
      if let remote = remoteDebugFiles as? any SourceProvider,
        !context.providers.contains(where: { $0.name == remote.name })
      {
        context.providers.append(remote)
      }
      return context
    }

    /// Where to fetch, by build ID, the debug file of a module whose own file is stripped,
    /// gone or replaced and that `symbolDirectories` does not hold (a debuginfod client:
    /// `DebuginfodClient` in CrumbsDelivery). Nil (the default): no network.
    public var remoteDebugFiles: (any RemoteDebugFiles)? = nil
    /// Where a crashed executable's package note names a debuginfod server (`debugInfoUrl`):
    /// the remote debug files that ask it too (after `remoteDebugFiles`' servers), or why it is
    /// not asked (the note is untrusted). Set only by processes allowed to fetch
    /// (`DebuginfodClient.packageNoteClients`); nil (the default): the note's URL is not asked.
    public var packageDebugInfo:
      (@Sendable (String) -> Result<any RemoteDebugFiles, RemoteDebugFileFailure>)? =
        nil

    public init() {}
  }

  /// The module map, in the order given.
  public let modules: [LoadedModule]
  public let options: Options

  /// Parsed files by path (nil: read failed, with the reason in `moduleProblems`).
  private var images: [String: ModuleImage] = [:]
  /// Separate symbol files, when `symbolDirectories` is set.
  private let debugFiles: DebugFileLocator?
  private var demangled: [String: String?] = [:]
  /// llvm-symbolizer's answers by module path and offset: a second backtrace through the same
  /// code costs no subprocess. At most `maxSourceLocations` answers (a live process keeps its
  /// Symbolicator for its whole life): past that it starts again from empty.
  private var sourceLocations: [String: [UInt64: [SymbolizerLocation]]] = [:]
  private var sourceLocationCount = 0
  /// The bound on `sourceLocations`: a few hundred bytes each, some thousands of frames.
  package static let maxSourceLocations = 4096
  /// How many llvm-symbolizer answers are kept now (at most `maxSourceLocations`).
  package var keptSourceLocations: Int { sourceLocationCount }
  /// What `remoteDebugFiles` answered, by build ID (hex) and kind: one question per module.
  var remoteAnswers: [String: Result<String, RemoteDebugFileFailure>] = [:]
  /// Module indices sorted by text start, for lookups.
  private let modulesByText: [Int]
  /// The lookup offsets of the current call in each module file not parsed yet: a file read
  /// for the first time is only scanned for them (ELFImage.read(path:answering:)).
  private var wantedOffsets: [String: [UInt64]] = [:]

  /// A Symbolicator for addresses recorded in a process whose modules were `modules`.
  public init(modules: [LoadedModule], options: Options = .init()) {
    self.modules = modules
    self.options = options
    modulesByText = modules.indices.filter { !modules[$0].unloaded }.sorted {
      modules[$0].textStart < modules[$1].textStart
    }
    debugFiles =
      options.symbolDirectories.isEmpty ? nil : DebugFileLocator(directories: options.symbolDirectories)
  }

  /// Names each address. Return addresses point after their call, so every frame is looked up at
  /// `address − 1`, except the first when `firstIsExactPC` (the faulting instruction itself) and
  /// those at the indices in `exact` (async resume points: a function's first instruction).
  public func symbolicate(_ addresses: [UInt64], firstIsExactPC: Bool = true, exact: Set<Int> = [])
    -> [SymbolicatedFrame]
  {
    symbolicate(addresses) { index in (index == 0 && firstIsExactPC) || exact.contains(index) }
  }

  /// Names several backtraces at once (every thread of a crash), each one's first address taken
  /// as an exact PC (unless `firstIsExactPC[i]` is false: a thread that walked its own stack
  /// has only return addresses), and those at the indices in `exact[i]` of backtrace i: one
  /// optional line-info pass per module for all of them.
  public func symbolicate(backtraces: [[UInt64]], exact: [Set<Int>] = [], firstIsExactPC: [Bool] = [])
    -> [[SymbolicatedFrame]]
  {
    var exactIndices = Set<Int>()
    var all: [UInt64] = []
    for (position, backtrace) in backtraces.enumerated() {
      let firstExact = position < firstIsExactPC.count ? firstIsExactPC[position] : true
      if !backtrace.isEmpty && firstExact { exactIndices.insert(all.count) }
      if position < exact.count {
        for index in exact[position] where index < backtrace.count { exactIndices.insert(all.count + index) }
      }
      all += backtrace
    }
    let named = symbolicate(all) { exactIndices.contains($0) }
    var result: [[SymbolicatedFrame]] = []
    var start = 0
    for backtrace in backtraces {
      result.append(
        named[start..<start + backtrace.count].enumerated().map { index, frame in
          var frame = frame
          frame.index = index
          return frame
        })
      start += backtrace.count
    }
    return result
  }

  private func symbolicate(_ addresses: [UInt64], isExactPC: (Int) -> Bool) -> [SymbolicatedFrame] {
    var frames: [SymbolicatedFrame] = []
    frames.reserveCapacity(addresses.count)
    // Per file (the module's own, or its separate symbol file): (frame index, lookup offset) for
    // the optional line-info pass.
    var lineRequests: [String: [(frame: Int, offset: UInt64)]] = [:]
    // The app's own frames (the executable: the first module) that will have no line, and why:
    // said on each, where a library's frame without a line is simply the usual case.
    var appFramesWithoutLines: [(frame: Int, note: String)] = []

    wantedOffsets = [:]
    if options.readsModuleFiles {
      for (index, address) in addresses.enumerated() {
        let lookupAddress = isExactPC(index) || address == 0 ? address : address - 1
        guard let moduleIndex = moduleIndex(containing: lookupAddress),
          images[modules[moduleIndex].path] == nil
        else { continue }
        let (offset, overflow) = lookupAddress.subtractingReportingOverflow(modules[moduleIndex].loadBias)
        if !overflow { wantedOffsets[modules[moduleIndex].path, default: []].append(offset) }
      }
    }
    defer { wantedOffsets = [:] }

    for (index, address) in addresses.enumerated() {
      var frame = SymbolicatedFrame(index: index, address: address)
      let lookupAddress = isExactPC(index) || address == 0 ? address : address - 1
      guard let moduleIndex = moduleIndex(containing: lookupAddress) else {
        frame.note = SymbolicatedFrame.Note.noModule
        frames.append(frame)
        continue
      }
      let module = modules[moduleIndex]
      frame.modulePath = module.path
      frame.buildID = module.buildID.isEmpty ? nil : module.buildIDHex
      // A frame in a module unloaded before the crash says so, whatever else its note says.
      defer {
        if module.unloaded {
          frames[frames.count - 1].note = Self.unloadedNote(frames[frames.count - 1].note)
        }
      }
      let (offset, overflow) = address.subtractingReportingOverflow(module.loadBias)
      let (lookupOffset, lookupOverflow) = lookupAddress.subtractingReportingOverflow(module.loadBias)
      frame.moduleOffset = overflow ? nil : offset
      let usable = !overflow && !lookupOverflow

      guard options.readsModuleFiles else {
        frame.note = SymbolicatedFrame.Note.notSymbolicated
        frames.append(frame)
        continue
      }
      switch symbolFile(for: module) {
      case .failure(let failure):
        frame.note = failure.note
      case .success(let (image, imagePath)):
        if usable, let symbol = image.symbol(containing: lookupOffset) {
          frame.symbol = symbol.name
          frame.function = demangle(symbol.name)
          let (distance, before) = offset.subtractingReportingOverflow(symbol.start)
          frame.symbolOffset = before ? nil : distance
        } else if !image.hasSymbols, let problem = image.problems.first {
          frame.note = "module unreadable: \(problem)"
        } else {
          frame.note =
            image.symbolTable == .symtab ? SymbolicatedFrame.Note.noSymbol : SymbolicatedFrame.Note.stripped
        }
        // Lines only where DWARF is: in the file, or (when asked) in a debug file llvm-symbolizer
        // finds by itself. A damaged file is not worth a subprocess.
        if usable, image.problems.isEmpty,
          Self.hasLineInfo(image, path: imagePath, installedDebugFiles: options.readsInstalledDebugFiles)
        {
          lineRequests[imagePath, default: []].append((frames.count, lookupOffset))
        } else if usable, moduleIndex == 0, options.useLLVMSymbolizer {
          appFramesWithoutLines.append((frames.count, Self.noDWARFNote))
        }
      }
      if frame.function == nil, let why = remoteFailure(for: module) { frame.note = joined(frame.note, why) }
      frames.append(frame)
    }

    if options.useLLVMSymbolizer, !lineRequests.isEmpty {
      switch LLVMSymbolizer.find(options) {
      case .success(let symbolizer?):
        for (path, requests) in lineRequests.sorted(by: { $0.key < $1.key }) {
          addLineInfo(to: &frames, requests: requests, path: path, symbolizer: symbolizer)
        }
      case .success(nil):
        // None found: it is optional, but the app's frames say why they have no line.
        let app = modules.first?.path
        for request in lineRequests.values.joined()
        where app != nil && frames[request.frame].modulePath == app {
          appFramesWithoutLines.append((request.frame, Self.noSymbolizerNote))
        }
      case .failure(let error):
        for requests in lineRequests.values {
          for request in requests {
            frames[request.frame].note = joined(frames[request.frame].note, "no line info: \(error.reason)")
          }
        }
      }
    }
    for (index, note) in appFramesWithoutLines where frames[index].line == nil {
      frames[index].note = joined(frames[index].note, note)
    }
    return frames
  }

  /// Why a frame in the app's executable has no file and line: the executable (and any debug
  /// file found for it) carries no DWARF.
  package static let noDWARFNote =
    "no line info: the executable has no DWARF (built without -g, or stripped: "
    + "crumbs symbolicate --symbols DIR reads a debug file)"
  /// Why it has none when it has DWARF: nothing could read it.
  package static let noSymbolizerNote =
    "no line info: llvm-symbolizer not found (on PATH, or beside swift)"

  /// The module whose executable segments (or, failing that, whole mapping) contain `address`.
  public func module(containing address: UInt64) -> LoadedModule? {
    moduleIndex(containing: address).map { modules[$0] }
  }

  func moduleIndex(containing address: UInt64) -> Int? {
    // A loaded module first: an unloaded one's range may hold a library loaded since.
    if let index = loadedModuleIndex(containing: address) { return index }
    return modules.indices.first { modules[$0].unloaded && modules[$0].textContains(address) }
  }

  private func loadedModuleIndex(containing address: UInt64) -> Int? {
    // The last module whose text starts at or below the address, by binary search…
    var low = 0
    var high = modulesByText.count
    while low < high {
      let middle = low + (high - low) / 2
      if modules[modulesByText[middle]].textStart <= address { low = middle + 1 } else { high = middle }
    }
    if low > 0, modules[modulesByText[low - 1]].textContains(address) { return modulesByText[low - 1] }
    // …else any module covering it (overlaps, unknown text ranges): a linear scan, rare.
    if let index = modules.indices.first(where: { !modules[$0].unloaded && modules[$0].textContains(address) }
    ) {
      return index
    }
    return modules.indices.first { !modules[$0].unloaded && modules[$0].contains(address) }
  }

  /// `note` with "module unloaded" in front.
  static func unloadedNote(_ note: String?) -> String {
    note.map { SymbolicatedFrame.Note.unloaded + "; " + $0 } ?? SymbolicatedFrame.Note.unloaded
  }

  // MARK: Module files

  enum ModuleImage {
    case readable(ELFImage)
    case failed(note: String)
  }

  /// The module's parsed file, or the note that says why there is none.
  private func image(for module: LoadedModule) -> Result<ELFImage, ModuleFailure> {
    switch cachedImage(module.path) {
    case .failed(let note):
      return .failure(ModuleFailure(note))
    case .readable(let image):
      if !module.buildID.isEmpty, image.buildID != module.buildID {
        return .failure(ModuleFailure(SymbolicatedFrame.Note.buildIDChanged))
      }
      return .success(image)
    }
  }

  /// The file to name a module's frames from, and its path: the module's own file, unless it
  /// is unusable (gone, replaced, unreadable) or has no full symbol table or no DWARF and
  /// `symbolDirectories` holds a file with the module's build ID that does better.
  private func symbolFile(for module: LoadedModule) -> Result<(ELFImage, String), ModuleFailure> {
    let own = image(for: module)
    if case .success(let image) = own, image.symbolTable == .symtab, image.hasDebugInfo {
      return .success((image, module.path))
    }
    guard debugFiles != nil || options.remoteDebugFiles != nil, !module.buildID.isEmpty else {
      return own.map { ($0, module.path) }
    }
    var debugLink: String?
    if case .success(let image) = own { debugLink = image.debugLink }
    guard
      let path = debugFiles?.file(buildID: module.buildID, modulePath: module.path, debugLink: debugLink)
        ?? fetchedDebugFile(for: module, ownFileMissing: own.isMissingFile),
      case .readable(let found) = cachedImage(path),
      found.symbolTable == .symtab || found.hasDebugInfo
    else { return own.map { ($0, module.path) } }
    if case .success(let image) = own, image.symbolTable == .symtab, found.symbolTable != .symtab {
      return .success((image, path))  // names from the module, lines from the debug file
    }
    return .success((found, path))
  }

  func cachedImage(_ path: String) -> ModuleImage {
    if let known = images[path] { return known }
    let loaded = Self.load(path, answering: wantedOffsets[path])
    images[path] = loaded
    return loaded
  }

  /// The file at `path` parsed, by this process's cache of parsed modules (ParsedModuleCache):
  /// a file parsed once, unchanged since, is not parsed again.
  private static func load(_ path: String, answering offsets: [UInt64]?) -> ModuleImage {
    guard path.hasPrefix("/") else { return .failed(note: SymbolicatedFrame.Note.noFile) }
    let status: Syscall.EntryStatus
    switch Syscall.followedStatus(ofPath: path) {
    case .failure(let error):
      if error == .noSuchFileOrDirectory || error == .notDirectory {
        return .failed(note: SymbolicatedFrame.Note.moduleGone)
      }
      return .failed(note: "module unreadable: \(error)")
    case .success(let found):
      status = found
    }
    do {
      return .readable(
        try ParsedModuleCache.shared.image(for: .init(path: path, status: status)) {
          () throws(PersistedFileError) in
          if let offsets { return try ELFImage.read(path: path, answering: offsets) }
          return try ELFImage.read(path: path)
        })
    } catch {
      return .failed(note: "module unreadable: \(error.reason)")
    }
  }

  private func demangle(_ name: String) -> String {
    if let known = demangled[name] { return known ?? name }
    let result = SymbolDemangler.demangle(name, style: options.nameStyle)
    demangled[name] = result
    return result ?? name
  }

  // MARK: File and line

  private func addLineInfo(
    to frames: inout [SymbolicatedFrame], requests: [(frame: Int, offset: UInt64)], path: String,
    symbolizer: LLVMSymbolizer
  ) {
    var known = sourceLocations[path, default: [:]]
    let missing = Array(Set(requests.map(\.offset).filter { known[$0] == nil })).sorted()
    if !missing.isEmpty {
      switch symbolizer.lineInfo(path: path, offsets: missing) {
      case .failure(let error):
        for request in requests {
          frames[request.frame].note = joined(frames[request.frame].note, "no line info: \(error.reason)")
        }
        return
      case .success(let results):
        if sourceLocationCount + missing.count > Self.maxSourceLocations {
          sourceLocations = [:]
          let wanted = Set(requests.map(\.offset))
          known = known.filter { wanted.contains($0.key) }
          sourceLocationCount = known.count
        }
        for (offset, locations) in zip(missing, results) { known[offset] = locations }
        sourceLocationCount += missing.count
        sourceLocations[path] = known
      }
    }
    for request in requests {
      addLineInfo(to: &frames[request.frame], locations: known[request.offset] ?? [])
    }
  }

  /// Names `frame` from llvm-symbolizer's locations for its address (innermost inlined call
  /// first, the function the address lies in last): the frame takes the location of the
  /// function the symbol table named (else the outermost), and every location before it
  /// becomes an inlined call of its own.
  private func addLineInfo(to frame: inout SymbolicatedFrame, locations: [SymbolizerLocation]) {
    // Only answers with a line come from DWARF; without one llvm-symbolizer only repeats a
    // symbol table (often a wrong one, like `__ehdr_start` for an address in no function).
    guard locations.contains(where: { $0.line != nil }) else { return }
    let own = locations.lastIndex { $0.function != nil && $0.function == frame.symbol } ?? locations.count - 1
    let location = locations[own]
    if frame.symbol == nil, let function = location.function {
      frame.symbol = function
      frame.function = demangle(function)
      // Named after all (separate debug info): the symbol-table note no longer applies.
      if frame.note == SymbolicatedFrame.Note.stripped || frame.note == SymbolicatedFrame.Note.noSymbol {
        frame.note = nil
      }
    }
    frame.file = location.file
    frame.line = location.line
    frame.column = location.column
    frame.inlinedCalls = locations[..<own].map { call in
      var inlined = SymbolicatedFrame(
        index: frame.index, address: frame.address, modulePath: frame.modulePath,
        moduleOffset: frame.moduleOffset, buildID: frame.buildID, symbol: call.function,
        function: call.function.map(demangle), file: call.file, line: call.line, column: call.column)
      inlined.inlined = true
      return inlined
    }
  }

  /// Whether DWARF for the file at `path` is within llvm-symbolizer's reach: in the file itself,
  /// or with `installedDebugFiles`, in a debug file where it looks by itself
  /// (/usr/lib/debug/.build-id/xx/rest.debug, or the `.gnu_debuglink` name beside the file, in
  /// its `.debug` folder, or under /usr/lib/debug): one stat per place.
  static func hasLineInfo(_ image: ELFImage, path: String, installedDebugFiles: Bool) -> Bool {
    if image.hasDebugInfo { return true }
    guard installedDebugFiles else { return false }
    var candidates: [String] = []
    if !image.buildID.isEmpty {
      let hex = LoadedModule.hex(image.buildID)
      candidates.append("/usr/lib/debug/.build-id/" + hex.prefix(2) + "/" + hex.dropFirst(2) + ".debug")
    }
    if let link = image.debugLink {
      let directory = Syscall.directoryName(of: path)
      candidates += [
        directory + "/" + link, directory + "/.debug/" + link, "/usr/lib/debug" + directory + "/" + link,
      ]
    }
    return candidates.contains { $0 != path && Syscall.fileExists($0) }
  }

  func joined(_ note: String?, _ more: String) -> String {
    guard let note, !note.isEmpty else { return more }
    return note + "; " + more
  }
}

package struct ModuleFailure: Error {
  package var note: String
  package init(_ note: String) { self.note = note }
}
