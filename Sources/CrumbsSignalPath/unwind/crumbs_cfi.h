// crumbs_cfi.h — reading a module's .eh_frame call frame information (CFI), for the unwinder.
// Internal to CrumbsSignalPath (crumbs_unwind.c uses it; the fuzz entry point in
// crumbs_crash_testing.h feeds it a buffer).
//
// Entry points, in call order:
//   crumbs__cfi_find_fde   binary search of .eh_frame_hdr's sorted table for the FDE of a pc
//   crumbs__cfi_row_at     parse that FDE and its CIE, run the CFA program up to the pc: the
//                          rules that give the caller's registers (crumbs__cfi_row)
//
// Every byte is read through a crumbs__cfi_region, bounds-checked against the range the caller
// proved readable (in the handler: the loaded segment holding .eh_frame_hdr; in the fuzzer: the
// input buffer). The bytes were written by a compiler and a linker we do not control, and the
// process may have scribbled over them: any length, offset, encoding or opcode that does not make
// sense ends the parse with an error, never a read outside the region, never an unbounded loop.
//
// ASYNC-SIGNAL-SAFE: everything here. No libc call at all: loads from the region, arithmetic.

#ifndef CRUMBS_CFI_H
#define CRUMBS_CFI_H

#include "kit/crumbs_context.h"

#include <stdbool.h>
#include <stdint.h>

/// Bytes an address range lets the parser read: [low, high), stored at `bytes` (which is `low`
/// itself in the handler).
typedef struct crumbs__cfi_region {
  uint64_t low, high;
  const uint8_t *bytes;
} crumbs__cfi_region;

/// How a register of the caller is recovered (crumbs__cfi_row.rules).
enum {
  CRUMBS_CFI_SAME = 0,       // unchanged (also: no rule given)
  CRUMBS_CFI_UNDEFINED = 1,  // not recoverable (the return address column: the outermost frame)
  CRUMBS_CFI_OFFSET = 2,     // saved at CFA + value
  CRUMBS_CFI_VAL_OFFSET = 3, // is CFA + value
  CRUMBS_CFI_REGISTER = 4,   // is in register `value`
  CRUMBS_CFI_EXPRESSION = 5, // a DWARF expression: not evaluated, the unwinder gives up on it
};

/// crumbs__cfi_row_at's result.
enum {
  CRUMBS_CFI_OK = 0,
  CRUMBS_CFI_NO_FDE = 1,      // the table has no FDE covering the pc
  CRUMBS_CFI_MALFORMED = 2,   // a length, offset or encoding out of range
  CRUMBS_CFI_UNSUPPORTED = 3, // something valid we do not implement (an encoding, an opcode)
};

/// The rules in effect at one pc: the caller's CFA (canonical frame address) is
/// register `cfa_register` + `cfa_offset`, and each register's rule is in `rules`.
typedef struct crumbs__cfi_row {
  uint64_t function_start, function_end; // the FDE's range [start, end)
  uint32_t return_register;              // the CIE's return address column
  uint32_t cfa_register;
  int64_t cfa_offset;
  bool cfa_is_expression; // DW_CFA_def_cfa_expression: the unwinder gives up
  bool signal_frame;      // augmentation "S": the caller's pc is exact, not a return address
  uint8_t rules[CRUMBS_CFI_REGISTERS];
  int64_t values[CRUMBS_CFI_REGISTERS];
} crumbs__cfi_row;

/// The FDE covering `pc` from the binary-search table of the .eh_frame_hdr at `header` (inside
/// `region`): its address and the function's range. CRUMBS_CFI_OK or an error.
/// Safe to call from a signal handler (loads inside `region` only; O(log n) steps).
int crumbs__cfi_find_fde(const crumbs__cfi_region *region, uint64_t header, uint64_t pc, uint64_t *fde,
                         uint64_t *function_start, uint64_t *function_end);

/// The row for `pc` (which the caller has already turned into the address of the instruction
/// that is executing, i.e. return address − 1 for callers): finds the FDE through `header`,
/// parses it and its CIE, runs the CIE's and the FDE's CFA programs up to `pc`.
/// Safe to call from a signal handler (loads inside `region` only; every loop bounded by the
/// bytes it consumes and by a fixed step count).
int crumbs__cfi_row_at(const crumbs__cfi_region *region, uint64_t header, uint64_t pc, crumbs__cfi_row *row);

#endif // CRUMBS_CFI_H
