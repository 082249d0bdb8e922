// crumbs_thread_waits.c — what the other threads were blocked in when the process crashed, kept
// in the crash record (crumbs_crash_wait_table) for the next launch to explain: each thread's
// /proc/self/task/<tid>/syscall line, read just before the crash asks it (asked, it would show
// the capture's own wait), and in a futex call the 16 bytes at the futex address; then the words
// the crashing thread's registers point at, for the lock a trapped lock call was asking for
// (docs/crash-capture.md#waits-at-crash-time). Nothing is parsed into owners here: the next
// launch reads them with the live capture's rules (ThreadWaits, ThreadWaits+Crash.swift).
//
// Entry points, in call order: crumbs__thread_wait_note (per thread, before its ask),
// crumbs__thread_wait_candidates (once the thread table is written).
//
// ASYNC-SIGNAL-SAFE: everything here. No malloc, no locks; the record's own bytes. libc calls:
// open, read, close (crumbs_proc_threads.c), syscall(SYS_process_vm_readv, SYS_gettid)
// (crumbs__unwind_read_anywhere: memory is read only through the kernel, never by a plain load
// of an address another thread's call named), clock_gettime (crumbs_context.c).

#define _GNU_SOURCE
#include "kit/crumbs_context.h"
#include "threads/crumbs_threads.h"
#include "unwind/crumbs_unwind.h"

#include <string.h>
#include <sys/syscall.h>

/// A PI futex word's owner bits (linux/futex.h FUTEX_TID_MASK).
#define CRUMBS__FUTEX_TID_MASK 0x3fffffffu

/// Reads 16 bytes at `address` into `words` (4 when the rest lies on an unreadable page): the
/// bytes read.
static uint32_t crumbs__read_lock_words(uint64_t address, uint32_t words[4]) {
  if (address == 0 || (address & 3u) != 0 || address > UINT64_MAX - 16) return 0;
  if (crumbs__unwind_read_anywhere(address, words, 16)) return 16;
  return crumbs__unwind_read_anywhere(address, words, 4) ? 4 : 0;
}

void crumbs__thread_wait_note(crumbs_crash_record *record, uint32_t tid) {
  crumbs_crash_wait_table *table = &record->waits;
  if (tid == 0 || table->count >= CRUMBS_CRASH_MAX_THREADS) return;
  uint64_t started = crumbs__context_clock_ns(CLOCK_MONOTONIC);
  crumbs_crash_thread_wait *wait = &table->waits[table->count];
  memset(wait, 0, sizeof *wait);
  wait->tid = tid;
  size_t length = crumbs__proc_thread_syscall_text(tid, wait->text, sizeof wait->text);
  if (length > 0) {
    wait->text_length = (uint32_t)length;
    wait->flags |= CRUMBS_WAIT_TEXT_READ;
    crumbs__blocked_syscall call;
    if (crumbs__proc_syscall_parse(wait->text, length, &call) && call.number == SYS_futex) {
      wait->flags |= CRUMBS_WAIT_FUTEX;
      wait->lock_address = call.arguments[0];
      wait->words_read = crumbs__read_lock_words(call.arguments[0], wait->lock_words);
    }
  }
  table->count++;
  table->read_ns += crumbs__context_clock_ns(CLOCK_MONOTONIC) - started;
}

/// Whether `tid` is a thread of `threads` other than the crashing one (entry 0).
static bool crumbs__listed_other(const crumbs_crash_thread_table *threads, uint32_t tid) {
  for (uint32_t index = 1; index < threads->thread_count && index < CRUMBS_CRASH_MAX_THREADS; index++) {
    if (threads->threads[index].tid == tid) return true;
  }
  return false;
}

void crumbs__thread_wait_candidates(crumbs_crash_record *record) {
  crumbs_crash_wait_table *table = &record->waits;
  uint64_t started = crumbs__context_clock_ns(CLOCK_MONOTONIC);
  uint32_t count = record->register_count < CRUMBS_CRASH_MAX_REGISTERS ? record->register_count
                                                                       : CRUMBS_CRASH_MAX_REGISTERS;
  for (uint32_t index = 0; index < count && table->candidate_count < CRUMBS_CRASH_MAX_LOCK_CANDIDATES;
       index++) {
    uint64_t address = record->registers[index];
    // Below the first page nothing is mapped; a small or odd value is a count, not a lock.
    if (address < 4096u || (address & 3u) != 0) continue;
    uint32_t word = 0;
    if (!crumbs__unwind_read_anywhere(address, &word, sizeof word)) continue;
    uint32_t owner = word & CRUMBS__FUTEX_TID_MASK;
    if (owner == 0 || !crumbs__listed_other(&record->threads, owner)) continue;
    crumbs_crash_lock_candidate *candidate = &table->candidates[table->candidate_count++];
    candidate->address = address;
    candidate->word = word;
    candidate->register_index = index;
  }
  table->read_ns += crumbs__context_clock_ns(CLOCK_MONOTONIC) - started;
}
