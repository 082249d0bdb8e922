// crumbs_crash_handler.c — the fatal-signal handler: record, breadcrumb, chain, die honestly.
//
// Why C: the handler runs after the process state may be corrupt, on an alternate signal stack,
// possibly while the interrupted thread held the malloc lock or the Swift runtime's locks; C
// lets us write code that provably calls nothing but async-signal-safe functions.
//
// ASYNC-SIGNAL-SAFE: crumbs__crash_signal_handler and everything it calls, and
// crumbs__crash_first_append (the ring's first-append hook). No malloc, no locks, no stdio.
// libc calls from signal context:
//   clock_gettime (vDSO), sysinfo, prctl(PR_GET_NAME), syscall(SYS_gettid), getpid, tgkill via
//   syscall(SYS_tgkill), sigaction, sigaltstack, sigemptyset/sigaddset/sigprocmask, nanosleep,
//   _exit, open/read/close (crumbs_unwind.c, /proc/self/maps), sched_getcpu (ring append),
//   mprotect (the first-append hook, guard page of a pool stack).
// Each is resolved at install (crumbs__resolve_handler_calls calls them once), so no lazy PLT
// binding (loader lock) can happen in the handler; nothing here can load a library the way
// glibc's backtrace() loads libgcc_s. The Swift test `CrashCaptureTests` proves "no allocation"
// with an LD_PRELOAD malloc interposer that exits the child if the handler ever allocates.
// Set-up only (not signal-safe): format, install, prepare_thread, refresh, uninstall (mmap,
// pthread_getattr_np, dl_iterate_phdr).
//
// Handler, in order:
//   1. Re-entry on this thread (the handler itself crashed, or a chained handler re-raised):
//      finish a minimal record marked PARTIAL if it was not complete, then die by the ORIGINAL
//      signal with SIG_DFL (no loop: nothing of ours runs again).
//   2. First crash wins (atomic compare-exchange on the winning tid). A second crashing thread
//      counts itself in the record, waits up to wait_for_first_crash_ms for the winner to end
//      the process, then dies by its own signal. Never a hang.
//   3. Record: state WRITING, signal/code/address/sender, thread id and name, registers,
//      backtrace, time, memory, uptime; fatal breadcrumb into the ring; ring state CRASHED;
//      handler duration; complete marker last (release store).
//   4. Chain to the previous action: SA_SIGINFO and plain handlers are called; SIG_IGN and
//      SIG_DFL are not (a fault cannot be ignored).
//   5. Die: SIG_DFL, then re-raise explicitly (tgkill) unless the kernel re-delivers on return
//      (a SIGSEGV/SIGBUS/SIGILL/SIGFPE raised by a faulting instruction re-faults). abort()'s
//      second raise then meets SIG_DFL: exactly one record.
//
// Signals are installed with SA_SIGINFO | SA_ONSTACK | SA_NODEFER. SA_NODEFER because the Swift
// runtime backtracer (which we chain to) expects it: without it its output is cut and its
// `swift-backtrace` helper can be orphaned (TOOLCHAIN-NOTES); it also lets a fault inside the
// handler reach step 1 instead of killing the process without a record.

#define _GNU_SOURCE
#include "crumbs_crash_handler.h"
#include "crumbs_ring.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

// Defined in crumbs_ring.c: called once per thread on its first append. Signal context possible.
extern void (*crumbs__first_append_hook)(void);

#define CRUMBS__MAX_SIGNAL 64
#define CRUMBS__MAX_POOL 1024u
#define CRUMBS__DEFAULT_ALTSTACK (64u * 1024u)

// MARK: - Installed state (written at install by one thread, read by the handler)

static crumbs_crash_record *volatile crumbs__record;
static const crumbs_ring *volatile crumbs__ring;
static uint64_t crumbs__installed_mask;
static struct sigaction crumbs__previous[CRUMBS__MAX_SIGNAL];
static uint32_t crumbs__wait_ms = 3000;
static uint32_t crumbs__test_fault;
static int crumbs__installed;

// First crash wins: tid of the thread writing the record, 0 when none.
static uint32_t crumbs__winner_tid;

// Per-thread: depth inside our handler (re-entry detection), original signal, and stack bounds
// registered outside the handler (pthread_getattr_np).
typedef struct crumbs__crash_thread {
  uint32_t depth;
  int original_signal;
  uint64_t stack_low;
  uint64_t stack_high;
} crumbs__crash_thread;
static __thread crumbs__crash_thread crumbs__this_thread __attribute__((tls_model("initial-exec")));

// Alternate stack pool: one mapping, each stack with a PROT_NONE guard page below it.
static unsigned char *crumbs__pool;
static uint32_t crumbs__pool_count;
static uint32_t crumbs__stack_size;
static uint32_t crumbs__pool_owner[CRUMBS__MAX_POOL]; // tid, 0 = free
static int crumbs__pool_enabled;

// The install thread's alternate stack before ours, restored by uninstall.
static stack_t crumbs__previous_altstack;
static unsigned char *crumbs__install_altstack;
static uint32_t crumbs__install_altstack_tid;

// MARK: - Small signal-safe helpers

static uint64_t crumbs__clock_ns(clockid_t clock) {
  struct timespec now;
  clock_gettime(clock, &now);
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static uint32_t crumbs__gettid(void) { return (uint32_t)syscall(SYS_gettid); }

static void crumbs__copy(char *destination, size_t capacity, const char *source) {
  size_t index = 0;
  for (; index + 1 < capacity && source[index] != '\0'; index++) destination[index] = source[index];
  destination[index] = '\0';
}

/// Appends `text` at `*length` in `buffer` (capacity bytes, kept NUL-terminated).
static void crumbs__append(char *buffer, size_t capacity, size_t *length, const char *text) {
  while (*text != '\0' && *length + 1 < capacity) buffer[(*length)++] = *text++;
  buffer[*length] = '\0';
}

static void crumbs__append_hex(char *buffer, size_t capacity, size_t *length, uint64_t value) {
  char digits[19] = "0x";
  int count = 0;
  char reversed[16];
  do {
    reversed[count++] = "0123456789abcdef"[value & 15u];
    value >>= 4;
  } while (value != 0);
  int index = 2;
  while (count > 0) digits[index++] = reversed[--count];
  digits[index] = '\0';
  crumbs__append(buffer, capacity, length, digits);
}

static void crumbs__append_decimal(char *buffer, size_t capacity, size_t *length, int64_t value) {
  char reversed[21];
  int count = 0;
  uint64_t magnitude = value < 0 ? (uint64_t)(-(value + 1)) + 1 : (uint64_t)value;
  do {
    reversed[count++] = (char)('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude != 0);
  char digits[22];
  int index = 0;
  if (value < 0) digits[index++] = '-';
  while (count > 0) digits[index++] = reversed[--count];
  digits[index] = '\0';
  crumbs__append(buffer, capacity, length, digits);
}

static void crumbs__raise_on_this_thread(int signal_number) {
  syscall(SYS_tgkill, getpid(), (pid_t)crumbs__gettid(), signal_number);
}

static void crumbs__set_default(int signal_number) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(signal_number, &action, NULL);
}

static void crumbs__unblock(int signal_number) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal_number);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
}

/// Dies by `signal_number`: default action, unblocked, raised on this thread. If that somehow
/// returns (the signal is ignored at a level we cannot change), exit with the shell's code.
static void crumbs__die_now(int signal_number) {
  crumbs__set_default(signal_number);
  crumbs__unblock(signal_number);
  crumbs__raise_on_this_thread(signal_number);
  _exit(128 + signal_number);
}

// MARK: - Names

const char *crumbs_crash_signal_name(int signal_number) {
  switch (signal_number) {
  case SIGSEGV: return "SIGSEGV";
  case SIGBUS: return "SIGBUS";
  case SIGILL: return "SIGILL";
  case SIGFPE: return "SIGFPE";
  case SIGABRT: return "SIGABRT";
  case SIGTRAP: return "SIGTRAP";
  case SIGSYS: return "SIGSYS";
  case SIGQUIT: return "SIGQUIT";
  case SIGTERM: return "SIGTERM";
  case SIGINT: return "SIGINT";
  case SIGUSR1: return "SIGUSR1";
  case SIGUSR2: return "SIGUSR2";
  default: return "";
  }
}

const char *crumbs_crash_code_name(int signal_number, int code) {
  switch (code) {
  case SI_USER: return "SI_USER";
  case SI_KERNEL: return "SI_KERNEL";
  case SI_QUEUE: return "SI_QUEUE";
  case SI_TIMER: return "SI_TIMER";
  case SI_MESGQ: return "SI_MESGQ";
  case SI_ASYNCIO: return "SI_ASYNCIO";
  case SI_SIGIO: return "SI_SIGIO";
  case SI_TKILL: return "SI_TKILL";
  default: break;
  }
  switch (signal_number) {
  case SIGSEGV:
    switch (code) {
    case SEGV_MAPERR: return "SEGV_MAPERR";
    case SEGV_ACCERR: return "SEGV_ACCERR";
    case 3: return "SEGV_BNDERR";
    case 4: return "SEGV_PKUERR";
    default: return "";
    }
  case SIGBUS:
    switch (code) {
    case BUS_ADRALN: return "BUS_ADRALN";
    case BUS_ADRERR: return "BUS_ADRERR";
    case BUS_OBJERR: return "BUS_OBJERR";
    case 4: return "BUS_MCEERR_AR";
    case 5: return "BUS_MCEERR_AO";
    default: return "";
    }
  case SIGILL:
    switch (code) {
    case ILL_ILLOPC: return "ILL_ILLOPC";
    case ILL_ILLOPN: return "ILL_ILLOPN";
    case ILL_ILLADR: return "ILL_ILLADR";
    case ILL_ILLTRP: return "ILL_ILLTRP";
    case ILL_PRVOPC: return "ILL_PRVOPC";
    case ILL_PRVREG: return "ILL_PRVREG";
    case ILL_COPROC: return "ILL_COPROC";
    case ILL_BADSTK: return "ILL_BADSTK";
    default: return "";
    }
  case SIGFPE:
    switch (code) {
    case FPE_INTDIV: return "FPE_INTDIV";
    case FPE_INTOVF: return "FPE_INTOVF";
    case FPE_FLTDIV: return "FPE_FLTDIV";
    case FPE_FLTOVF: return "FPE_FLTOVF";
    case FPE_FLTUND: return "FPE_FLTUND";
    case FPE_FLTRES: return "FPE_FLTRES";
    case FPE_FLTINV: return "FPE_FLTINV";
    case FPE_FLTSUB: return "FPE_FLTSUB";
    default: return "";
    }
  case SIGTRAP:
    switch (code) {
    case TRAP_BRKPT: return "TRAP_BRKPT";
    case TRAP_TRACE: return "TRAP_TRACE";
    default: return "";
    }
  case SIGSYS:
    return code == 1 ? "SYS_SECCOMP" : "";
  default:
    return "";
  }
}

// MARK: - Registers

typedef struct crumbs__context_registers {
  uint64_t pc, fp, sp, leaf_return;
} crumbs__context_registers;

static crumbs__context_registers crumbs__copy_registers(crumbs_crash_record *record,
                                                        const ucontext_t *context) {
  crumbs__context_registers result = {0, 0, 0, 0};
#if defined(__x86_64__)
  record->arch = CRUMBS_CRASH_ARCH_X86_64;
  uint32_t count = NGREG < CRUMBS_CRASH_MAX_REGISTERS ? NGREG : CRUMBS_CRASH_MAX_REGISTERS;
  for (uint32_t index = 0; index < count; index++) {
    record->registers[index] = (uint64_t)context->uc_mcontext.gregs[index];
  }
  record->register_count = count;
  result.pc = (uint64_t)context->uc_mcontext.gregs[REG_RIP];
  result.fp = (uint64_t)context->uc_mcontext.gregs[REG_RBP];
  result.sp = (uint64_t)context->uc_mcontext.gregs[REG_RSP];
  // After a `call` to a bad address (or a fault in a frameless leaf's first instruction), the
  // caller's return address is the word at [sp]; only readable once the stack range is known,
  // so the caller fills `leaf_return` later.
#elif defined(__aarch64__)
  record->arch = CRUMBS_CRASH_ARCH_AARCH64;
  for (uint32_t index = 0; index < 31; index++) {
    record->registers[index] = (uint64_t)context->uc_mcontext.regs[index];
  }
  record->registers[31] = (uint64_t)context->uc_mcontext.sp;
  record->registers[32] = (uint64_t)context->uc_mcontext.pc;
  record->registers[33] = (uint64_t)context->uc_mcontext.pstate;
  record->registers[34] = (uint64_t)context->uc_mcontext.fault_address;
  record->register_count = 35;
  result.pc = (uint64_t)context->uc_mcontext.pc;
  result.fp = (uint64_t)context->uc_mcontext.regs[29];
  result.sp = (uint64_t)context->uc_mcontext.sp;
  result.leaf_return = (uint64_t)context->uc_mcontext.regs[30]; // LR
#else
  (void)context;
  record->arch = 0;
  record->register_count = 0;
#endif
  return result;
}

// MARK: - The record

static void crumbs__record_signal(crumbs_crash_record *record, int signal_number,
                                  const siginfo_t *info) {
  record->signal_number = signal_number;
  record->signal_code = info != NULL ? info->si_code : 0;
  record->signal_errno = info != NULL ? info->si_errno : 0;
  crumbs__copy(record->signal_name, sizeof record->signal_name,
               crumbs_crash_signal_name(signal_number));
  crumbs__copy(record->code_name, sizeof record->code_name,
               crumbs_crash_code_name(signal_number, record->signal_code));
  if (info == NULL) return;
  int code = info->si_code;
  if (code == SI_USER || code == SI_QUEUE || code == SI_TKILL) {
    record->sender_pid = info->si_pid;
    record->sender_uid = info->si_uid;
    __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_HAS_SENDER, __ATOMIC_RELAXED);
  } else if (code > 0 && (signal_number == SIGSEGV || signal_number == SIGBUS ||
                          signal_number == SIGILL || signal_number == SIGFPE ||
                          signal_number == SIGTRAP)) {
    record->fault_address = (uint64_t)(uintptr_t)info->si_addr;
  }
}

static void crumbs__record_backtrace(crumbs_crash_record *record,
                                     crumbs__context_registers registers) {
  uint64_t low = 0, high = 0;
  crumbs__crash_thread *thread = &crumbs__this_thread;
  // After a stack overflow the SP can point into the guard gap below the stack (the prologue
  // moved it there, the first store faulted); the frame pointer still points into the stack.
  // So the stack is the range holding the SP, or failing that the one holding the FP.
  uint64_t probes[2] = {registers.sp, registers.fp};
  record->stack_source = CRUMBS_STACK_UNKNOWN;
  for (int index = 0; index < 2 && record->stack_source == CRUMBS_STACK_UNKNOWN; index++) {
    uint64_t probe = probes[index];
    if (probe == 0) continue;
    if (thread->stack_high != 0 && probe >= thread->stack_low && probe < thread->stack_high) {
      low = thread->stack_low;
      high = thread->stack_high;
      record->stack_source = CRUMBS_STACK_REGISTERED;
    } else if (crumbs__crash_mapping_containing(probe, &low, &high)) {
      record->stack_source = CRUMBS_STACK_PROC_MAPS;
    }
  }
  record->stack_low = low;
  record->stack_high = high;

#if defined(__x86_64__)
  if (record->stack_source != CRUMBS_STACK_UNKNOWN && registers.sp >= low &&
      registers.sp + 8 <= high && (registers.sp & 7u) == 0) {
    registers.leaf_return = *(const volatile uint64_t *)(uintptr_t)registers.sp;
  }
#endif
  record->leaf_return_candidate = registers.leaf_return;

  uint32_t generation = (uint32_t)__atomic_load_n(&record->module_generation, __ATOMIC_ACQUIRE);
  if (generation & 1u) __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_MODULES_TORN, __ATOMIC_RELAXED);

  // The PC outside every module means control went to a bad address (a call through a garbage
  // pointer); the frame-pointer chain then skips the caller, whose return address is at [sp]
  // (x86_64) or in LR (aarch64). Put it second, flagged. Inside a module we trust the chain: a
  // random code address on the stack would otherwise look like a frame.
  uint64_t frames_before_walk[2];
  uint32_t prefix = 0;
  frames_before_walk[prefix++] = registers.pc;
  if (crumbs__crash_module_for_text(record, registers.pc) < 0 && registers.leaf_return != 0 &&
      crumbs__crash_module_for_text(record, registers.leaf_return) >= 0) {
    frames_before_walk[prefix++] = registers.leaf_return;
    __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_LEAF_FRAME_INSERTED, __ATOMIC_RELAXED);
  } else if (registers.leaf_return != 0 && crumbs__crash_is_return_address(record, registers.leaf_return) &&
             registers.fp >= low && registers.fp + 16 <= high && (registers.fp & 7u) == 0 &&
             ((const volatile uint64_t *)(uintptr_t)registers.fp)[1] != registers.leaf_return) {
    // A fault inside a function that keeps no frame (glibc's memcpy, strlen, syscall…): the frame
    // pointer still names its caller's caller, and the caller itself is only at [sp]. Take
    // [sp] when it is a real return address (right after a call instruction, in a module's
    // text) that the chain would not give anyway. Flagged.
    frames_before_walk[prefix++] = registers.leaf_return;
    __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_LEAF_FRAME_INSERTED, __ATOMIC_RELAXED);
  }
  uint32_t stop = CRUMBS_BACKTRACE_NO_STACK_BOUNDS;
  uint32_t walked;
  if (prefix == 2) {
    record->frames[0] = frames_before_walk[0];
    walked = 1 + crumbs__crash_walk_frames(frames_before_walk[1], registers.fp, registers.sp, low,
                                           high, &record->frames[1],
                                           CRUMBS_CRASH_MAX_FRAMES - 1, &stop);
  } else {
    walked = crumbs__crash_walk_frames(registers.pc, registers.fp, registers.sp, low, high,
                                       record->frames, CRUMBS_CRASH_MAX_FRAMES, &stop);
  }
  // Fewer than 3 frames: the fault sat in code without frame pointers (glibc's raise/abort,
  // other C libraries). Recover the callers by scanning the stack, flagged as such.
  if (walked < 3 && stop != CRUMBS_BACKTRACE_FULL && stop != CRUMBS_BACKTRACE_NO_STACK_BOUNDS &&
      registers.sp >= low && registers.sp < high) {
    uint32_t scanned = crumbs__crash_scan_frames(record, registers.sp, high, record->frames, walked,
                                                 CRUMBS_CRASH_MAX_FRAMES, &stop);
    if (scanned > walked) {
      __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_STACK_SCANNED, __ATOMIC_RELAXED);
      walked = scanned;
    }
  }
  record->frame_count = walked;
  record->backtrace_stop = stop;

  for (uint32_t index = 0; index < walked; index++) {
    // Return addresses point after the call: look up address - 1 so a call at a module's very
    // end still maps to it.
    uint64_t address = index == 0 ? record->frames[index] : record->frames[index] - 1;
    if (crumbs__crash_module_for_text(record, address) < 0) {
      __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_MODULES_STALE, __ATOMIC_RELAXED);
      break;
    }
  }
}

/// The final breadcrumb: "SIGSEGV SEGV_MAPERR at 0x0 (pc 0x…) on thread 1234 name".
static void crumbs__append_fatal_breadcrumb(const crumbs_crash_record *record) {
  const crumbs_ring *ring = crumbs__ring;
  if (ring == NULL) return;
  static char message[160];
  static char signal_text[24], code_text[40], address_text[24], pc_text[24], thread_text[24];
  size_t length = 0;
  message[0] = '\0';
  crumbs__append(message, sizeof message, &length,
                 record->signal_name[0] != '\0' ? record->signal_name : "signal");
  if (record->signal_name[0] == '\0') {
    crumbs__append_decimal(message, sizeof message, &length, record->signal_number);
  }
  if (record->code_name[0] != '\0') {
    crumbs__append(message, sizeof message, &length, " ");
    crumbs__append(message, sizeof message, &length, record->code_name);
  }
  if (record->flags & CRUMBS_CRASH_FLAG_HAS_SENDER) {
    crumbs__append(message, sizeof message, &length, " from pid ");
    crumbs__append_decimal(message, sizeof message, &length, record->sender_pid);
  } else {
    crumbs__append(message, sizeof message, &length, " at ");
    crumbs__append_hex(message, sizeof message, &length, record->fault_address);
  }
  crumbs__append(message, sizeof message, &length, " on thread ");
  crumbs__append_decimal(message, sizeof message, &length, record->thread_id);
  if (record->thread_name[0] != '\0') {
    crumbs__append(message, sizeof message, &length, " ");
    crumbs__append(message, sizeof message, &length, record->thread_name);
  }

  length = 0;
  signal_text[0] = '\0';
  crumbs__append_decimal(signal_text, sizeof signal_text, &length, record->signal_number);
  length = 0;
  code_text[0] = '\0';
  crumbs__append_decimal(code_text, sizeof code_text, &length, record->signal_code);
  length = 0;
  address_text[0] = '\0';
  crumbs__append_hex(address_text, sizeof address_text, &length, record->fault_address);
  length = 0;
  pc_text[0] = '\0';
  crumbs__append_hex(pc_text, sizeof pc_text, &length,
                     record->frame_count > 0 ? record->frames[0] : 0);
  length = 0;
  thread_text[0] = '\0';
  crumbs__append_decimal(thread_text, sizeof thread_text, &length, record->thread_id);
  const crumbs_attribute attributes[] = {
      {"signal", signal_text}, {"code", code_text}, {"address", address_text},
      {"pc", pc_text},         {"thread", thread_text},
  };
  crumbs_ring_add(ring, CRUMBS_LEVEL_FATAL, CRUMBS_TYPE_SYSTEM, CRUMBS_SLOT_FROM_SIGNAL_HANDLER,
                  message, attributes, sizeof attributes / sizeof attributes[0]);
  crumbs_ring_set_state(ring, CRUMBS_RING_CRASHED);
}

static void crumbs__finish_record(crumbs_crash_record *record, uint64_t started_ns) {
  record->handler_duration_ns = crumbs__clock_ns(CLOCK_MONOTONIC) - started_ns;
  __atomic_store_n(&record->state, CRUMBS_CRASH_COMPLETE, __ATOMIC_RELEASE);
  __atomic_store_n(&record->complete_marker, CRUMBS_CRASH_COMPLETE_MARKER, __ATOMIC_RELEASE);
}

static void crumbs__write_record(crumbs_crash_record *record, int signal_number, siginfo_t *info,
                                 void *context, uint32_t thread_id, uint64_t started_ns) {
  record->crash_monotonic_ns = started_ns;
  record->crash_wall_ns = crumbs__clock_ns(CLOCK_REALTIME);
  uint64_t boottime = crumbs__clock_ns(CLOCK_BOOTTIME);
  record->process_uptime_ns = record->process_start_boottime_ns != 0 &&
                                      boottime > record->process_start_boottime_ns
                                  ? boottime - record->process_start_boottime_ns
                                  : 0;
  record->thread_id = thread_id;
  crumbs__record_signal(record, signal_number, info);
  __atomic_store_n(&record->state, CRUMBS_CRASH_WRITING, __ATOMIC_RELEASE);

  if (crumbs__test_fault) {
    // Tests only (see crumbs_crash_config.test_fault_inside_handler).
    *(volatile int *)(uintptr_t)8 = 1;
  }

  prctl(PR_GET_NAME, (unsigned long)record->thread_name, 0, 0, 0);
  record->thread_name[sizeof record->thread_name - 1] = '\0';

  stack_t current;
  if (sigaltstack(NULL, &current) == 0 && (current.ss_flags & SS_ONSTACK)) {
    __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_ON_ALTERNATE_STACK, __ATOMIC_RELAXED);
  }

  crumbs__context_registers registers = {0, 0, 0, 0};
  if (context != NULL) registers = crumbs__copy_registers(record, (const ucontext_t *)context);
  crumbs__record_backtrace(record, registers);

  struct sysinfo memory;
  if (sysinfo(&memory) == 0) {
    record->free_memory_bytes = (uint64_t)memory.freeram * memory.mem_unit;
    record->total_memory_bytes = (uint64_t)memory.totalram * memory.mem_unit;
  }

  crumbs__append_fatal_breadcrumb(record);
  crumbs__finish_record(record, started_ns);
}

// MARK: - The handler

/// Calls the action that was installed before ours. Returns false for SIG_DFL / SIG_IGN.
static bool crumbs__chain(int signal_number, siginfo_t *info, void *context) {
  if (signal_number <= 0 || signal_number >= CRUMBS__MAX_SIGNAL) return false;
  const struct sigaction *previous = &crumbs__previous[signal_number];
  if (previous->sa_flags & SA_SIGINFO) {
    if (previous->sa_sigaction == NULL) return false;
    previous->sa_sigaction(signal_number, info, context);
    return true;
  }
  if (previous->sa_handler == SIG_DFL || previous->sa_handler == SIG_IGN) return false;
  previous->sa_handler(signal_number);
  return true;
}

/// Whether returning from the handler makes the kernel deliver the signal again by itself: a
/// fault raised by the instruction at the PC re-executes it. Anything sent (kill, tgkill,
/// abort's raise) or trap-like (int3 / brk continue past the instruction) must be re-raised.
static bool crumbs__redelivered_on_return(int signal_number, const siginfo_t *info) {
  if (info == NULL || info->si_code <= 0) return false;
  return signal_number == SIGSEGV || signal_number == SIGBUS || signal_number == SIGILL ||
         signal_number == SIGFPE;
}

static void crumbs__nested_crash(int signal_number, siginfo_t *info) {
  crumbs__crash_thread *thread = &crumbs__this_thread;
  int original = thread->original_signal;
  crumbs_crash_record *record = crumbs__record;
  if (record != NULL &&
      __atomic_load_n(&record->complete_marker, __ATOMIC_ACQUIRE) != CRUMBS_CRASH_COMPLETE_MARKER) {
    // The handler itself crashed before finishing: keep what was written, say so.
    record->nested_signal_number = signal_number;
    record->nested_signal_code = info != NULL ? info->si_code : 0;
    record->nested_fault_address = info != NULL ? (uint64_t)(uintptr_t)info->si_addr : 0;
    __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_PARTIAL, __ATOMIC_RELAXED);
    crumbs__finish_record(record, record->crash_monotonic_ns);
  }
  // Whatever happened, nothing of ours runs again: default actions, then the original signal.
  crumbs__set_default(signal_number);
  crumbs__die_now(original != 0 ? original : signal_number);
}

static void crumbs__crash_signal_handler(int signal_number, siginfo_t *info, void *context) {
  int saved_errno = errno;
  crumbs__crash_thread *thread = &crumbs__this_thread;
  if (thread->depth > 0) {
    crumbs__nested_crash(signal_number, info); // does not return
    return;
  }
  thread->depth = 1;
  thread->original_signal = signal_number;
  uint64_t started_ns = crumbs__clock_ns(CLOCK_MONOTONIC);
  uint32_t thread_id = crumbs__gettid();
  crumbs_crash_record *record = crumbs__record;

  uint32_t expected = 0;
  if (!__atomic_compare_exchange_n(&crumbs__winner_tid, &expected, thread_id, false,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    // Another thread is recording. Count ourselves, wait for it to end the process, then die by
    // our own signal if it did not (it hung, or its chained handler returned without dying).
    if (record != NULL) {
      __atomic_fetch_add(&record->threads_crashed, 1, __ATOMIC_RELAXED);
      __atomic_fetch_or(&record->flags, CRUMBS_CRASH_FLAG_CONCURRENT_CRASH, __ATOMIC_RELAXED);
    }
    struct timespec millisecond = {0, 1000000};
    for (uint32_t waited = 0; waited < crumbs__wait_ms; waited++) nanosleep(&millisecond, NULL);
    crumbs__die_now(signal_number);
    return;
  }

  if (record != NULL) {
    __atomic_fetch_add(&record->threads_crashed, 1, __ATOMIC_RELAXED);
    crumbs__write_record(record, signal_number, info, context, thread_id, started_ns);
  }

  crumbs__chain(signal_number, info, context);

  crumbs__set_default(signal_number);
  if (!crumbs__redelivered_on_return(signal_number, info)) {
    crumbs__unblock(signal_number);
    crumbs__raise_on_this_thread(signal_number);
  }
  // Returning: a fault re-executes and meets SIG_DFL; a raised signal is delivered at the latest
  // when the kernel restores the interrupted mask.
  thread->depth = 0;
  errno = saved_errno;
}

// MARK: - Alternate stacks

/// Stack `index` of the pool, its guard page made PROT_NONE on the way out. The guard is set
/// when a stack is handed out rather than for all stacks at install: 64 mprotect calls were
/// most of the install time. mprotect is a plain system call (no libc state, no lock), safe here.
static unsigned char *crumbs__pool_stack(uint32_t index) {
  unsigned char *guard = crumbs__pool + (size_t)index * (crumbs__stack_size + 4096u);
  mprotect(guard, 4096u, PROT_NONE);
  return guard + 4096u;
}

/// Takes a free stack from the pool for `thread_id`, reclaiming those of exited threads.
/// Async-signal-safe (atomics, tgkill).
static unsigned char *crumbs__take_pool_stack(uint32_t thread_id) {
  for (uint32_t index = 0; index < crumbs__pool_count; index++) {
    uint32_t expected = 0;
    if (__atomic_load_n(&crumbs__pool_owner[index], __ATOMIC_RELAXED) == 0 &&
        __atomic_compare_exchange_n(&crumbs__pool_owner[index], &expected, thread_id, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
      return crumbs__pool_stack(index);
    }
  }
  // Pool exhausted: an owner that no longer exists (ESRCH) has no use for its stack. A reused
  // tid keeps its slot: a leak, never a stack shared by two live threads.
  pid_t pid = getpid();
  for (uint32_t index = 0; index < crumbs__pool_count; index++) {
    uint32_t owner = __atomic_load_n(&crumbs__pool_owner[index], __ATOMIC_RELAXED);
    if (owner == 0 || owner == thread_id) continue;
    if (syscall(SYS_tgkill, pid, (pid_t)owner, 0) == -1 && errno == ESRCH &&
        __atomic_compare_exchange_n(&crumbs__pool_owner[index], &owner, thread_id, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
      return crumbs__pool_stack(index);
    }
  }
  return NULL;
}

/// Gives the calling thread one of our alternate stacks unless it has one at least as large.
/// Async-signal-safe (sigaltstack, atomics). Preserves errno.
static bool crumbs__give_altstack(void) {
  if (!__atomic_load_n(&crumbs__pool_enabled, __ATOMIC_ACQUIRE)) return false;
  int saved_errno = errno;
  stack_t current;
  bool has_one = false;
  if (sigaltstack(NULL, &current) == 0) {
    has_one = !(current.ss_flags & SS_DISABLE) && current.ss_size >= crumbs__stack_size;
    if (current.ss_flags & SS_ONSTACK) has_one = true; // cannot change it while running on it
  }
  if (!has_one) {
    unsigned char *stack = crumbs__take_pool_stack(crumbs__gettid());
    if (stack != NULL) {
      stack_t ours = {.ss_sp = stack, .ss_flags = 0, .ss_size = crumbs__stack_size};
      has_one = sigaltstack(&ours, NULL) == 0;
    }
  }
  errno = saved_errno;
  return has_one;
}

/// The ring's first-append hook. Runs once per thread, possibly in a signal handler.
static void crumbs__crash_first_append(void) { (void)crumbs__give_altstack(); }

static void crumbs__register_stack_bounds(void) {
  pthread_attr_t attributes;
  if (pthread_getattr_np(pthread_self(), &attributes) != 0) return;
  void *address = NULL;
  size_t size = 0;
  if (pthread_attr_getstack(&attributes, &address, &size) == 0 && address != NULL) {
    crumbs__this_thread.stack_low = (uint64_t)(uintptr_t)address;
    crumbs__this_thread.stack_high = (uint64_t)(uintptr_t)address + size;
  }
  pthread_attr_destroy(&attributes);
}

bool crumbs_crash_prepare_thread(void) {
  crumbs__register_stack_bounds();
  return crumbs__give_altstack();
}

// MARK: - Install, check, uninstall

void crumbs_crash_record_format(crumbs_crash_record *record, uint32_t pid,
                                const uint8_t session_id[16], const uint8_t boot_id[16],
                                uint64_t process_start_boottime_ns) {
  record->version = CRUMBS_CRASH_RECORD_VERSION;
  record->header_size = CRUMBS_CRASH_HEADER_SIZE;
  record->total_size = sizeof(crumbs_crash_record);
  record->pid = pid;
#if defined(__x86_64__)
  record->arch = CRUMBS_CRASH_ARCH_X86_64;
#elif defined(__aarch64__)
  record->arch = CRUMBS_CRASH_ARCH_AARCH64;
#endif
  memcpy(record->session_id, session_id, 16);
  memcpy(record->boot_id, boot_id, 16);
  record->install_wall_ns = crumbs__clock_ns(CLOCK_REALTIME);
  record->process_start_boottime_ns = process_start_boottime_ns;
  record->state = CRUMBS_CRASH_ARMED;
  // The magic goes last: a record whose formatting was interrupted is not a record.
  __atomic_store_n(&record->magic, CRUMBS_CRASH_RECORD_MAGIC, __ATOMIC_RELEASE);
}

/// Calls once every libc function the handler uses, so each PLT slot is bound now and not by
/// the dynamic loader (which takes a lock) at crash time.
static void crumbs__resolve_handler_calls(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  clock_gettime(CLOCK_BOOTTIME, &now);
  struct sysinfo memory;
  sysinfo(&memory);
  char name[16];
  prctl(PR_GET_NAME, (unsigned long)name, 0, 0, 0);
  (void)crumbs__gettid();
  syscall(SYS_tgkill, getpid(), (pid_t)crumbs__gettid(), 0);
  struct sigaction action;
  sigaction(SIGSEGV, NULL, &action);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGSEGV);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  stack_t stack;
  sigaltstack(NULL, &stack);
  struct timespec zero = {0, 0};
  nanosleep(&zero, NULL);
  (void)sched_getcpu();
  mprotect(crumbs__pool, 4096u, PROT_NONE); // already so: binds mprotect for the hook
  uint64_t low, high;
  (void)crumbs__crash_mapping_containing((uint64_t)(uintptr_t)&now, &low, &high);
  // _exit is bound by being referenced; it is never called here.
}

static bool crumbs__is_ours(const struct sigaction *action) {
  return (action->sa_flags & SA_SIGINFO) && action->sa_sigaction == crumbs__crash_signal_handler;
}

int crumbs_crash_install(const crumbs_crash_config *config) {
  if (config->record == NULL || config->record->magic != CRUMBS_CRASH_RECORD_MAGIC) {
    return CRUMBS_CRASH_INSTALL_BAD_RECORD;
  }
  uint64_t mask = config->signal_mask;
  if (mask == 0 || (mask & ((1ull << SIGKILL) | (1ull << SIGSTOP) | 1ull))) {
    return CRUMBS_CRASH_INSTALL_BAD_SIGNALS;
  }

  // Alternate stacks, once.
  if (crumbs__pool == NULL) {
    uint32_t size = config->altstack_size != 0 ? config->altstack_size : CRUMBS__DEFAULT_ALTSTACK;
    size = (size + 4095u) & ~4095u;
    uint32_t count = config->altstack_pool_count != 0 ? config->altstack_pool_count : 64;
    if (count > CRUMBS__MAX_POOL) count = CRUMBS__MAX_POOL;
    size_t total = (size_t)(count + 1) * (size + 4096u); // +1: the install thread's stack
    void *pool = mmap(NULL, total, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (pool == MAP_FAILED) return CRUMBS_CRASH_INSTALL_ALTSTACK_FAILED;
    crumbs__stack_size = size;
    crumbs__pool = (unsigned char *)pool;
    crumbs__pool_count = count;
    crumbs__install_altstack = crumbs__pool_stack(count); // the extra one, with its guard
  }

  crumbs__wait_ms = config->wait_for_first_crash_ms != 0 ? config->wait_for_first_crash_ms : 3000;
  crumbs__test_fault = config->test_fault_inside_handler;
  // The pointer itself, never a copy a later install would overwrite under a running handler.
  __atomic_store_n(&crumbs__ring, config->ring, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__record, config->record, __ATOMIC_RELEASE);

  // Modules: a full scan for a new record, else only if dlopen/dlclose happened.
  crumbs__crash_scan_modules(config->record, NULL);

  // The install thread: our alternate stack unless it has a large enough one; its bounds.
  crumbs__register_stack_bounds();
  stack_t current;
  if (sigaltstack(NULL, &current) == 0 && !(current.ss_flags & SS_ONSTACK) &&
      ((current.ss_flags & SS_DISABLE) || current.ss_size < crumbs__stack_size) &&
      crumbs__install_altstack_tid == 0) {
    stack_t ours = {.ss_sp = crumbs__install_altstack, .ss_flags = 0,
                    .ss_size = crumbs__stack_size};
    if (sigaltstack(&ours, NULL) == 0) {
      crumbs__previous_altstack = current;
      crumbs__install_altstack_tid = crumbs__gettid();
    }
  }

  crumbs__resolve_handler_calls();

  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crumbs__crash_signal_handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  for (int signal_number = 1; signal_number < CRUMBS__MAX_SIGNAL; signal_number++) {
    if (!(mask & (1ull << signal_number))) continue;
    struct sigaction current_action;
    if (sigaction(signal_number, NULL, &current_action) != 0) {
      return CRUMBS_CRASH_INSTALL_SIGACTION_FAILED;
    }
    if (crumbs__is_ours(&current_action)) continue;
    // The first time: keep the previous action to chain to. A re-assert after another library
    // replaced us keeps the original one: that library probably chains to us, and chaining
    // back to it would loop.
    if (!(crumbs__installed_mask & (1ull << signal_number))) {
      crumbs__previous[signal_number] = current_action;
    }
    if (sigaction(signal_number, &action, NULL) != 0) return CRUMBS_CRASH_INSTALL_SIGACTION_FAILED;
    crumbs__installed_mask |= 1ull << signal_number;
  }
  // Signals dropped from the mask by a re-install go back to what they were.
  for (int signal_number = 1; signal_number < CRUMBS__MAX_SIGNAL; signal_number++) {
    if ((crumbs__installed_mask & (1ull << signal_number)) && !(mask & (1ull << signal_number))) {
      struct sigaction current_action;
      if (sigaction(signal_number, NULL, &current_action) == 0 && crumbs__is_ours(&current_action)) {
        sigaction(signal_number, &crumbs__previous[signal_number], NULL);
      }
      crumbs__installed_mask &= ~(1ull << signal_number);
    }
  }

  __atomic_store_n(&crumbs__first_append_hook, crumbs__crash_first_append, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__pool_enabled, 1, __ATOMIC_RELEASE);
  crumbs__installed = 1;
  return CRUMBS_CRASH_INSTALL_OK;
}

bool crumbs_crash_is_installed(void) { return crumbs__installed != 0; }

uint64_t crumbs_crash_replaced_signals(void) {
  uint64_t replaced = 0;
  for (int signal_number = 1; signal_number < CRUMBS__MAX_SIGNAL; signal_number++) {
    if (!(crumbs__installed_mask & (1ull << signal_number))) continue;
    struct sigaction current;
    if (sigaction(signal_number, NULL, &current) == 0 && !crumbs__is_ours(&current)) {
      replaced |= 1ull << signal_number;
    }
  }
  return replaced;
}

uint32_t crumbs_crash_refresh_modules(bool force) {
  crumbs_crash_record *record = crumbs__record;
  if (record == NULL) return 0;
  if (!force && (uint32_t)crumbs__crash_module_changes() == record->module_adds) {
    return record->module_count;
  }
  return crumbs__crash_scan_modules(record, NULL);
}

void crumbs_crash_uninstall(void) {
  if (!crumbs__installed) return;
  __atomic_store_n(&crumbs__first_append_hook, NULL, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__pool_enabled, 0, __ATOMIC_RELEASE);
  for (int signal_number = 1; signal_number < CRUMBS__MAX_SIGNAL; signal_number++) {
    if (!(crumbs__installed_mask & (1ull << signal_number))) continue;
    struct sigaction current;
    // A library that replaced us keeps its handler: taking it away would break it.
    if (sigaction(signal_number, NULL, &current) == 0 && crumbs__is_ours(&current)) {
      sigaction(signal_number, &crumbs__previous[signal_number], NULL);
    }
  }
  crumbs__installed_mask = 0;
  if (crumbs__install_altstack_tid != 0 && crumbs__install_altstack_tid == crumbs__gettid()) {
    stack_t current;
    if (sigaltstack(NULL, &current) == 0 && current.ss_sp == crumbs__install_altstack &&
        !(current.ss_flags & SS_ONSTACK)) {
      sigaltstack(&crumbs__previous_altstack, NULL);
    }
    crumbs__install_altstack_tid = 0;
  }
  __atomic_store_n(&crumbs__ring, NULL, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__record, NULL, __ATOMIC_RELEASE);
  crumbs__installed = 0;
}
