// Why C: see include/fuzz_driver.h.
#include "fuzz_driver.h"

extern int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size))
    __attribute__((weak));

// libclang_rt.fuzzer's own main (FuzzerMain.o) references this symbol. lld never pulls that
// object in (SwiftPM defines `main` with --defsym), but gold and bfd do and then fail with an
// undefined reference (gold only says "internal error in format_file_lineno"). Defining it here,
// weak, satisfies them; our main still runs, and the driver is given the real callback.
__attribute__((weak)) int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)data;
  (void)size;
  return 0;
}

int crumbs_fuzz_run(int *argc, char ***argv, crumbs_fuzz_callback callback) {
  if (LLVMFuzzerRunDriver == 0) return -1;
  return LLVMFuzzerRunDriver(argc, argv, callback);
}
