// ELFSymbolRule.swift — which ELF symbol-table entries can name code, and how they rank: the
// crash handler's own rule (crumbs_elf_symbol_rank, Sources/CrumbsSignalPath/crash/
// crumbs_elf_symbol.c), for the reports' symbol tables (SortedSymbols, SymbolScan), so the
// termination line and the report read a table by the same rule. CrumbsReports reaches it here,
// since only the recorder imports the signal path. Pure; safe from any thread.

import CrumbsSignalPath

/// The crash handler's rule for symbol-table entries.
package enum ELFSymbolRule {
  /// What a function ranks at least: above every other kind of symbol.
  package static let functionRank = UInt8(CRUMBS_ELF_RANK_FUNCTION)

  /// 0 when the entry cannot name code, else its rank among entries at one address (see
  /// crumbs_elf_symbol_rank). `codeSection`: whether its section holds code (asked only of an
  /// entry that is not a function).
  package static func rank(
    info: UInt8, section: UInt16, size: UInt64, nameOffset: UInt32, namesSize: Int, codeSection: () -> Bool
  ) -> UInt8 {
    let type = info & 0xF
    let isFunction = type == 2 || type == 10  // STT_FUNC, STT_GNU_IFUNC
    return crumbs_elf_symbol_rank(
      info, section, size, UInt64(nameOffset), UInt64(namesSize), !isFunction && codeSection())
  }
}
