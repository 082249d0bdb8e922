// Why C: see include/fuzz_driver.h.
#include "fuzz_driver.h"

extern int LLVMFuzzerRunDriver(int *argc, char ***argv,
                               int (*callback)(const uint8_t *data, size_t size))
    __attribute__((weak));

int crumbs_fuzz_run(int *argc, char ***argv, crumbs_fuzz_callback callback) {
  if (LLVMFuzzerRunDriver == 0) return -1;
  return LLVMFuzzerRunDriver(argc, argv, callback);
}
