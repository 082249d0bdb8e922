// SymbolicatedFrame.swift — one frame of a backtrace as Symbolicator named it: the address, its
// module, offset and build ID (what a server needs to name it later), the name, file and line
// when the device could find them, the calls inlined at it, and why anything is missing (`Note`).
// Made by Symbolicator.symbolicate; read by the report builders and the CLI.

/// One frame of a backtrace, named as well as the device could.
public struct SymbolicatedFrame: Sendable, Equatable, Codable, CustomStringConvertible {
  /// Why a frame has no name (the values `note` takes when a name is missing).
  public enum Note {
    /// No module in the map contains the address (JIT code, a garbage address, a library
    /// loaded after the map was taken).
    public static let noModule = "no module"
    /// The module's file no longer exists (uninstalled, updated by rename, a temporary file).
    public static let moduleGone = "module gone"
    /// The file at the module's path has another build ID: it was replaced since.
    public static let buildIDChanged = "build id changed"
    /// The module has no full symbol table, and its dynamic one does not cover the address.
    public static let stripped = "stripped"
    /// The module has a full symbol table, but no symbol covers the address.
    public static let noSymbol = "no symbol"
    /// Module files were not read on purpose (Options.readsModuleFiles): a server can name it.
    public static let notSymbolicated = "not symbolicated on the device"
    /// The module's path names no file (the vDSO, an anonymous mapping).
    public static let noFile = "no file"
    /// The module was unloaded (dlclose) before the crash: the address is stale code, named
    /// from the file if it is still there.
    public static let unloaded = "module unloaded"
  }

  /// Position in the backtrace, 0 for the innermost frame.
  public var index: Int
  /// The address as recorded (a return address for every frame but an exact faulting PC).
  public var address: UInt64
  /// The module containing the address.
  public var modulePath: String?
  /// `address − loadBias`: the ELF virtual address, which with `buildID` is what a server needs.
  public var moduleOffset: UInt64?
  /// The module's build ID as recorded, hex.
  public var buildID: String?
  /// The symbol's name as found in the symbol table (mangled).
  public var symbol: String?
  /// The demangled name (Swift and C++); the symbol itself for C names.
  public var function: String?
  /// `address − symbol start`.
  public var symbolOffset: UInt64?
  /// Source file, from the module's DWARF line table (read by `llvm-symbolizer`).
  public var file: String?
  /// Source line, with `file`: where the address lies, or in a frame that inlined calls at
  /// the address, where the outermost of those calls was written.
  public var line: Int?
  /// Source column, with `line`, when DWARF has one.
  public var column: Int?
  /// Whether this frame is a call inlined at the address rather than a function of its own:
  /// it shares the address, module and offset of the frame it was inlined into, and has no
  /// symbol offset (only frames in `inlinedCalls` have it set).
  public var inlined: Bool = false
  /// The calls inlined at this frame's address, innermost first, each with the file and line
  /// inside that inlined function; `expanded` lists them with this frame last, in the order
  /// `llvm-symbolizer --inlines` prints them. Empty when nothing was inlined there or the
  /// module has no DWARF.
  public var inlinedCalls: [SymbolicatedFrame] = []
  /// Why something is missing (see `Note`), or what the optional enhancer could not do.
  public var note: String?

  public init(
    index: Int, address: UInt64, modulePath: String? = nil, moduleOffset: UInt64? = nil,
    buildID: String? = nil,
    symbol: String? = nil, function: String? = nil, symbolOffset: UInt64? = nil, file: String? = nil,
    line: Int? = nil, column: Int? = nil, note: String? = nil
  ) {
    self.index = index
    self.address = address
    self.modulePath = modulePath
    self.moduleOffset = moduleOffset
    self.buildID = buildID
    self.symbol = symbol
    self.function = function
    self.symbolOffset = symbolOffset
    self.file = file
    self.line = line
    self.column = column
    self.note = note
  }

  /// The frames this address stands for, innermost first: each inlined call (`inlined`), then
  /// this frame (without its `inlinedCalls`). A backtrace shows these, one after the other.
  public var expanded: [SymbolicatedFrame] {
    guard !inlinedCalls.isEmpty else { return [self] }
    var outer = self
    outer.inlinedCalls = []
    return inlinedCalls + [outer]
  }

  /// One line: `MyApp.Cache.lookup(_:) + 52 (MyApp +0x1a2b4) at Cache.swift:10`, or for an
  /// unnamed frame `0x7f…  (libfoo.so +0x1a2b4, build id 4f1c…) [module gone]`.
  public var description: String {
    var text: String
    if let function {
      text = function
      if let symbolOffset { text += " + \(symbolOffset)" }
    } else {
      text = "0x" + String(address, radix: 16)
    }
    if let modulePath {
      let name = modulePath.split(separator: "/").last.map(String.init) ?? modulePath
      text += " (\(name)"
      if let moduleOffset { text += " +0x" + String(moduleOffset, radix: 16) }
      if function == nil, let buildID, !buildID.isEmpty { text += ", build id \(buildID)" }
      text += ")"
    }
    if inlined { text += " [inlined]" }
    if let file {
      text += " at \(file)"
      if let line { text += ":\(line)" }
    }
    if let note { text += " [\(note)]" }
    return text
  }
}
