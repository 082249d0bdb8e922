// crumbs_crash_testing.h — test-only entry points into the crash handler. Nothing in the
// product calls them; they exist so tests can reach paths a healthy process never takes.
#ifndef CRUMBS_CRASH_TESTING_H
#define CRUMBS_CRASH_TESTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Tests only: from now on the handler faults (SIGSEGV) right after it starts the record, to
/// exercise the crash-inside-the-handler path (a PARTIAL record, death by the original signal).
/// Call before the crash, from an ordinary thread. Not signal-safe to call; affects the handler.
void crumbs_crash_testing_fault_inside_handler(bool enabled);

/// Tests only: the thread capture sends its signal to every thread, even one whose blocked
/// mask says it cannot answer, so that thread makes the handler wait for the deadline (the
/// path of a thread that is not scheduled in time). Call before the crash.
void crumbs_crash_testing_ask_blocked_threads(bool enabled);

/// Tests only: how long the thread capture waits for the asked threads (0: the product's 50
/// ms). A test that checks every thread answered gives a loaded machine seconds to schedule
/// them, so only a thread that cannot answer costs the wait. Call before the crash.
void crumbs_crash_testing_capture_deadline_ms(uint32_t milliseconds);

/// Tests only: the next live capture (crumbs_live_capture.h) faults (SIGSEGV) while the first
/// thread it parked is still parked, before it releases it: the crash handler, on the capturing
/// thread, then takes the capture over. Call before the capture, from an ordinary thread.
void crumbs_crash_testing_fault_inside_live_capture(bool enabled);

/// Tests only: the next live capture, once the first thread it asked is parked, writes one byte
/// to `fd` and waits (at most 10 s) until a crash has started (the installed record is no longer
/// ARMED), then goes on: a crash on another thread meets the capture while it holds the threads.
/// -1 turns it off. Call before the capture, from an ordinary thread.
void crumbs_crash_testing_live_capture_meets_crash(int fd);

/// Tests only: with crumbs_crash_testing_fault_inside_live_capture, one thread the next live
/// capture asks with the capture signal stops inside the capture handler just short of its
/// answer; the capture faults once it has stopped, and the crash that takes the capture over
/// lets it answer right after it has released the capture's parked threads (each wait at most
/// 10 s): the answer that comes late, after the take-over, which a loaded machine produces by
/// chance. Call before the capture, from an ordinary thread.
void crumbs_crash_testing_late_answer_to_live_capture(bool enabled);

/// Tests only: the first thread the next live capture asks with SIGPROF (one that blocks the
/// capture signal, as Dispatch's workers do), once released, stops on its way out of the
/// capture handler, after it has counted itself out, until a crash's capture has asked every
/// thread (at most 10 s): a thread not yet out of the handler when the crash asks it, which a
/// loaded machine produces by chance. Call before the capture, from an ordinary thread.
void crumbs_crash_testing_slow_leaver_of_live_capture(bool enabled);

/// Tests only: with crumbs_crash_testing_fault_inside_live_capture, the first thread the next
/// live capture asks with SIGPROF (one that blocks the capture signal, as Dispatch's workers
/// do) holds that request back at the handler's door, as if the signal were delivered late;
/// the capture faults once it has, and the crash that takes the capture over lets it in once
/// the crash has waited for the handler's leavers. Its request is stale then (its slot was
/// closed): the thread stops on its way out, inside the handler (the kernel blocking SIGPROF,
/// so its status shows both request signals blocked), until the crash has asked every thread.
/// Each wait at most 10 s: what a loaded machine produces by chance. Call before the capture,
/// from an ordinary thread.
void crumbs_crash_testing_stale_request_to_live_capture(bool enabled);

/// Tests only: live captures signal the threads blocked in a system call too, as running ones,
/// instead of walking them where they block: the hooks above need threads that park. Call
/// before the capture, from an ordinary thread.
void crumbs_crash_testing_live_capture_signals_blocked(bool enabled);

/// Tests only: the next crash, once it holds the thread capture and has listed the threads,
/// writes one byte to `fd` (for a thread waiting to uninstall the crash handler) and waits (at
/// most 10 s) until that uninstall has dealt with the capture's signals, then asks the threads:
/// an uninstall that meets a crash. -1 turns it off. Call from an ordinary thread.
void crumbs_crash_testing_uninstall_meets_crash(int fd);

/// Tests only: the guard page below alternate stack `index` (0 ... pool count) of the pool the
/// crash handler reserved, NULL before it is reserved. A store there must fault.
void *crumbs_crash_testing_altstack_guard(unsigned index);

/// What the crash handler's CFI parser made of one pc (crumbs_cfi_testing_row).
typedef struct crumbs_cfi_testing_result {
  int32_t status;           // 0 ok, 1 no FDE covers the pc, 2 malformed, 3 unsupported
  uint32_t return_register; // the CIE's return address column
  uint32_t cfa_register;    // CFA = cfa_register + cfa_offset (unless cfa_is_expression)
  uint8_t return_rule;      // 0 same, 1 undefined, 2 offset, 3 val_offset, 4 register, 5 expression
  uint8_t signal_frame;
  uint8_t cfa_is_expression;
  uint8_t reserved;
  int64_t cfa_offset;
  int64_t return_value; // the return address rule's operand
  uint64_t function_start, function_end;
} crumbs_cfi_testing_result;

/// Fuzzing and tests only: runs the crash handler's .eh_frame_hdr / .eh_frame parser
/// (crumbs_cfi.c) over `bytes`, taken as `size` bytes loaded at address `base` that hold a
/// .eh_frame_hdr at address `header` and the .eh_frame it indexes, for the instruction at `pc`.
/// Never reads outside `bytes`. Safe to call from anywhere (pure).
void crumbs_cfi_testing_row(const uint8_t *bytes, size_t size, uint64_t base, uint64_t header, uint64_t pc,
                            crumbs_cfi_testing_result *result);

// MARK: - The termination line's pieces (crumbs_termination_testing.c)

/// The handler's redaction of `text` (`length` bytes) with the rules set now, into `out`
/// (`capacity` bytes, not NUL-terminated); returns the bytes written. Pure but for the rules.
size_t crumbs_termination_message_testing_redact(const char *text, size_t length, char *out, size_t capacity);

/// The crash handler's symbol lookup (crumbs_elf_symbol.c) over `size` bytes of an ELF file in
/// memory: the name of the function symbol holding file address `address` into `name`
/// (`capacity` bytes, NUL-terminated), its start into `*start`. Returns 1 found, 0 not found,
/// -1 when the bytes hold no usable symbol table. Never reads outside `bytes`. Pure.
int32_t crumbs_elf_symbol_testing_lookup(const uint8_t *bytes, size_t size, uint64_t address, char *name,
                                         size_t capacity, uint64_t *start);

/// The same lookup in the file at `path`, read with pread as the handler reads the executable.
/// Returns as crumbs_elf_symbol_testing_lookup, -2 when the file cannot be opened.
int32_t crumbs_elf_symbol_testing_lookup_file(const char *path, uint64_t address, char *name, size_t capacity,
                                              uint64_t *start);

/// The readable name of a Swift mangled name ("$s5MyApp6ParserC5parseyyF" → "MyApp.Parser.parse")
/// into `buffer`; returns its length, 0 when the name is not one it reads. Pure.
size_t crumbs_swift_name_testing_simplify(const char *mangled, char *buffer, size_t capacity);

/// Whether the handler skips `name` as Crumbs' own code. Pure.
bool crumbs_symbol_testing_is_crumbs(const char *name);

#ifdef __cplusplus
}
#endif

#endif
