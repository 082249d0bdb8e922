// Why C: libFuzzer's driver entry point is a C symbol that exists only in -sanitize=fuzzer builds;
// declaring it weak lets the same Swift executable link (and say so) in a normal build.
#include <stddef.h>
#include <stdint.h>
typedef int (*crumbs_fuzz_callback)(const uint8_t *data, size_t size);
/// Runs libFuzzer with `callback` when linked into a fuzzer build; returns -1 otherwise.
int crumbs_fuzz_run(int *argc, char ***argv, crumbs_fuzz_callback callback);
