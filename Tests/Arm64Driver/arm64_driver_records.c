// arm64_driver_records.c — functions with frame records and no call frame information: this file
// is compiled with -fno-asynchronous-unwind-tables -fno-unwind-tables (Scripts/check-arm64.sh),
// so the unwinder finds their callers from x29/x30 frame records alone, and a leaf's from LR, as
// in code built without unwind tables (arm64_driver.c says how the driver runs).
#define _GNU_SOURCE
#include "arm64_driver.h"

#include <stdio.h>
#include <string.h>

extern volatile int driver_sink;

/// A leaf without CFI: the caller is only in LR (inserted, CRUMBS_FRAME_INSERTED).
__attribute__((noinline)) void driver_records_leaf(volatile int *pointer) { *pointer = 7; }

/// Frame records, their saved return addresses signed.
__attribute__((noinline)) void driver_records_inner(volatile int *pointer) {
  driver_records_leaf(pointer);
  driver_sink++;
}

__attribute__((noinline)) void driver_records_outer(volatile int *pointer) {
  driver_records_inner(pointer);
  driver_sink++;
}
