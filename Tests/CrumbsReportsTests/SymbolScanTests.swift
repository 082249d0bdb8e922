// SymbolScanTests.swift — a module file read for a few addresses (SymbolScan: one pass, no sort)
// names them exactly as the sorted table does: same symbol, start and size, for every kind of
// address (a symbol's first and last byte, just past it, gaps, aliases at one address, unsized
// symbols), in libc (.dynsym, many aliases), this test binary (.symtab) and libswiftCore; and
// the same problems for a damaged file.

import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct SymbolScanTests {
  /// Addresses around the symbols of `image`: first byte, last byte, one past, one before, and
  /// some between, at most about `limit`.
  private func addresses(around image: ELFImage, limit: Int) -> [UInt64] {
    let symbols = image.symbols
    let step = max(1, symbols.count / (limit / 5))
    var addresses: [UInt64] = [0, 1, .max, .max - 1]
    for index in stride(from: 0, to: symbols.count, by: step) {
      let symbol = symbols[index]
      addresses += [
        symbol.start, symbol.start &- 1, symbol.start &+ symbol.size, symbol.start &+ symbol.size / 2,
      ]
      if symbol.size > 0 { addresses.append(symbol.start &+ symbol.size &- 1) }
    }
    return addresses
  }

  private func modulePaths() throws -> [String] {
    let modules = CurrentProcessModules.list()
    let libc = try #require(modules.first { $0.path.hasSuffix("/libc.so.6") })
    let own = try #require(Syscall.readLink("/proc/self/exe"))
    var paths = [libc.path, own]
    if let core = modules.first(where: { $0.path.hasSuffix("/libswiftCore.so") }) { paths.append(core.path) }
    return paths
  }

  @Test func aScanNamesEachAddressAsTheSortedTableDoes() throws {
    for path in try modulePaths() {
      let sorted = try ELFImage.read(path: path)
      #expect(sorted.symbolCount > 100, "\(path)")
      let wanted = addresses(around: sorted, limit: 4000)
      let scanned = try ELFImage.read(path: path, answering: wanted)
      #expect(scanned.deferredSymbols != nil, "\(path)")
      #expect(scanned.symbolTable == sorted.symbolTable)
      #expect(scanned.problems == sorted.problems)
      #expect(scanned.hasSymbols)
      var differences = 0
      for address in wanted where scanned.symbol(containing: address) != sorted.symbol(containing: address) {
        differences += 1
        if differences <= 5 {
          Issue.record(
            "\(path) 0x\(String(address, radix: 16)): scan \(String(describing: scanned.symbol(containing: address))), sorted \(String(describing: sorted.symbol(containing: address)))"
          )
        }
      }
      #expect(differences == 0, "\(path): \(differences) of \(wanted.count) addresses named differently")
    }
  }

  @Test func anAddressTheScanWasNotAskedAboutIsNamedFromTheSortedTableReadThen() throws {
    let address = UInt64(UInt(bitPattern: dlsym(nil, "getpid")))
    let libc = try #require(CurrentProcessModules.list().first { $0.path.hasSuffix("/libc.so.6") })
    let offset = address - libc.loadBias
    let sorted = try ELFImage.read(path: libc.path)
    let scanned = try ELFImage.read(path: libc.path, answering: [offset])
    #expect(scanned.symbol(containing: offset)?.name == "getpid")
    // Not asked about: the sorted table is read, once, and shared with every copy.
    let copy = scanned
    #expect(copy.symbol(containing: offset + 4)?.name == "getpid")
    #expect(scanned.symbolCount == sorted.symbolCount)
    #expect(copy.symbols == sorted.symbols)
  }

  @Test func aDamagedFileGivesTheSameProblemsScannedOrSorted() throws {
    let libc = try #require(CurrentProcessModules.list().first { $0.path.hasSuffix("/libc.so.6") })
    let real = try Syscall.readFile(libc.path)
    let sorted = try ELFImage.read(path: libc.path)
    let wanted = addresses(around: sorted, limit: 500)
    let directory = TestDirectory()
    for cut in (1..<16).map({ real.count * $0 / 16 }) + [real.count - 1] {
      let path = directory.file("cut-\(cut).so")
      try Syscall.writeFileAtomically(path, real.prefix(cut), durable: false)
      let whole = try ELFImage.read(path: path)
      let scanned = try ELFImage.read(path: path, answering: wanted)
      #expect(scanned.problems == whole.problems, "cut at \(cut)")
      #expect(scanned.symbolTable == whole.symbolTable, "cut at \(cut)")
      #expect(scanned.hasSymbols == (whole.symbolCount > 0), "cut at \(cut)")
      for address in wanted where scanned.symbol(containing: address) != whole.symbol(containing: address) {
        Issue.record("cut at \(cut), 0x\(String(address, radix: 16)) named differently")
        break
      }
    }
  }
}
