// crumbs_cfi.c — .eh_frame_hdr lookup, CIE/FDE parsing and the CFA program (see crumbs_cfi.h).
//
// Why C: it runs inside the crash handler. Why our own and not libgcc's or libunwind's: both may
// allocate, take the loader lock, or dlopen, and neither bounds its reads by a range we choose.
//
// ASYNC-SIGNAL-SAFE: everything in this file. No libc call: loads through crumbs__cfi_region
// (bounds-checked) and arithmetic. Every loop ends: the table search halves its range, the
// programs consume at least one byte per step and stop after CRUMBS__CFI_MAX_STEPS steps.
//
// Format references: the LSB's description of .eh_frame and .eh_frame_hdr (DWARF call frame
// information with GNU pointer encodings), DWARF 5 section 6.4.

#include "unwind/crumbs_cfi.h"

#include <stddef.h>

/// At most this many CFA instructions per row (CIE and FDE together); real ones hold dozens.
#define CRUMBS__CFI_MAX_STEPS 4096u
/// DW_CFA_remember_state nesting kept (compilers nest one level).
#define CRUMBS__CFI_MAX_REMEMBERED 4u

// Pointer encodings (DW_EH_PE_*).
enum {
  CRUMBS__PE_ABSPTR = 0x00,
  CRUMBS__PE_ULEB128 = 0x01,
  CRUMBS__PE_UDATA2 = 0x02,
  CRUMBS__PE_UDATA4 = 0x03,
  CRUMBS__PE_UDATA8 = 0x04,
  CRUMBS__PE_SLEB128 = 0x09,
  CRUMBS__PE_SDATA2 = 0x0a,
  CRUMBS__PE_SDATA4 = 0x0b,
  CRUMBS__PE_SDATA8 = 0x0c,
  CRUMBS__PE_PCREL = 0x10,
  CRUMBS__PE_DATAREL = 0x30,
  CRUMBS__PE_INDIRECT = 0x80,
  CRUMBS__PE_OMIT = 0xff,
};

/// A read position inside a region, never past `end` (itself inside the region).
typedef struct crumbs__cursor {
  const crumbs__cfi_region *region;
  uint64_t position, end;
  bool failed;
} crumbs__cursor;

static bool crumbs__cursor_at(crumbs__cursor *cursor, const crumbs__cfi_region *region, uint64_t start,
                              uint64_t end) {
  cursor->region = region;
  cursor->position = start;
  cursor->end = end;
  cursor->failed = start < region->low || end > region->high || start > end;
  return !cursor->failed;
}

static uint64_t crumbs__read_bytes(crumbs__cursor *cursor, unsigned size) {
  if (cursor->failed || cursor->end - cursor->position < size) {
    cursor->failed = true;
    return 0;
  }
  const uint8_t *bytes = cursor->region->bytes + (cursor->position - cursor->region->low);
  uint64_t value = 0;
  for (unsigned index = 0; index < size; index++) value |= (uint64_t)bytes[index] << (8 * index);
  cursor->position += size;
  return value;
}

static uint64_t crumbs__read_uleb(crumbs__cursor *cursor) {
  uint64_t value = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    uint64_t byte = crumbs__read_bytes(cursor, 1);
    if (cursor->failed) return 0;
    value |= (byte & 0x7f) << shift;
    if (!(byte & 0x80)) return value;
  }
  cursor->failed = true; // longer than 10 bytes: not a number we can hold
  return 0;
}

static int64_t crumbs__read_sleb(crumbs__cursor *cursor) {
  uint64_t value = 0;
  unsigned shift = 0;
  uint64_t byte = 0;
  do {
    if (shift >= 64) {
      cursor->failed = true;
      return 0;
    }
    byte = crumbs__read_bytes(cursor, 1);
    if (cursor->failed) return 0;
    value |= (byte & 0x7f) << shift;
    shift += 7;
  } while (byte & 0x80);
  if (shift < 64 && (byte & 0x40)) value |= ~(uint64_t)0 << shift;
  return (int64_t)value;
}

/// Reads a pointer in `encoding`. `data_base` is .eh_frame_hdr's address (DW_EH_PE_datarel).
/// Indirect pointers are not followed (only the personality routine uses them, and we skip it).
static uint64_t crumbs__read_encoded(crumbs__cursor *cursor, uint8_t encoding, uint64_t data_base) {
  if (encoding == CRUMBS__PE_OMIT) return 0;
  uint64_t field = cursor->position;
  uint64_t value;
  switch (encoding & 0x0f) {
  case CRUMBS__PE_ABSPTR: value = crumbs__read_bytes(cursor, 8); break;
  case CRUMBS__PE_ULEB128: value = crumbs__read_uleb(cursor); break;
  case CRUMBS__PE_UDATA2: value = crumbs__read_bytes(cursor, 2); break;
  case CRUMBS__PE_UDATA4: value = crumbs__read_bytes(cursor, 4); break;
  case CRUMBS__PE_UDATA8: value = crumbs__read_bytes(cursor, 8); break;
  case CRUMBS__PE_SLEB128: value = (uint64_t)crumbs__read_sleb(cursor); break;
  case CRUMBS__PE_SDATA2: value = (uint64_t)(int64_t)(int16_t)crumbs__read_bytes(cursor, 2); break;
  case CRUMBS__PE_SDATA4: value = (uint64_t)(int64_t)(int32_t)crumbs__read_bytes(cursor, 4); break;
  case CRUMBS__PE_SDATA8: value = crumbs__read_bytes(cursor, 8); break;
  default: cursor->failed = true; return 0;
  }
  switch (encoding & 0x70) {
  case 0x00: break;
  case CRUMBS__PE_PCREL: value += field; break;
  case CRUMBS__PE_DATAREL: value += data_base; break;
  default: cursor->failed = true; return 0; // textrel, funcrel, aligned: never in .eh_frame
  }
  return value;
}

/// The size a fixed-size encoding takes, 0 for a variable or unknown one.
static unsigned crumbs__encoded_size(uint8_t encoding) {
  switch (encoding & 0x0f) {
  case CRUMBS__PE_ABSPTR:
  case CRUMBS__PE_UDATA8:
  case CRUMBS__PE_SDATA8: return 8;
  case CRUMBS__PE_UDATA4:
  case CRUMBS__PE_SDATA4: return 4;
  case CRUMBS__PE_UDATA2:
  case CRUMBS__PE_SDATA2: return 2;
  default: return 0;
  }
}

// MARK: - .eh_frame_hdr

int crumbs__cfi_find_fde(const crumbs__cfi_region *region, uint64_t header, uint64_t pc, uint64_t *fde,
                         uint64_t *function_start, uint64_t *function_end) {
  crumbs__cursor cursor;
  if (header < region->low || !crumbs__cursor_at(&cursor, region, header, region->high)) {
    return CRUMBS_CFI_MALFORMED;
  }
  uint8_t version = (uint8_t)crumbs__read_bytes(&cursor, 1);
  uint8_t frame_encoding = (uint8_t)crumbs__read_bytes(&cursor, 1);
  uint8_t count_encoding = (uint8_t)crumbs__read_bytes(&cursor, 1);
  uint8_t table_encoding = (uint8_t)crumbs__read_bytes(&cursor, 1);
  if (cursor.failed || version != 1) return CRUMBS_CFI_MALFORMED;
  (void)crumbs__read_encoded(&cursor, frame_encoding, header); // eh_frame_ptr: not needed
  uint64_t count = crumbs__read_encoded(&cursor, count_encoding, header);
  if (cursor.failed) return CRUMBS_CFI_MALFORMED;
  // The table is searchable only in a fixed-size encoding; linkers write datarel|sdata4.
  unsigned entry = crumbs__encoded_size(table_encoding);
  if (count_encoding == CRUMBS__PE_OMIT || table_encoding == CRUMBS__PE_OMIT || entry == 0 ||
      (table_encoding & 0x70) == CRUMBS__PE_PCREL) {
    return CRUMBS_CFI_UNSUPPORTED;
  }
  uint64_t table = cursor.position;
  if (count == 0) return CRUMBS_CFI_NO_FDE;
  if (count > (region->high - table) / (2u * entry)) return CRUMBS_CFI_MALFORMED;

  // The last entry whose initial location is <= pc.
  uint64_t low = 0, high = count; // candidates [low, high)
  while (high - low > 1) {
    uint64_t middle = low + (high - low) / 2;
    crumbs__cursor probe;
    crumbs__cursor_at(&probe, region, table + middle * 2u * entry, region->high);
    uint64_t location = crumbs__read_encoded(&probe, table_encoding, header);
    if (probe.failed) return CRUMBS_CFI_MALFORMED;
    if (location <= pc) {
      low = middle;
    } else {
      high = middle;
    }
  }
  crumbs__cursor found;
  crumbs__cursor_at(&found, region, table + low * 2u * entry, region->high);
  uint64_t location = crumbs__read_encoded(&found, table_encoding, header);
  uint64_t address = crumbs__read_encoded(&found, table_encoding, header);
  if (found.failed) return CRUMBS_CFI_MALFORMED;
  if (location > pc) return CRUMBS_CFI_NO_FDE;
  *fde = address;
  *function_start = location;
  *function_end = location; // the FDE's own range is read by crumbs__cfi_row_at
  return CRUMBS_CFI_OK;
}

// MARK: - CIE and FDE

typedef struct crumbs__cie {
  uint64_t code_alignment;
  int64_t data_alignment;
  uint32_t return_register;
  uint8_t fde_encoding;
  bool has_augmentation_data;
  bool signal_frame;
  uint64_t instructions, end;
} crumbs__cie;

/// Reads an entry's length field; returns false when it is malformed. `*body` is where the
/// CIE id / CIE pointer starts, `*end` the entry's end.
static bool crumbs__read_entry_length(crumbs__cursor *cursor, uint64_t *body, uint64_t *end) {
  uint64_t length = crumbs__read_bytes(cursor, 4);
  if (length == 0xffffffffu) length = crumbs__read_bytes(cursor, 8);
  if (cursor->failed || length == 0) return false; // 0: the terminator, not an entry
  *body = cursor->position;
  if (length > cursor->region->high - *body) return false;
  *end = *body + length;
  cursor->end = *end;
  return true;
}

static int crumbs__parse_cie(const crumbs__cfi_region *region, uint64_t address, uint64_t header,
                             crumbs__cie *cie) {
  crumbs__cursor cursor;
  if (!crumbs__cursor_at(&cursor, region, address, region->high)) return CRUMBS_CFI_MALFORMED;
  uint64_t body = 0, end = 0;
  if (!crumbs__read_entry_length(&cursor, &body, &end)) return CRUMBS_CFI_MALFORMED;
  uint32_t id = (uint32_t)crumbs__read_bytes(&cursor, 4);
  uint8_t version = (uint8_t)crumbs__read_bytes(&cursor, 1);
  if (cursor.failed || id != 0) return CRUMBS_CFI_MALFORMED;
  if (version != 1 && version != 3 && version != 4) return CRUMBS_CFI_UNSUPPORTED;
  char augmentation[8];
  unsigned length = 0;
  while (true) {
    uint8_t byte = (uint8_t)crumbs__read_bytes(&cursor, 1);
    if (cursor.failed) return CRUMBS_CFI_MALFORMED;
    if (byte == 0) break;
    if (length >= sizeof augmentation) return CRUMBS_CFI_UNSUPPORTED;
    augmentation[length++] = (char)byte;
  }
  if (version == 4) { // address size and segment selector size
    uint8_t address_size = (uint8_t)crumbs__read_bytes(&cursor, 1);
    uint8_t segment_size = (uint8_t)crumbs__read_bytes(&cursor, 1);
    if (address_size != 8 || segment_size != 0) return CRUMBS_CFI_UNSUPPORTED;
  }
  cie->code_alignment = crumbs__read_uleb(&cursor);
  cie->data_alignment = crumbs__read_sleb(&cursor);
  cie->return_register = version == 1 ? (uint32_t)crumbs__read_bytes(&cursor, 1)
                                      : (uint32_t)crumbs__read_uleb(&cursor);
  cie->fde_encoding = CRUMBS__PE_ABSPTR;
  cie->has_augmentation_data = false;
  cie->signal_frame = false;
  if (cursor.failed) return CRUMBS_CFI_MALFORMED;
  if (length > 0 && augmentation[0] == 'z') {
    cie->has_augmentation_data = true;
    uint64_t data_length = crumbs__read_uleb(&cursor);
    if (cursor.failed || data_length > end - cursor.position) return CRUMBS_CFI_MALFORMED;
    uint64_t data_end = cursor.position + data_length;
    for (unsigned index = 1; index < length; index++) {
      switch (augmentation[index]) {
      case 'R': cie->fde_encoding = (uint8_t)crumbs__read_bytes(&cursor, 1); break;
      case 'L': (void)crumbs__read_bytes(&cursor, 1); break; // the LSDA's encoding
      case 'P': {
        uint8_t encoding = (uint8_t)crumbs__read_bytes(&cursor, 1);
        (void)crumbs__read_encoded(&cursor, (uint8_t)(encoding & ~CRUMBS__PE_INDIRECT), header);
        break;
      }
      case 'S': cie->signal_frame = true; break;
      case 'B':
      case 'G': break; // aarch64 BTI / MTE markers: no data
      default: return CRUMBS_CFI_UNSUPPORTED;
      }
      if (cursor.failed || cursor.position > data_end) return CRUMBS_CFI_MALFORMED;
    }
    cursor.position = data_end;
  } else if (length > 0) {
    return CRUMBS_CFI_UNSUPPORTED; // "eh" and other pre-'z' augmentations
  }
  if (cie->code_alignment == 0) return CRUMBS_CFI_MALFORMED;
  cie->instructions = cursor.position;
  cie->end = end;
  return CRUMBS_CFI_OK;
}

// MARK: - The CFA program

typedef struct crumbs__cfi_state {
  uint32_t cfa_register;
  int64_t cfa_offset;
  bool cfa_is_expression;
  uint8_t rules[CRUMBS_CFI_REGISTERS];
  int64_t values[CRUMBS_CFI_REGISTERS];
} crumbs__cfi_state;

typedef struct crumbs__cfi_machine {
  crumbs__cfi_state current;
  crumbs__cfi_state initial; // after the CIE's program: what DW_CFA_restore goes back to
  crumbs__cfi_state remembered[CRUMBS__CFI_MAX_REMEMBERED];
  uint32_t remembered_count;
  uint32_t steps;
} crumbs__cfi_machine;

/// operand × data alignment, wrapping (a damaged operand must not be undefined behaviour).
static int64_t crumbs__scaled(uint64_t operand, int64_t alignment) {
  return (int64_t)(operand * (uint64_t)alignment);
}

/// A factored offset operand (× the CIE's data alignment), unsigned or signed.
static int64_t crumbs__factored_uleb(crumbs__cursor *cursor, const crumbs__cie *cie) {
  return crumbs__scaled(crumbs__read_uleb(cursor), cie->data_alignment);
}
static int64_t crumbs__factored_sleb(crumbs__cursor *cursor, const crumbs__cie *cie) {
  return crumbs__scaled((uint64_t)crumbs__read_sleb(cursor), cie->data_alignment);
}

static void crumbs__set_rule(crumbs__cfi_state *state, uint64_t reg, uint8_t rule, int64_t value) {
  if (reg >= CRUMBS_CFI_REGISTERS) return; // vector registers: not needed to find the caller
  state->rules[reg] = rule;
  state->values[reg] = value;
}

/// Runs instructions [start, end) while the location stays <= `pc` (FDE) or all of them (CIE,
/// `pc` = UINT64_MAX). `*location` is the current code address.
static int crumbs__run_program(crumbs__cfi_machine *machine, const crumbs__cfi_region *region,
                               const crumbs__cie *cie, uint64_t start, uint64_t end, uint64_t pc,
                               uint64_t *location, uint64_t header, bool is_cie) {
  crumbs__cursor cursor;
  if (!crumbs__cursor_at(&cursor, region, start, end)) return CRUMBS_CFI_MALFORMED;
  crumbs__cfi_state *state = &machine->current;
  while (cursor.position < cursor.end) {
    if (++machine->steps > CRUMBS__CFI_MAX_STEPS) return CRUMBS_CFI_MALFORMED;
    uint8_t opcode = (uint8_t)crumbs__read_bytes(&cursor, 1);
    uint8_t low = opcode & 0x3f;
    uint64_t advance = 0;
    uint64_t reg = 0;
    switch (opcode & 0xc0) {
    case 0x40: advance = low; break; // DW_CFA_advance_loc
    case 0x80:                       // DW_CFA_offset
      crumbs__set_rule(state, low, CRUMBS_CFI_OFFSET, crumbs__factored_uleb(&cursor, cie));
      break;
    case 0xc0: // DW_CFA_restore
      if (low < CRUMBS_CFI_REGISTERS) {
        state->rules[low] = machine->initial.rules[low];
        state->values[low] = machine->initial.values[low];
      }
      break;
    default:
      switch (opcode) {
      case 0x00: break; // nop
      case 0x01: {      // set_loc
        uint64_t target = crumbs__read_encoded(&cursor, cie->fde_encoding, header);
        if (cursor.failed) return CRUMBS_CFI_MALFORMED;
        if (target > pc) return CRUMBS_CFI_OK;
        *location = target;
        break;
      }
      case 0x02: advance = crumbs__read_bytes(&cursor, 1); break;
      case 0x03: advance = crumbs__read_bytes(&cursor, 2); break;
      case 0x04: advance = crumbs__read_bytes(&cursor, 4); break;
      case 0x05: // offset_extended
        reg = crumbs__read_uleb(&cursor);
        crumbs__set_rule(state, reg, CRUMBS_CFI_OFFSET, crumbs__factored_uleb(&cursor, cie));
        break;
      case 0x06: // restore_extended
        reg = crumbs__read_uleb(&cursor);
        if (reg < CRUMBS_CFI_REGISTERS) {
          state->rules[reg] = machine->initial.rules[reg];
          state->values[reg] = machine->initial.values[reg];
        }
        break;
      case 0x07: crumbs__set_rule(state, crumbs__read_uleb(&cursor), CRUMBS_CFI_UNDEFINED, 0); break;
      case 0x08: crumbs__set_rule(state, crumbs__read_uleb(&cursor), CRUMBS_CFI_SAME, 0); break;
      case 0x09: // register
        reg = crumbs__read_uleb(&cursor);
        crumbs__set_rule(state, reg, CRUMBS_CFI_REGISTER, (int64_t)crumbs__read_uleb(&cursor));
        break;
      case 0x0a: // remember_state
        if (machine->remembered_count >= CRUMBS__CFI_MAX_REMEMBERED) return CRUMBS_CFI_UNSUPPORTED;
        machine->remembered[machine->remembered_count++] = *state;
        break;
      case 0x0b: // restore_state: every rule back, the CFA's too (as libgcc and libunwind do)
        if (machine->remembered_count == 0) return CRUMBS_CFI_MALFORMED;
        *state = machine->remembered[--machine->remembered_count];
        break;
      case 0x0c: // def_cfa
        state->cfa_register = (uint32_t)crumbs__read_uleb(&cursor);
        state->cfa_offset = (int64_t)crumbs__read_uleb(&cursor);
        state->cfa_is_expression = false;
        break;
      case 0x0d: // def_cfa_register
        state->cfa_register = (uint32_t)crumbs__read_uleb(&cursor);
        state->cfa_is_expression = false;
        break;
      case 0x0e: state->cfa_offset = (int64_t)crumbs__read_uleb(&cursor); break; // def_cfa_offset
      case 0x0f: { // def_cfa_expression: skipped, and the CFA is then unknown
        uint64_t length = crumbs__read_uleb(&cursor);
        if (cursor.failed || length > cursor.end - cursor.position) return CRUMBS_CFI_MALFORMED;
        cursor.position += length;
        state->cfa_is_expression = true;
        break;
      }
      case 0x10:   // expression
      case 0x16: { // val_expression
        reg = crumbs__read_uleb(&cursor);
        uint64_t length = crumbs__read_uleb(&cursor);
        if (cursor.failed || length > cursor.end - cursor.position) return CRUMBS_CFI_MALFORMED;
        cursor.position += length;
        crumbs__set_rule(state, reg, CRUMBS_CFI_EXPRESSION, 0);
        break;
      }
      case 0x11: // offset_extended_sf
        reg = crumbs__read_uleb(&cursor);
        crumbs__set_rule(state, reg, CRUMBS_CFI_OFFSET, crumbs__factored_sleb(&cursor, cie));
        break;
      case 0x12: // def_cfa_sf
        state->cfa_register = (uint32_t)crumbs__read_uleb(&cursor);
        state->cfa_offset = crumbs__factored_sleb(&cursor, cie);
        state->cfa_is_expression = false;
        break;
      case 0x13: state->cfa_offset = crumbs__factored_sleb(&cursor, cie); break;
      case 0x14: // val_offset
        reg = crumbs__read_uleb(&cursor);
        crumbs__set_rule(state, reg, CRUMBS_CFI_VAL_OFFSET, crumbs__factored_uleb(&cursor, cie));
        break;
      case 0x15: // val_offset_sf
        reg = crumbs__read_uleb(&cursor);
        crumbs__set_rule(state, reg, CRUMBS_CFI_VAL_OFFSET, crumbs__factored_sleb(&cursor, cie));
        break;
      case 0x2d: break; // GNU_window_save / aarch64 negate_ra_state: no pointer authentication here
      case 0x2e: (void)crumbs__read_uleb(&cursor); break; // GNU_args_size: nothing to unwind
      case 0x2f:                                          // GNU_negative_offset_extended
        reg = crumbs__read_uleb(&cursor);
        crumbs__set_rule(state, reg, CRUMBS_CFI_OFFSET,
                         crumbs__scaled(0u - crumbs__read_uleb(&cursor), cie->data_alignment));
        break;
      default: return CRUMBS_CFI_UNSUPPORTED;
      }
    }
    if (cursor.failed) return CRUMBS_CFI_MALFORMED;
    if (advance != 0) {
      if (is_cie) return CRUMBS_CFI_MALFORMED; // a CIE's program has no locations
      uint64_t next = *location + advance * cie->code_alignment;
      if (next < *location) return CRUMBS_CFI_MALFORMED;
      if (next > pc) return CRUMBS_CFI_OK; // the row in effect at pc is complete
      *location = next;
    }
  }
  return CRUMBS_CFI_OK;
}

int crumbs__cfi_row_at(const crumbs__cfi_region *region, uint64_t header, uint64_t pc, crumbs__cfi_row *row) {
  uint64_t fde = 0, start = 0, end = 0;
  int found = crumbs__cfi_find_fde(region, header, pc, &fde, &start, &end);
  if (found != CRUMBS_CFI_OK) return found;

  crumbs__cursor cursor;
  if (!crumbs__cursor_at(&cursor, region, fde, region->high)) return CRUMBS_CFI_MALFORMED;
  uint64_t body = 0, fde_end = 0;
  if (!crumbs__read_entry_length(&cursor, &body, &fde_end)) return CRUMBS_CFI_MALFORMED;
  uint32_t cie_pointer = (uint32_t)crumbs__read_bytes(&cursor, 4);
  if (cursor.failed || cie_pointer == 0 || cie_pointer > body) return CRUMBS_CFI_MALFORMED;
  crumbs__cie cie;
  int parsed = crumbs__parse_cie(region, body - cie_pointer, header, &cie);
  if (parsed != CRUMBS_CFI_OK) return parsed;
  uint64_t function_start = crumbs__read_encoded(&cursor, cie.fde_encoding, header);
  uint64_t function_length = crumbs__read_encoded(&cursor, (uint8_t)(cie.fde_encoding & 0x0f), header);
  if (cursor.failed) return CRUMBS_CFI_MALFORMED;
  // The table said this FDE starts at `start`; a disagreement means a damaged table or FDE.
  if (function_start != start) return CRUMBS_CFI_MALFORMED;
  if (function_length > UINT64_MAX - function_start) return CRUMBS_CFI_MALFORMED;
  if (pc >= function_start + function_length) return CRUMBS_CFI_NO_FDE;
  if (cie.has_augmentation_data) {
    uint64_t length = crumbs__read_uleb(&cursor);
    if (cursor.failed || length > fde_end - cursor.position) return CRUMBS_CFI_MALFORMED;
    cursor.position += length; // the LSDA pointer: not needed to unwind
  }

  crumbs__cfi_machine machine;
  machine.remembered_count = 0;
  machine.steps = 0;
  machine.current.cfa_register = 0;
  machine.current.cfa_offset = 0;
  machine.current.cfa_is_expression = false;
  for (unsigned index = 0; index < CRUMBS_CFI_REGISTERS; index++) {
    machine.current.rules[index] = CRUMBS_CFI_SAME;
    machine.current.values[index] = 0;
  }
  uint64_t location = function_start;
  int ran = crumbs__run_program(&machine, region, &cie, cie.instructions, cie.end, UINT64_MAX, &location,
                                header, true);
  if (ran != CRUMBS_CFI_OK) return ran;
  machine.initial = machine.current;
  machine.remembered_count = 0;
  location = function_start;
  ran = crumbs__run_program(&machine, region, &cie, cursor.position, fde_end, pc, &location, header, false);
  if (ran != CRUMBS_CFI_OK) return ran;

  row->function_start = function_start;
  row->function_end = function_start + function_length;
  row->return_register = cie.return_register;
  row->cfa_register = machine.current.cfa_register;
  row->cfa_offset = machine.current.cfa_offset;
  row->cfa_is_expression = machine.current.cfa_is_expression;
  row->signal_frame = cie.signal_frame;
  for (unsigned index = 0; index < CRUMBS_CFI_REGISTERS; index++) {
    row->rules[index] = machine.current.rules[index];
    row->values[index] = machine.current.values[index];
  }
  return CRUMBS_CFI_OK;
}
