// ELFSymbolLookupTests.swift — the pieces of the termination message that read bytes the crash
// handler did not write (crumbs_elf_symbol.c, C): the symbol lookup in an ELF file, on real
// files and on hostile ones (truncated, damaged, garbage: "not found", never a crash), and the
// Swift mangled-name reader.

import CrumbsPlatform
import CrumbsSignalPath
import CrumbsSignalPathTesting
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Fuzz/Corpus/elf-reader/NAME, from this file's path (Tests/CrumbsRecorderTests/…).
private func corpusFile(_ name: String) throws -> [UInt8] {
  var root = #filePath
  for _ in 0..<3 { root = String(root[..<root.lastIndex(of: "/")!]) }
  return try Syscall.readFile(root + "/Fuzz/Corpus/elf-reader/" + name)
}

/// The lookup over `bytes`: status (1 found, 0 not found, -1 no symbol table), name, start.
private func lookup(_ bytes: [UInt8], _ address: UInt64) -> (status: Int32, name: String, start: UInt64) {
  var name = [CChar](repeating: 0, count: 128)
  var start: UInt64 = 0
  let status = bytes.withUnsafeBufferPointer {
    crumbs_elf_symbol_testing_lookup($0.baseAddress, $0.count, address, &name, name.count, &start)
  }
  return (status, text(name), start)
}

private func simplified(_ mangled: String) -> String? {
  var buffer = [CChar](repeating: 0, count: 256)
  let length = crumbs_swift_name_testing_simplify(mangled, &buffer, buffer.count)
  return length == 0 ? nil : text(buffer)
}

/// The text of a NUL-terminated C buffer.
private func text(_ buffer: [CChar]) -> String {
  String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

private func put(_ value: UInt64, at offset: Int, size: Int, in bytes: inout [UInt8]) {
  for index in 0..<size { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) }
}

@Suite("Termination message: symbol lookup and Swift names")
struct ELFSymbolLookupTests {
  @Test func aFunctionIsFoundByAnyAddressInsideIt() throws {
    let pie = try corpusFile("tiny-pie")  // helper [0x699, 0x6ae), tiny_exported [0x6ae, 0x6c8), main 0x6c8
    #expect(lookup(pie, 0x699).name == "helper")
    #expect(lookup(pie, 0x6ad) == (1, "helper", 0x699))
    #expect(lookup(pie, 0x6ae) == (1, "tiny_exported", 0x6ae))
    #expect(lookup(pie, 0x6c8 + 0x12).name == "main")
    #expect(lookup(pie, 0x6c8 + 0x13).status == 0)  // past main's end
    #expect(lookup(pie, 0).status == 0)
    #expect(lookup(pie, .max).status == 0)
    // Stripped: .dynsym only, which still names what the file exports.
    let stripped = try corpusFile("libtiny-stripped.so")
    #expect(lookup(stripped, 0x52e + 3) == (1, "tiny_exported", 0x52e))
  }

  @Test func truncatedDamagedAndGarbageFilesGiveNotFoundNeverACrash() throws {
    let pie = try corpusFile("tiny-pie")
    // Every prefix: the symbol table at the file's end is lost, and with it the name.
    for length in stride(from: 0, to: pie.count, by: 7) {
      let result = lookup(Array(pie[..<length]), 0x6a0)
      #expect((-1...0).contains(result.status), "prefix \(length): \(result)")
    }
    // Header fields that point anywhere: no read past the buffer, no overflow, no loop.
    let shoff = Int(pie[0x28]) | Int(pie[0x29]) << 8 | Int(pie[0x2a]) << 16
    let symtab = shoff + 27 * 64  // section 27 is .symtab (readelf -S)
    let cases: [(String, Int, Int, UInt64)] = [
      ("e_shoff at the end of the address space", 0x28, 8, .max - 10),
      ("e_shoff past the file", 0x28, 8, UInt64(pie.count)),
      ("e_shnum 65535", 0x3c, 2, 0xffff),
      ("e_shentsize 1", 0x3a, 2, 1),
      ("symtab offset wraps", symtab + 24, 8, .max - 4),
      ("symtab size wraps", symtab + 32, 8, .max),
      ("symtab size 10 MiB", symtab + 32, 8, 10 << 20),
      ("symtab entry size 1", symtab + 56, 8, 1),
      ("symtab links itself", symtab + 40, 4, 27),
      ("symtab links past the table", symtab + 40, 4, 0xffff_ffff),
      ("class 32", 4, 1, 1),
    ]
    for (label, offset, size, value) in cases {
      var damaged = pie
      put(value, at: offset, size: size, in: &damaged)
      let result = lookup(damaged, 0x6a0)
      #expect(result.status <= 0 || result.name == "helper", "\(label): \(result)")
    }
    // Random damage (a fixed seed): whatever it hits, a status comes back.
    var state: UInt64 = 0x9e37_79b9_7f4a_7c15
    func next() -> UInt64 {
      state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      return state >> 33
    }
    for _ in 0..<2000 {
      var damaged = pie
      for _ in 0..<(1 + next() % 8) {
        damaged[Int(next() % UInt64(damaged.count))] = UInt8(truncatingIfNeeded: next())
      }
      #expect((-1...1).contains(lookup(damaged, 0x6a0).status))
    }
    #expect(lookup([], 0).status == -1)
    #expect(lookup(Array("not an ELF file at all, just text".utf8), 0).status == -1)
    #expect(lookup([UInt8](repeating: 0xff, count: 4096), 0x10).status == -1)
  }

  @Test func aFileThatCannotBeOpenedOrReadIsNotFound() {
    var name = [CChar](repeating: 0, count: 64)
    var start: UInt64 = 0
    #expect(crumbs_elf_symbol_testing_lookup_file("/nonexistent/crumbs", 0, &name, name.count, &start) == -2)
    #expect(crumbs_elf_symbol_testing_lookup_file("/dev/null", 0, &name, name.count, &start) == -1)
    #expect(crumbs_elf_symbol_testing_lookup_file("/proc/self/status", 0, &name, name.count, &start) == -1)
  }

  @Test func swiftNamesReadAsModuleTypesAndMember() {
    // Mangled names as swiftc 6.3 emits them (nm of a small library), and what they read as.
    let names: [(String, String?)] = [
      ("$s5MyApp6ParserC5parseyyF", "MyApp.Parser.parse"),
      ("$s5MyApp6ParserC5parse4textSiSS_tF", "MyApp.Parser.parse"),
      ("$s5MyApp6ParserC4nameSSvg", "MyApp.Parser.name"),
      ("$s5MyApp7InvoiceV4LineV6amountSiyF", "MyApp.Invoice.Line.amount"),
      ("$s5MyApp7InvoiceV5totalyS2iFZ", "MyApp.Invoice.total"),
      ("$s5MyApp8topLevelyyF", "MyApp.topLevel"),
      ("$s5MyApp7genericyxxlF", "MyApp.generic"),
      ("$s5MyApp13closureHolderSiycyF", "MyApp.closureHolder"),
      // Word substitutions: "C" is the third word so far ("My", "App", "Crash", "Parser").
      ("$s5MyApp11CrashParserO05parseC0yyFZ", "MyApp.CrashParser.parseCrash"),
      ("_$s5MyApp8topLevelyyF", "MyApp.topLevel"),
      // Not read: C names, the standard library's shortcuts, punycode, cut or absurd input.
      ("main", nil), ("crumbs_ring_add", nil), ("$sSa", nil), ("$s5MyApp", nil), ("$s5My", nil),
      ("$s5MyApp0042abc", nil), ("$s5MyApp05parseZ0yyF", nil), ("$s99999999999999999999x", nil),
      ("$s5MyApp0", nil), ("", nil), ("$", nil), ("$s", nil),
    ]
    for (mangled, expected) in names {
      #expect(simplified(mangled) == expected, "\(mangled)")
    }
    // A name longer than the buffer is not cut: the raw name is shown instead.
    var small = [CChar](repeating: 0, count: 8)
    #expect(crumbs_swift_name_testing_simplify("$s5MyApp6ParserC5parseyyF", &small, small.count) == 0)
    // Hostile input: every prefix and byte damage of a real name ends with a bounded result.
    let real = Array("$s5MyApp11CrashParserO05parseC0yyFZ".utf8)
    for cut in 0...real.count {
      _ = simplified(String(decoding: real[..<cut], as: UTF8.self))
      for byte: UInt8 in [0x30, 0x39, 0x41, 0x5a, 0x61, 0x7a, 0xff] where cut < real.count {
        var damaged = real
        damaged[cut] = byte
        if let text = simplified(String(decoding: damaged, as: UTF8.self)) { #expect(text.utf8.count < 256) }
      }
    }
  }

  @Test func crumbsOwnCodeIsRecognized() {
    for name in [
      "crumbs_ring_add", "crumbs__crash_signal_handler", "$s6Crumbs17generateTestCrash4kindsAA0E4KindO_tF",
      "$s14CrumbsRecorder12CrashHandlerV7installyyF", "$s13CrumbsReports4TestV", "$s14CrumbsDelivery1aV",
      "$s14CrumbsPlatform7SyscallO4openyyF",
      // The products the first list missed (issue 36): a log handler's frame is Crumbs' code.
      "$s13CrumbsLogging20BreadcrumbLogHandlerV3log5eventy0B00D5EventV_tF",
      "$s22CrumbsServiceLifecycle0aB7ServiceV3runyyYaKF", "$s13CrumbsTracing4spanyyF",
    ] {
      #expect(crumbs_symbol_testing_is_crumbs(name), "\(name)")
    }
    for name in [
      "main", "crumbsy", "$s15CrumbsTestChild18TerminationWorkloadO12parseInvoiceyy6Crumbs9CrashKindOFZ",
      "$s5MyApp6ParserC5parseyyF", "$s7Crumbs2V", "$s5CrumbsRecorder1aV", "$s6CrumbX", "",
      "$s10Crumbsmith1aV", "$s24CrumbsReportTestSupport1aV", "$s19CrumbsRecorderTests1aV",
    ] {
      #expect(!crumbs_symbol_testing_is_crumbs(name), "\(name)")
    }
  }

  @Test func theSymbolRuleRanksWhatCanNameCode() {
    // st_info: binding << 4 | type. Functions (2, IFUNC 10) outrank the rest; global (1) over
    // weak (2) over local (0); sized over unsized.
    func rank(_ info: UInt8, section: UInt16 = 12, size: UInt64 = 8, name: UInt64 = 1, code: Bool = false)
      -> UInt8
    { crumbs_elf_symbol_rank(info, section, size, name, 100, code) }
    #expect(rank(0x12) == 16 + 4 + 1)
    #expect(rank(0x2A) == 16 + 2 + 1)
    #expect(rank(0x02, size: 0) == 16)
    #expect(rank(0x11, code: true) == 4 + 1)  // a sized object in a code section
    #expect(rank(0x10, code: true) == 4 + 1)  // untyped
    for refused in [
      rank(0x12, section: 0), rank(0x12, section: 0xFFF1), rank(0x12, name: 0), rank(0x12, name: 100),
      rank(0x11), rank(0x11, size: 0, code: true), rank(0x13, code: true), rank(0x14, code: true),
    ] {
      #expect(refused == 0)
    }
  }

  @Test func everySwiftModuleUnderSourcesIsCrumbsOwnCode() throws {
    // The modules are the folders of Sources/ holding Swift: a module added there is skipped by
    // the termination line without any list to update.
    var root = #filePath
    for _ in 0..<3 { root = String(root[..<root.lastIndex(of: "/")!]) }
    let sources = root + "/Sources"
    var modules: [String] = []
    for folder in try Syscall.directoryEntries(sources) where folder != "CrumbsSignalPath" {
      if folder.hasPrefix("Crumbs") {
        modules.append(folder)
      } else {
        // The others are C (CCurlLoader, CLZ4, CZlib): their symbols are not Swift.
        let files = try Syscall.directoryEntries(sources + "/" + folder)
        #expect(!files.contains { $0.hasSuffix(".swift") }, "\(folder) holds Swift but is not named Crumbs…")
      }
    }
    #expect(modules.contains("CrumbsLogging") && modules.contains("CrumbsRecorder"), "\(modules)")
    for module in modules {
      let mangled = "$s\(module.utf8.count)\(module)4workyyF"
      #expect(crumbs_symbol_testing_is_crumbs(mangled), "\(module): \(mangled)")
    }
  }
}
