// SymbolicationTests.swift — real addresses of this test binary and of libc, named by reading
// the files the way a next launch would; copies that were stripped, replaced or removed; damaged
// ELF files; and the optional llvm-symbolizer enhancer.

import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

// MARK: - Probes: functions whose return addresses the tests capture

/// `int backtrace(void **buffer, int size)` (execinfo.h does not import into Swift).
private typealias BacktraceFunction =
  @convention(c) (UnsafeMutablePointer<UnsafeMutableRawPointer?>?, Int32) -> Int32
private let backtraceFunction = unsafeBitCast(dlsym(nil, "backtrace")!, to: BacktraceFunction.self)

/// The return addresses of the current stack; [0] lies in the caller of this function.
@inline(never)
func currentReturnAddresses() -> [UInt64] {
  var buffer = [UnsafeMutableRawPointer?](repeating: nil, count: 32)
  let count = Int(backtraceFunction(&buffer, 32))
  // [0] is inside this function (the return from backtrace): drop it.
  return buffer[0..<count].dropFirst().map { UInt64(UInt(bitPattern: $0)) }
}

struct SymbolicationProbe {
  /// Captures the stack from two levels of named Swift functions: [0] is in `inner`, [1] in
  /// `outer`. Returns the source line of the capture call too.
  @inline(never)
  static func outer(_ seed: Int) -> (addresses: [UInt64], line: Int) {
    let result = inner(seed &+ 1)
    // Work after the call, so the call cannot become a tail call.
    return (result.addresses, result.line &+ (seed == Int.min ? 1 : 0))
  }

  @inline(never)
  static func inner(_ seed: Int) -> (addresses: [UInt64], line: Int) {
    let (addresses, line) = (currentReturnAddresses(), #line)
    return (addresses.map { $0 &+ UInt64(seed == Int.min ? 1 : 0) }, line)
  }
}

/// A file-private function: a local symbol, which `strip` removes (it is not in `.dynsym`).
@inline(never)
private func fileLocalProbe(_ seed: Int) -> [UInt64] {
  let addresses = currentReturnAddresses()
  return addresses.map { $0 &+ UInt64(seed == Int.min ? 1 : 0) }
}

// MARK: - Helpers

/// The modules of this process, and the one holding `address`.
private func moduleHolding(_ address: UInt64) throws -> LoadedModule {
  let modules = CurrentProcessModules.list()
  return try #require(
    modules.first { $0.textContains(address) }, "no module holds 0x\(String(address, radix: 16))")
}

/// The file /proc/self/maps says is mapped at `address`.
private func mappedPath(containing address: UInt64) -> String? {
  guard let bytes = try? Syscall.readFile("/proc/self/maps") else { return nil }
  for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
    let fields = line.split(separator: " ", omittingEmptySubsequences: true)
    let range = fields[0].split(separator: "-")
    guard fields.count >= 6, range.count == 2, let low = UInt64(range[0], radix: 16),
      let high = UInt64(range[1], radix: 16), low <= address, address < high
    else { continue }
    return fields[5...].joined(separator: " ")
  }
  return nil
}

/// `path` with symbolic links resolved (/lib → /usr/lib on merged-/usr systems).
private func canonical(_ path: String) -> String? {
  guard let resolved = realpath(path, nil) else { return nil }
  defer { free(resolved) }
  return String(cString: resolved)
}

private func runShell(_ command: String) -> Int32 {
  let status = system(command)
  return (status >> 8) & 0xFF
}

private func onPath(_ name: String) -> Bool { LLVMSymbolizer.onPath(name) != nil }

private var noEnhancer: Symbolicator.Options {
  var options = Symbolicator.Options()
  options.useLLVMSymbolizer = false
  return options
}

@Suite struct SymbolicationTests {
  // MARK: Names from the ELF symbol tables

  @Test func namesSwiftFunctionsOfThisBinaryDemangled() throws {
    let (addresses, _) = SymbolicationProbe.outer(7)
    let symbolicator = Symbolicator(modules: CurrentProcessModules.list(), options: noEnhancer)
    let frames = symbolicator.symbolicate(Array(addresses.prefix(4)), firstIsExactPC: false)

    #expect(
      frames[0].function
        == "static CrumbsReportsTests.SymbolicationProbe.inner(Swift.Int) -> (addresses: Swift.Array<Swift.UInt64>, line: Swift.Int)"
    )
    #expect(
      frames[1].function
        == "static CrumbsReportsTests.SymbolicationProbe.outer(Swift.Int) -> (addresses: Swift.Array<Swift.UInt64>, line: Swift.Int)"
    )
    #expect(frames[0].symbol?.hasPrefix("$s18CrumbsReportsTests18SymbolicationProbeV5inner") == true)
    #expect(frames[0].note == nil)
    // The caller of `outer` is this test function.
    #expect(frames[2].function?.contains("namesSwiftFunctionsOfThisBinaryDemangled") == true)

    // Module and offset agree with the kernel's view of the mappings.
    let module = try moduleHolding(addresses[0])
    #expect(mappedPath(containing: addresses[0]) == canonical(module.path))
    #expect(frames[0].modulePath == module.path)
    #expect(frames[0].moduleOffset == addresses[0] - module.loadBias)
    #expect(frames[0].buildID == module.buildIDHex)
    #expect(!module.buildID.isEmpty)
    let offset = try #require(frames[0].symbolOffset)
    #expect(offset > 0 && offset < 4096)
    #expect(frames[0].description.hasPrefix("static CrumbsReportsTests.SymbolicationProbe.inner(Swift.Int)"))
    #expect(frames[0].description.contains(" + \(offset) ("))
  }

  @Test func simplifiedNamesDropTheStandardLibraryNoise() throws {
    let (addresses, _) = SymbolicationProbe.outer(1)
    var options = noEnhancer
    options.nameStyle = .simplified
    let frames = Symbolicator(modules: CurrentProcessModules.list(), options: options)
      .symbolicate([addresses[0]], firstIsExactPC: false)
    #expect(frames[0].function == "static CrumbsReportsTests.SymbolicationProbe.inner(Int)")
    #expect(
      SymbolDemangler.simplify("closure #1 (Swift.Int) -> Swift.Int in Foo.bar() -> ()")
        == "closure #1 (Int) in Foo.bar() -> ()")
  }

  @Test func readableNamesAreTheBacktracersWithoutTheCompilersWords() {
    // A release build's specialized function, a closure, a C++ method, a C function.
    #expect(
      SymbolDemangler.readable("$s6Crumbs9TestCrashO16writeThroughNulls5NeverOyFZTf4d_n")
        == "TestCrash.writeThroughNull()")
    #expect(
      SymbolDemangler.readable("$s13CrumbsReports11ReportStoreV8contains2idSbSS_tFSbAA0C5StateOXEfU_TA")
        == "closure #1 in ReportStore.contains(id:)")
    #expect(
      SymbolDemangler.readable("_ZNSt6vectorIiSaIiEE9push_backERKi")
        == "std::vector<int, std::allocator<int> >::push_back(int const&)")
    #expect(SymbolDemangler.readable("memcpy") == "memcpy")
    #expect(SymbolDemangler.demangleType("St13runtime_error") == "std::runtime_error")
  }

  @Test func theExactPCIsLookedUpAsIsAndReturnAddressesOneByteBack() throws {
    // A function's first byte: as an exact PC it is in the function; as a return address it
    // belongs to whatever precedes it.
    let getpid = UInt64(UInt(bitPattern: dlsym(nil, "getpid")))
    let symbolicator = Symbolicator(modules: CurrentProcessModules.list(), options: noEnhancer)
    let exact = symbolicator.symbolicate([getpid], firstIsExactPC: true)[0]
    let returned = symbolicator.symbolicate([getpid], firstIsExactPC: false)[0]
    #expect(exact.symbol == "getpid")
    #expect(exact.symbolOffset == 0)
    #expect(returned.symbol != "getpid")
  }

  @Test func aFrameInLibcIsNamedFromItsDynamicSymbols() throws {
    let address = UInt64(UInt(bitPattern: dlsym(nil, "getpid"))) + 4
    let module = try moduleHolding(address)
    #expect(module.path.hasSuffix("/libc.so.6"))
    let frames = Symbolicator(modules: CurrentProcessModules.list(), options: noEnhancer)
      .symbolicate([address], firstIsExactPC: true)
    #expect(frames[0].symbol == "getpid")
    #expect(frames[0].function == "getpid")
    #expect(frames[0].symbolOffset == 4)
    #expect(frames[0].modulePath == module.path)
    #expect(mappedPath(containing: address) == canonical(module.path))
  }

  @Test func aModuleFileParsedOnceIsNotParsedAgainUntilItChanges() throws {
    // A next launch names a crash from the app's modules; a later non-fatal report (another
    // Symbolicator) reuses the tables it parsed. A copy of libc of this test's own: the cache
    // is the process's, and other tests run at the same time.
    let address = UInt64(UInt(bitPattern: dlsym(nil, "getpid"))) + 4
    let libc = try moduleHolding(address)
    let directory = TestDirectory()
    let copy = directory.file("libc-copy.so")
    #expect(runShell("cp '\(libc.path)' '\(copy)'") == 0)
    var module = libc
    module.path = copy
    func name() -> SymbolicatedFrame {
      Symbolicator(modules: [module], options: noEnhancer).symbolicate([address], firstIsExactPC: true)[0]
    }

    #expect(name().symbol == "getpid")
    #expect(ParsedModuleCache.shared.parseCount(of: copy) == 1)
    let later = name()
    #expect(later.symbol == "getpid" && later.symbolOffset == 4)
    #expect(ParsedModuleCache.shared.parseCount(of: copy) == 1, "a second Symbolicator parsed the file again")

    // Changed (a new modification time): parsed again, not trusted from the cache.
    #expect(runShell("touch -d '2001-01-01 00:00:00' '\(copy)'") == 0)
    #expect(name().symbol == "getpid")
    #expect(ParsedModuleCache.shared.parseCount(of: copy) == 2)
    // Forgotten: parsed again.
    Symbolicator.forgetParsedModules()
    #expect(name().symbol == "getpid")
    #expect(ParsedModuleCache.shared.parseCount(of: copy) == 3)
  }

  @Test func theParsedModuleCacheStaysWithinItsBounds() throws {
    let address = UInt64(UInt(bitPattern: dlsym(nil, "getpid"))) + 4
    let libc = try moduleHolding(address)
    let directory = TestDirectory()
    let cache = ParsedModuleCache(maxEntries: 2, maxBytes: 1 << 30)
    var keys: [ParsedModuleCache.Key] = []
    for index in 0..<3 {
      let copy = directory.file("libc-\(index).so")
      #expect(runShell("cp '\(libc.path)' '\(copy)'") == 0)
      guard case .success(let status) = Syscall.followedStatus(ofPath: copy) else {
        Issue.record("cannot stat \(copy)")
        return
      }
      let key = ParsedModuleCache.Key(path: copy, status: status)
      keys.append(key)
      _ = try cache.image(for: key) { () throws(PersistedFileError) in try ELFImage.read(path: copy) }
    }
    #expect(cache.usage.entries == 2)
    #expect(cache.parseCount == 3)
    // The least recently used (the first) went: asking for it parses again; the newest stays.
    _ = try cache.image(for: keys[2]) { () throws(PersistedFileError) in try ELFImage.read(path: keys[2].path)
    }
    #expect(cache.parseCount == 3)
    _ = try cache.image(for: keys[0]) { () throws(PersistedFileError) in try ELFImage.read(path: keys[0].path)
    }
    #expect(cache.parseCount == 4)
    // An image larger than the byte bound is used but not kept.
    let tiny = ParsedModuleCache(maxEntries: 8, maxBytes: 1)
    _ = try tiny.image(for: keys[0]) { () throws(PersistedFileError) in try ELFImage.read(path: keys[0].path)
    }
    #expect(tiny.usage.entries == 0 && tiny.usage.bytes == 0)
  }

  @Test func readingAModulesSymbolsLeavesMallocsThresholdWhereItWas() throws {
    // A module's names and symbols run to megabytes. Read into Arrays and freed, they raised
    // glibc's mmap threshold to their size for the rest of the process, so that the app's own
    // blocks under it stayed in arenas (PageBuffer.swift). They now live in pages of their own.
    // Probed in a fresh process reading its own executable (a debug build: megabytes of names).
    let child = try ChildProcess(
      ChildProcess.testChild, ["read-then-probe-malloc", "elf", ChildProcess.testChild, String(256 << 10)])
    let output = child.readRemaining()
    child.wait()
    #expect(child.exitCode == 0, "\(output)")
    let symbols = output.split(separator: "\n").first { $0.hasPrefix("read ") }.flatMap {
      Int($0.dropFirst(5))
    }
    #expect((symbols ?? 0) > 10_000, "the test child's symbol table: \(output)")
    #expect(
      output.contains("maps-own-block yes\n"),
      "after reading the test child's symbols, malloc serves 256 KiB from an arena: \(output)")
  }

  @Test func theSymbolSortKeepsTheTablesOrderAmongEquals() throws {
    // SortedSymbols sorts with its own merge sort (the standard library's takes its scratch from
    // malloc): by address, the best rank first, and among equals the table's order, which
    // decides which alias names an address.
    var generator = SystemRandomNumberGenerator()
    for count in [0, 1, 2, 3, 7, 64, 1000, 4097] {
      var table: [PackedSymbol] = []
      for index in 0..<count {
        table.append(
          PackedSymbol(
            start: UInt64.random(in: 0..<64, using: &generator), size: 1, nameOffset: UInt32(index),
            rank: UInt8.random(in: 0..<3, using: &generator)))
      }
      let order: (PackedSymbol, PackedSymbol) -> Bool = {
        $0.start != $1.start ? $0.start < $1.start : $0.rank > $1.rank
      }
      // The standard library's sort is stable (documented since Swift 5).
      let expected = table.sorted(by: order).map(\.nameOffset)
      var sorted = table
      var scratch = table
      sorted.withUnsafeMutableBufferPointer { items in
        scratch.withUnsafeMutableBufferPointer { SortedSymbols.mergeSort(items, scratch: $0, by: order) }
      }
      #expect(sorted.map(\.nameOffset) == expected, "\(count) symbols")
    }
  }

  @Test func procSelfExeNamesTheMainExecutable() throws {
    let (addresses, _) = SymbolicationProbe.outer(2)
    var module = try moduleHolding(addresses[0])
    module.path = "/proc/self/exe"
    let frames = Symbolicator(modules: [module], options: noEnhancer).symbolicate(
      [addresses[0]], firstIsExactPC: false)
    #expect(frames[0].function?.hasPrefix("static CrumbsReportsTests.SymbolicationProbe.inner(") == true)
  }

  // MARK: Modules that are gone, changed or stripped

  @Test func aMissingModuleKeepsModuleOffsetAndBuildID() throws {
    let directory = TestDirectory()
    let module = LoadedModule(
      path: directory.file("libgone.so"), loadBias: 0x7f00_0000_0000, buildID: [0xAB, 0xCD, 0x01],
      start: 0x7f00_0000_0000, end: 0x7f00_0010_0000, textStart: 0x7f00_0000_1000, textEnd: 0x7f00_0008_0000)
    let frames = Symbolicator(modules: [module]).symbolicate([0x7f00_0000_2345, 0x7f00_0000_3000])
    #expect(frames[0].note == SymbolicatedFrame.Note.moduleGone)
    #expect(frames[0].modulePath == module.path)
    #expect(frames[0].moduleOffset == 0x2345)
    #expect(frames[1].moduleOffset == 0x3000)
    #expect(frames[0].buildID == "abcd01")
    #expect(frames[0].symbol == nil && frames[0].function == nil && frames[0].file == nil)
    #expect(frames[0].description == "0x7f0000002345 (libgone.so +0x2345, build id abcd01) [module gone]")
  }

  @Test func anAddressOutsideEveryModuleSaysSo() {
    let frames = Symbolicator(modules: CurrentProcessModules.list()).symbolicate([0x10, 0])
    #expect(frames.map(\.note) == [SymbolicatedFrame.Note.noModule, SymbolicatedFrame.Note.noModule])
    #expect(frames[0].modulePath == nil && frames[0].moduleOffset == nil)
  }

  @Test func aChangedBuildIDNamesNothing() throws {
    let (addresses, _) = SymbolicationProbe.outer(3)
    var module = try moduleHolding(addresses[0])
    let realBuildID = module.buildID
    module.buildID = realBuildID.map { $0 ^ 0xFF }
    let frames = Symbolicator(modules: [module]).symbolicate([addresses[0]], firstIsExactPC: false)
    #expect(frames[0].note == SymbolicatedFrame.Note.buildIDChanged)
    #expect(frames[0].symbol == nil && frames[0].file == nil)
    #expect(frames[0].moduleOffset == addresses[0] - module.loadBias)
    #expect(frames[0].buildID == module.buildIDHex)

    // With no recorded build ID there is nothing to compare: the file is trusted.
    module.buildID = []
    let trusted = Symbolicator(modules: [module], options: noEnhancer).symbolicate(
      [addresses[0]], firstIsExactPC: false)
    #expect(trusted[0].function?.hasPrefix("static CrumbsReportsTests.SymbolicationProbe.inner(") == true)
  }

  @Test(.enabled(if: onPath("strip"), "binutils' strip is not on PATH"))
  func aStrippedCopyGivesModuleOffsetAndANote() throws {
    let addresses = fileLocalProbe(4)
    let original = try moduleHolding(addresses[0])
    let directory = TestDirectory()
    let copy = directory.file("stripped-copy")
    #expect(runShell("strip --strip-all -o '\(copy)' '\(original.path)'") == 0)

    // Same build ID (strip keeps the note), same layout: only the names are gone.
    let image = try ELFImage.read(path: copy)
    #expect(image.buildID == original.buildID)
    #expect(image.symbolTable != .symtab)
    var module = original
    module.path = copy
    let frames = Symbolicator(modules: [module], options: noEnhancer).symbolicate(
      [addresses[0]], firstIsExactPC: false)
    #expect(frames[0].note == SymbolicatedFrame.Note.stripped)
    #expect(frames[0].symbol == nil)
    #expect(frames[0].moduleOffset == addresses[0] - original.loadBias)
    #expect(frames[0].buildID == original.buildIDHex)

    // The unstripped original names it.
    let named = Symbolicator(modules: [original], options: noEnhancer).symbolicate(
      [addresses[0]], firstIsExactPC: false)
    #expect(named[0].function?.contains("fileLocalProbe") == true)
  }

  // MARK: Damaged files

  @Test func garbageAndTruncatedFilesGiveTypedErrors() throws {
    #expect(throws: PersistedFileError.self) { try ELFImage.parse(bytes: [UInt8]()) }
    #expect(
      performing: { try ELFImage.parse(bytes: [0x7F, 0x45, 0x4C]) },
      throws: { ($0 as? PersistedFileError)?.kind == .unrecognized })
    let elf32 = [0x7F, 0x45, 0x4C, 0x46, 1, 1, 1] + [UInt8](repeating: 0, count: 57)
    #expect(
      performing: { try ELFImage.parse(bytes: elf32) },
      throws: { ($0 as? PersistedFileError)?.kind == .unsupported })
    let bigEndian = [0x7F, 0x45, 0x4C, 0x46, 2, 2, 1] + [UInt8](repeating: 0, count: 57)
    #expect(
      performing: { try ELFImage.parse(bytes: bigEndian) },
      throws: { ($0 as? PersistedFileError)?.kind == .unsupported })

    let libc = try #require(CurrentProcessModules.list().first { $0.path.hasSuffix("/libc.so.6") })
    let real = try #require(try? Syscall.readFile(libc.path))
    let whole = try ELFImage.parse(bytes: real)
    #expect(whole.problems.isEmpty)
    #expect(whole.buildID == libc.buildID)
    #expect(whole.symbolCount > 1000)

    #expect(
      performing: { try ELFImage.parse(bytes: Array(real.prefix(40))) },
      throws: { ($0 as? PersistedFileError)?.kind == .truncated })
    // Every cut keeps what lies before it and reports the rest, never traps.
    var cuts = [64, 100, 1000, 4096, real.count / 2, real.count - 1]
    cuts += (1..<64).map { real.count * $0 / 64 }
    for cut in cuts {
      let image = try ELFImage.parse(bytes: Array(real.prefix(cut)))
      #expect(!image.problems.isEmpty || image.symbolCount == whole.symbolCount, "cut at \(cut)")
    }
    // A header whose table offsets and counts are absurd.
    var absurd = Array(real.prefix(64))
    for (offset, value) in [(32, UInt64.max - 10), (40, UInt64.max / 2)] {
      withUnsafeBytes(of: value.littleEndian) { absurd.replaceSubrange(offset..<offset + 8, with: $0) }
    }
    absurd[56] = 0xFF
    absurd[57] = 0xFF
    absurd[60] = 0xFF
    absurd[61] = 0xFF
    let parsed = try ELFImage.parse(bytes: absurd)
    #expect(parsed.symbolCount == 0 && !parsed.problems.isEmpty)

    // Deterministic random damage to the headers and tables of a real file.
    var generator = SplitMix64(seed: 0x5EED)
    let sample = Array(real.prefix(64 << 10))
    for _ in 0..<300 {
      var damaged = sample
      for _ in 0..<8 {
        let position = Int(generator.next() % 512)
        damaged[position] = UInt8(truncatingIfNeeded: generator.next())
      }
      _ = try? ELFImage.parse(bytes: damaged)
    }
  }

  /// Fuzz/Corpus/elf-reader (tiny files built from one C file, see Fuzz/README.md) and the
  /// fuzzer's finding in Fuzz/Regressions/elf-reader.
  @Test func fuzzSeedsAndFindingsReadAsExpected() throws {
    let fuzz = String(#filePath.dropLast("Tests/CrumbsReportsTests/SymbolicationTests.swift".count)) + "Fuzz"
    let shared = try ELFImage.read(path: fuzz + "/Corpus/elf-reader/libtiny.so")
    #expect(shared.symbolTable == .symtab && shared.buildID.count == 20 && shared.problems.isEmpty)
    let exported = try #require(shared.symbols.first { $0.name == "tiny_exported" })
    #expect(shared.symbol(containing: exported.start + exported.size - 1)?.name == "tiny_exported")
    #expect(shared.symbol(containing: exported.start + exported.size)?.name != "tiny_exported")
    #expect(shared.symbols.contains { $0.name == "helper" })  // static: only in .symtab
    // Unsized symbols reach the end of their section (`_init`: .init, 0x17 bytes) or the next
    // symbol (`frame_dummy` stops where `helper` starts), never beyond.
    let initialization = try #require(shared.symbols.first { $0.name == "_init" })
    #expect(initialization.size == 0x17)
    #expect(shared.symbol(containing: initialization.start + 0x17)?.name != "_init")
    let frameDummy = try #require(shared.symbols.first { $0.name == "frame_dummy" })
    let helper = try #require(shared.symbols.first { $0.name == "helper" })
    #expect(frameDummy.start + frameDummy.size == helper.start)

    let stripped = try ELFImage.read(path: fuzz + "/Corpus/elf-reader/libtiny-stripped.so")
    #expect(stripped.symbolTable == .dynsym && stripped.buildID == shared.buildID)
    #expect(stripped.symbols.map(\.name).contains("tiny_exported"))
    #expect(!stripped.symbols.contains { $0.name == "helper" })

    let object = try ELFImage.read(path: fuzz + "/Corpus/elf-reader/tiny.o")
    #expect(object.fileType == 1 && object.segments.isEmpty && object.buildID.isEmpty)

    // sh_entsize 2^63+…: rejected as a table, the rest of the file still read.
    let finding = try ELFImage.read(
      path: fuzz + "/Regressions/elf-reader/not-enough-bits-ELFImage.readSymbols-entry-size-5662e1d47c")
    #expect(finding.symbolCount == 0)
    let problem = "symtab: symbol entries of 12370169555311111083 bytes"
    #expect(finding.problems.contains { $0.hasPrefix(problem) })
  }

  @Test func aGarbageModuleFileIsNotedNotFatal() throws {
    let directory = TestDirectory()
    let path = directory.file("libgarbage.so")
    try Syscall.writeFileAtomically(
      path, [0x7F, 0x45, 0x4C, 0x46, 2, 1, 1] + [UInt8](repeating: 0xEE, count: 200))
    let module = LoadedModule(
      path: path, loadBias: 0x1000, buildID: [], start: 0x1000, end: 0x9000, textStart: 0x1000,
      textEnd: 0x9000)
    let frames = Symbolicator(modules: [module]).symbolicate([0x2000])
    let note = try #require(frames[0].note)
    #expect(note.hasPrefix("module unreadable:"), "\(note)")
    #expect(frames[0].moduleOffset == 0x1000)

    // A directory, a FIFO: refused without blocking (and without a made-up errno).
    for path in [directory.path, directory.file("fifo")] {
      if path.hasSuffix("fifo") { #expect(mkfifo(path, 0o600) == 0) }
      #expect(
        performing: { try ELFImage.read(path: path) },
        throws: {
          let error = $0 as? PersistedFileError
          return error?.kind == .unreadable && error?.format == .elf && error?.path == path
            && error?.errno == nil && error?.description == path + ": cannot open: not a regular file"
        })
    }
    // A parse error read from a file names the file; the same bytes in memory do not.
    let text = directory.file("notes.txt")
    try Syscall.writeFileAtomically(text, Array("not an ELF file at all\n".utf8))
    #expect(
      performing: { try ELFImage.read(path: text) },
      throws: {
        ($0 as? PersistedFileError).map {
          $0.kind == .unrecognized && $0.path == text && $0.errno == nil
            && $0.description == text + ": not an ELF file (wrong magic)"
        } ?? false
      })
    #expect(
      performing: { try ELFImage.parse(bytes: Array("not an ELF file at all\n".utf8)) },
      throws: { ($0 as? PersistedFileError)?.description == "not an ELF file (wrong magic)" })
  }

  // MARK: The module map of this process

  @Test func currentProcessModulesMatchTheDynamicLinker() throws {
    let modules = CurrentProcessModules.list()
    #expect(modules.count >= 3)
    let executable = try #require(modules.first)
    #expect(executable.path == Syscall.readLink("/proc/self/exe"))
    for module in modules where module.path.hasPrefix("/") {
      #expect(module.textStart < module.textEnd, "\(module.path)")
      #expect(module.start <= module.textStart && module.textEnd <= module.end, "\(module.path)")
      // The build ID read from memory is the one in the file.
      if let image = try? ELFImage.read(path: module.path) {
        #expect(image.buildID == module.buildID, "\(module.path)")
      }
    }
  }

  // MARK: The optional enhancer

  @Test(
    .enabled(
      if: onPath("llvm-symbolizer"), "llvm-symbolizer is not on PATH: the optional enhancer is not tested"))
  func llvmSymbolizerAddsFileAndLine() throws {
    let (addresses, line) = SymbolicationProbe.outer(5)
    let frames = Symbolicator(modules: CurrentProcessModules.list())
      .symbolicate(Array(addresses.prefix(2)), firstIsExactPC: false)
    #expect(
      frames[0].file?.hasSuffix("Tests/CrumbsReportsTests/SymbolicationTests.swift") == true, "\(frames[0])")
    #expect(frames[0].line == line, "\(frames[0])")
    #expect(frames[1].file?.hasSuffix("SymbolicationTests.swift") == true)
    #expect(frames[0].function?.hasPrefix("static CrumbsReportsTests.SymbolicationProbe.inner(") == true)
    #expect(frames[0].note == nil)
    #expect(frames[0].description.contains("SymbolicationTests.swift:\(line)"))
  }

  @Test func aFailingEnhancerFallsBackToTheSymbolTableWithANote() throws {
    let directory = TestDirectory()
    let fake = directory.file("llvm-symbolizer")
    try Syscall.writeFileAtomically(fake, Array("#!/bin/sh\necho nonsense\nexit 3\n".utf8))
    #expect(chmod(fake, 0o700) == 0)
    var options = Symbolicator.Options()
    options.llvmSymbolizerPath = fake
    let (addresses, _) = SymbolicationProbe.outer(6)
    let frames = Symbolicator(modules: CurrentProcessModules.list(), options: options)
      .symbolicate([addresses[0]], firstIsExactPC: false)
    #expect(frames[0].function?.hasPrefix("static CrumbsReportsTests.SymbolicationProbe.inner(") == true)
    #expect(frames[0].file == nil)
    #expect(frames[0].note?.contains("status 3") == true, "\(frames[0].note ?? "nil")")

    // One that hangs is killed at the time limit.
    try Syscall.writeFileAtomically(fake, Array("#!/bin/sh\nexec sleep 30\n".utf8))
    #expect(chmod(fake, 0o700) == 0)
    options.llvmSymbolizerTimeoutMilliseconds = 200
    let slow = Symbolicator(modules: CurrentProcessModules.list(), options: options)
      .symbolicate([addresses[0]], firstIsExactPC: false)
    #expect(slow[0].note?.contains("took over 200 ms") == true, "\(slow[0].note ?? "nil")")
    #expect(slow[0].function != nil)

    // One that was asked for by path but is not there is noted too (one on PATH is optional).
    options.llvmSymbolizerPath = directory.file("missing-symbolizer")
    let missing = Symbolicator(modules: CurrentProcessModules.list(), options: options)
      .symbolicate([addresses[0]], firstIsExactPC: false)
    #expect(missing[0].note?.contains("not found") == true, "\(missing[0].note ?? "nil")")
    #expect(missing[0].function != nil)
  }

  /// A fake llvm-symbolizer answers every address with two inlined calls, then the function the
  /// address lies in; it logs the module it was asked about.
  private static func inliningSymbolizer(in directory: TestDirectory) throws -> String {
    let fake = directory.file("llvm-symbolizer")
    let log = directory.file("asked")
    let script = """
      #!/bin/sh
      for a in "$@"; do
        case "$a" in
          --obj=*) echo "$a" >> \(log) ;;
          0x*) printf '%s\n$s4main5innerSiyF\n/src/a.swift:3:17\n$s4main6middleSiyF\n/src/a.swift:9:5\nouter\n/src/b.swift:20:0\n\n' "$a" ;;
        esac
      done
      """
    try Syscall.writeFileAtomically(fake, Array(script.utf8))
    #expect(chmod(fake, 0o700) == 0)
    return fake
  }

  @Test func callsInlinedAtAnAddressBecomeFramesOfTheirOwnInLLVMSymbolizersOrder() throws {
    let directory = TestDirectory()
    var options = Symbolicator.Options()
    options.llvmSymbolizerPath = try Self.inliningSymbolizer(in: directory)
    let (addresses, _) = SymbolicationProbe.outer(9)
    let frames = Symbolicator(modules: CurrentProcessModules.list(), options: options)
      .symbolicate([addresses[0]], firstIsExactPC: false)
    try #require(frames.count == 1)
    let frame = frames[0]
    // The frame keeps its symbol table's name; its line is where the outermost call was written.
    #expect(frame.symbol?.hasPrefix("$s18CrumbsReportsTests18SymbolicationProbeV5inner") == true)
    #expect(frame.file == "/src/b.swift" && frame.line == 20 && frame.column == nil, "\(frame)")
    #expect(!frame.inlined)
    #expect(frame.inlinedCalls.map(\.symbol) == ["$s4main5innerSiyF", "$s4main6middleSiyF"])
    #expect(
      frame.inlinedCalls.map(\.function) == ["main.inner() -> Swift.Int", "main.middle() -> Swift.Int"])
    #expect(frame.inlinedCalls.map(\.line) == [3, 9] && frame.inlinedCalls.map(\.column) == [17, 5])
    #expect(
      frame.inlinedCalls.allSatisfy { $0.inlined && $0.address == frame.address && $0.symbolOffset == nil })
    #expect(frame.expanded.map(\.line) == [3, 9, 20])
    #expect(frame.expanded[0].description.contains("[inlined] at /src/a.swift:3"), "\(frame.expanded[0])")

    // In a report: three frames, numbered in order, each with how its address was found.
    let reported = CrashReportBuilder.frames(frames + frames, marks: [.cfi, .guessed])
    #expect(reported.map(\.index) == Array(0..<6))
    #expect(reported.map(\.inlined) == [true, true, nil, true, true, nil])
    #expect(reported.map(\.line) == [3, 9, 20, 3, 9, 20])
    #expect(reported.map(\.column) == [17, 5, nil, 17, 5, nil])
    #expect(reported.map(\.foundBy) == [.cfi, .cfi, .cfi, .guessed, .guessed, .guessed])
    #expect(reported[0].function == "inner()" && reported[1].function == "middle()", "\(reported)")
    #expect(reported[0].symbolOffset == nil && reported[2].symbolOffset != nil)
    let text = CrashReport.stacktrace(reported)
    #expect(
      text.split(separator: "\n").map { $0.contains("[inlined]") } == [true, true, false, true, true, false])

    // Named again later (`crumbs symbolicate`): an address's inlined calls are looked up with it,
    // once, and come back in their place.
    var report = CrashReport.sample()
    report.kind = .nonFatal
    report.modules = CurrentProcessModules.list()
    report.frames = reported
    let again = report.symbolicated(with: options).frames
    #expect(again.map(\.inlined) == reported.map(\.inlined))
    #expect(again.map(\.line) == reported.map(\.line))
    #expect(again.map(\.index) == Array(0..<6))
    #expect(again.map(\.foundBy) == reported.map(\.foundBy))
  }

  @Test func llvmSymbolizersAnswersKeptAreBounded() throws {
    let directory = TestDirectory()
    var options = Symbolicator.Options()
    options.llvmSymbolizerPath = try Self.inliningSymbolizer(in: directory)
    let (probe, _) = SymbolicationProbe.outer(11)
    let symbolicator = Symbolicator(modules: CurrentProcessModules.list(), options: options)
    let executable = try #require(symbolicator.module(containing: probe[0]))
    // Three batches of 1500 distinct addresses of this binary's code: the third passes the bound.
    for batch in 0..<3 {
      let addresses = (0..<1500).map { executable.textStart + UInt64(16 * (batch * 1500 + $0) + 1) }
      let frames = symbolicator.symbolicate(addresses, firstIsExactPC: false)
      #expect(frames.allSatisfy { $0.line == 20 })
      #expect(symbolicator.keptSourceLocations <= Symbolicator.maxSourceLocations)
    }
    #expect(symbolicator.keptSourceLocations == 1500)
  }

  @Test func aModuleWithoutDWARFCostsNoLLVMSymbolizerRun() throws {
    let modules = CurrentProcessModules.list()
    let libc = try #require(modules.first { $0.path.hasSuffix("/libc.so.6") })
    let image = try ELFImage.read(path: libc.path)
    try #require(!image.hasDebugInfo, "libc carries DWARF itself here")
    let installed = Symbolicator.hasLineInfo(image, path: libc.path, installedDebugFiles: true)
    let directory = TestDirectory()
    var options = Symbolicator.Options()
    options.llvmSymbolizerPath = try Self.inliningSymbolizer(in: directory)
    let (addresses, _) = SymbolicationProbe.outer(10)
    let frames = Symbolicator(modules: modules, options: options)
      .symbolicate(
        [addresses[0], libc.textStart + (libc.textEnd - libc.textStart) / 2], firstIsExactPC: false)
    #expect(frames[0].line == 20)
    #expect(
      frames[1].line == nil && frames[1].inlinedCalls.isEmpty && frames[1].function != nil, "\(frames[1])")
    let asked = String(decoding: try Syscall.readFile(directory.file("asked")), as: UTF8.self)
    #expect(!asked.contains("libc"), "\(asked)")
    #expect(asked.split(separator: "\n").count == 1, "\(asked)")

    // With its debug package installed (libc6-dbg), it is asked only when installed debug files
    // are read (`crumbs threads`, `crumbs symbolicate`).
    guard installed else {
      print("libc's debug file is not installed here: the installed-debug-file case is not tested")
      return
    }
    options.readsInstalledDebugFiles = true
    _ = Symbolicator(modules: modules, options: options)
      .symbolicate([libc.textStart + (libc.textEnd - libc.textStart) / 2], firstIsExactPC: false)
    let askedAgain = String(decoding: try Syscall.readFile(directory.file("asked")), as: UTF8.self)
    #expect(askedAgain.split(separator: "\n").last?.contains("libc") == true, "\(askedAgain)")
  }

  @Test func llvmSymbolizerOutputParses() {
    let output = """
      0x1763
      $s1t5ProbeV5probeySaySvSgGSiFZ
      /tmp/a:b/t.swift:7:11
      main
      /tmp/t.swift:11:3

      0x99999
      ??
      ??:0:0

      """
    let parsed = LLVMSymbolizer.parse(Array(output.utf8), offsets: [0x1763, 0x99999])
    #expect(
      parsed == [
        [
          SymbolizerLocation(
            function: "$s1t5ProbeV5probeySaySvSgGSiFZ", file: "/tmp/a:b/t.swift", line: 7, column: 11),
          SymbolizerLocation(function: "main", file: "/tmp/t.swift", line: 11, column: 3),
        ],
        [SymbolizerLocation(function: nil, file: nil, line: nil)],
      ])
    #expect(LLVMSymbolizer.parse(Array(output.utf8), offsets: [0x1763, 0x1]) == nil)
    #expect(LLVMSymbolizer.parse(Array("garbage".utf8), offsets: [0x1]) == nil)
  }

  // MARK: Figures (printed, not asserted: speed goals live in Benchmarks/)

  /// `CRUMBS_SYMBOLICATION_TIMING=1 swift test --filter symbolicationTiming` prints how long
  /// 64 frames across 3 modules take, cold (first parse) and warm.
  @Test(.enabled(if: ProcessInfoLite.environment("CRUMBS_SYMBOLICATION_TIMING") != nil))
  func symbolicationTiming() throws {
    let (probe, _) = SymbolicationProbe.outer(8)
    let modules = CurrentProcessModules.list()
    let executable = try moduleHolding(probe[0])
    let libc = try #require(modules.first { $0.path.hasSuffix("/libc.so.6") })
    let swiftCore = try #require(modules.first { $0.path.contains("libswiftCore.so") })
    var addresses: [UInt64] = []
    for index in 0..<64 {
      let module = [executable, libc, swiftCore][index % 3]
      let span = module.textEnd - module.textStart
      addresses.append(module.textStart + span / 67 * UInt64(index + 1))
    }
    func milliseconds(_ body: () -> Void) -> Double {
      var start = timespec()
      var end = timespec()
      clock_gettime(CLOCK_MONOTONIC, &start)
      body()
      clock_gettime(CLOCK_MONOTONIC, &end)
      return Double(end.tv_sec - start.tv_sec) * 1000 + Double(end.tv_nsec - start.tv_nsec) / 1e6
    }
    for enhancer in [false, true] {
      var options = Symbolicator.Options()
      options.useLLVMSymbolizer = enhancer
      let symbolicator = Symbolicator(modules: modules, options: options)
      var frames: [SymbolicatedFrame] = []
      let cold = milliseconds { frames = symbolicator.symbolicate(addresses) }
      let warm = milliseconds { frames = symbolicator.symbolicate(addresses) }
      let named = frames.filter { $0.function != nil }.count
      let lines = frames.filter { $0.line != nil }.count
      print(
        "symbolication timing: 64 frames, 3 modules (\(executable.name), libc, libswiftCore), llvm-symbolizer \(enhancer ? "on" : "off"): cold \(cold) ms, warm \(warm) ms; \(named) named, \(lines) with lines"
      )
    }
  }
}

/// A small deterministic generator for reproducible damage.
struct SplitMix64 {
  var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var value = state
    value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
    value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
    return value ^ (value >> 31)
  }
}
