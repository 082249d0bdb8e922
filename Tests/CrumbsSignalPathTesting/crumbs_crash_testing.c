// crumbs_crash_testing.c — the tests' entry points (crumbs_crash_testing.h): switches that arm
// the hook table (crumbs_thread_capture_testing.c), and pure pieces of the signal path fed a
// buffer. Test-only. Not signal-safe: called by tests from ordinary threads; libc calls: none.
#include "crumbs_crash_testing.h"
#include "crumbs_crash_testing_hooks.h"
#include "process/crumbs_altstack.h"
#include "threads/crumbs_thread_capture.h"
#include "unwind/crumbs_cfi.h"

/// Turns switch `word` of the table on or off, arming the table first.
static void crumbs__testing_switch(uint32_t *word, bool enabled) {
  crumbs__testing_arm();
  __atomic_store_n(word, enabled ? 1u : 0u, __ATOMIC_RELEASE);
}

void crumbs_crash_testing_fault_inside_handler(bool enabled) {
  crumbs__testing_switch(&crumbs__testing_hooks.fault_inside_handler, enabled);
}

void crumbs_crash_testing_ask_blocked_threads(bool enabled) {
  crumbs__testing_switch(&crumbs__testing_hooks.ask_blocked_threads, enabled);
}

void crumbs_crash_testing_live_capture_signals_blocked(bool enabled) {
  crumbs__testing_switch(&crumbs__testing_hooks.signal_blocked, enabled);
}

void crumbs_crash_testing_capture_deadline_ms(uint32_t milliseconds) {
  uint64_t deadline_ns = (uint64_t)milliseconds * 1000000u;
  __atomic_store_n(&crumbs__capture.deadline_ns, deadline_ns != 0 ? deadline_ns : CRUMBS__CAPTURE_DEADLINE_NS,
                   __ATOMIC_RELAXED);
}

void *crumbs_crash_testing_altstack_guard(unsigned index) { return crumbs__altstack_guard_at(index); }

void crumbs_crash_testing_fault_inside_live_capture(bool enabled) {
  crumbs__thread_capture_testing_live(enabled ? 1 : 0, -2);
}

void crumbs_crash_testing_live_capture_meets_crash(int fd) { crumbs__thread_capture_testing_live(-1, fd); }

void crumbs_crash_testing_late_answer_to_live_capture(bool enabled) {
  crumbs__thread_capture_testing_late_answer(enabled);
}

void crumbs_crash_testing_slow_leaver_of_live_capture(bool enabled) {
  crumbs__thread_capture_testing_slow_leaver(enabled);
}

void crumbs_crash_testing_stale_request_to_live_capture(bool enabled) {
  crumbs__thread_capture_testing_stale_request(enabled);
}

void crumbs_crash_testing_uninstall_meets_crash(int fd) {
  crumbs__thread_capture_testing_uninstall_meets_crash(fd);
}

void crumbs_cfi_testing_row(const uint8_t *bytes, size_t size, uint64_t base, uint64_t header, uint64_t pc,
                            crumbs_cfi_testing_result *result) {
  crumbs_cfi_testing_result empty = {0};
  *result = empty;
  if (bytes == NULL || size == 0 || base > UINT64_MAX - size) {
    result->status = CRUMBS_CFI_MALFORMED;
    return;
  }
  crumbs__cfi_region region = {.low = base, .high = base + size, .bytes = bytes};
  crumbs__cfi_row row;
  result->status = crumbs__cfi_row_at(&region, header, pc, &row);
  if (result->status != CRUMBS_CFI_OK) return;
  result->return_register = row.return_register;
  result->cfa_register = row.cfa_register;
  result->cfa_offset = row.cfa_offset;
  result->cfa_is_expression = row.cfa_is_expression;
  result->signal_frame = row.signal_frame;
  result->function_start = row.function_start;
  result->function_end = row.function_end;
  if (row.return_register < CRUMBS_CFI_REGISTERS) {
    result->return_rule = row.rules[row.return_register];
    result->return_value = row.values[row.return_register];
  }
}
