// arm64_driver.h — what the aarch64 driver's files share (arm64_driver.c says what it is).
#ifndef ARM64_DRIVER_H
#define ARM64_DRIVER_H

#include "crumbs_crash_handler.h"
#include "crumbs_crash_record.h"
#include "crumbs_crash_testing.h"
#include "crumbs_ring.h"

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// The record's aarch64 registers (crumbs_crash_arch): x0…x30, sp, pc, pstate, fault_address, esr.
#define DRIVER_REGISTERS 36u
#define DRIVER_SP 31u
#define DRIVER_PC 32u
#define DRIVER_FAULT_ADDRESS 34u
#define DRIVER_ESR 35u
/// driver_check_record: any fault address.
#define DRIVER_ANY_ADDRESS UINT64_MAX

/// A case's child files: the installed ring and the mapped record.
typedef struct driver_case_files {
  const crumbs_ring *ring;
  crumbs_crash_record *record;
} driver_case_files;

extern const char *driver_directory;

driver_case_files driver_install(const char *name);
const crumbs_crash_record *driver_read_record(const char *file_name);
void driver_report(const char *name, bool passed, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
const char *driver_symbol(uint64_t address);
bool driver_in_libc(uint64_t address);
int driver_run_child(const char *name, void (*body)(const char *name));
/// A page shared by the driver and every child it forks (set up before the first case).
extern volatile uint64_t *driver_shared;
bool driver_died_by(int status, int signal_number, char *why, size_t capacity);
bool driver_check_record(const crumbs_crash_record *record, int signal_number, uint64_t fault_address,
                         char *why, size_t capacity);
void driver_describe_record(const crumbs_crash_record *record, char *text, size_t capacity);

// The cases (arm64_driver_crashes.c, arm64_driver_process.c).
void driver_case_ring(const char *name);
void driver_case_segv_null(const char *name);
void driver_case_segv_wild(const char *name);
void driver_case_bad_call(const char *name);
void driver_case_sigbus(const char *name);
void driver_case_sigill(const char *name);
void driver_case_sigtrap(const char *name);
void driver_case_sigabrt(const char *name);
void driver_case_divide(const char *name);
void driver_case_esr_record(const char *name);
void driver_case_unwind(const char *name);
void driver_case_frame_records(const char *name);
void driver_case_signal_handler(const char *name);
void driver_case_stack_overflow(const char *name);
void driver_case_threads(const char *name);
void driver_case_live_capture(const char *name);
void driver_live(const char *name);
void driver_case_fork(const char *name);
void driver_case_page_size(const char *name);

#endif // ARM64_DRIVER_H
