// crumbs_crash_install.c — installing the crash handler: record format, install (and re-assert),
// modules refresh, replaced-signal check, thread preparation, uninstall.
// Design: docs/crash-capture.md#installing-the-crash-handler
//
// Entry points, in call order (declared in crumbs_crash_handler.h): crumbs_crash_record_format,
// crumbs_crash_install, crumbs_crash_guard_alternate_stacks, crumbs_crash_prepare_thread,
// crumbs_crash_refresh_modules, crumbs_crash_replaced_signals, crumbs_crash_uninstall.
//
// NOT SIGNAL-SAFE: everything here is set-up code for ordinary threads, serialized by the Swift
// wrapper (CrashHandler), except crumbs_crash_record_format (memcpy, clock_gettime: the fork
// handler formats a forked child's record with it, crumbs_fork.c). libc calls: mmap, mprotect,
// sigaltstack, sigaction, pthread_self, pthread_getattr_np (allocates; not on the main thread),
// pthread_attr_getstack, pthread_attr_destroy, getauxval, getrlimit, dl_iterate_phdr and readlink
// (crumbs_modules.c), dlsym (the Swift runtime's fatal-message buffer, the concurrency runtime's
// swift_job_run), dladdr (which module a chained handler is in: a recognised runtime's, or one
// the app declared), strrchr/strncmp/strchr/strlen (its name), std::set_terminate
// (crumbs_terminate.cpp), and once each the calls the handler makes.

#define _GNU_SOURCE
#include "process/crumbs_altstack.h"
#include "crash/crumbs_crash.h"
#include "threads/crumbs_threads.h"
#include "unwind/crumbs_unwind.h"
#include "kit/crumbs_format.h"
#include "crash/crumbs_terminate.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#if defined(__GLIBC__)
// The stack pointer at process start (glibc, ld.so): above every frame of the main thread.
extern void *__libc_stack_end;
#endif

// Whether install succeeded (set-up state: one thread at a time). The signals we took are
// crumbs__crash_installed.installed_mask.
static int crumbs__installed;

void crumbs_crash_record_format(crumbs_crash_record *record, uint32_t pid, const uint8_t session_id[16],
                                const uint8_t boot_id[16], uint64_t process_start_boottime_ns) {
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
  record->install_wall_ns = crumbs__context_clock_ns(CLOCK_REALTIME);
  record->process_start_boottime_ns = process_start_boottime_ns;
  record->state = CRUMBS_CRASH_ARMED;
  // The magic goes last: a record whose formatting was interrupted is not a record.
  __atomic_store_n(&record->magic, CRUMBS_CRASH_RECORD_MAGIC, __ATOMIC_RELEASE);
}

/// Calls once every libc function the handler uses, so each PLT slot is bound now and not by
/// the dynamic loader (which takes a lock) at crash time.
static void crumbs__resolve_handler_calls(void) {
  (void)crumbs__context_clock_ns(CLOCK_MONOTONIC);
  (void)crumbs__context_clock_ns(CLOCK_BOOTTIME);
  struct sysinfo memory;
  sysinfo(&memory);
  char name[16];
  prctl(PR_GET_NAME, (unsigned long)name, 0, 0, 0);
  pid_t thread_id = (pid_t)syscall(SYS_gettid);
  syscall(SYS_tgkill, getpid(), thread_id, 0);
  struct sigaction action;
  sigaction(SIGSEGV, NULL, &action);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGSEGV);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  stack_t stack;
  sigaltstack(NULL, &stack);
  // An invalid duration: bound, and refused at once (a zero one would yield the CPU, and on a
  // busy machine keep the caller of install off it for a whole time slice).
  struct timespec invalid = {0, -1};
  nanosleep(&invalid, NULL);
  (void)sched_getcpu();
  crumbs__altstack_resolve_calls();
  // open, read and close, which the handler uses on /proc/self/maps: bound on /dev/null, as
  // generating /proc/self/maps costs a few hundred microseconds in a process with many modules.
  int descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (descriptor >= 0) {
    char byte;
    (void)read(descriptor, &byte, 1);
    close(descriptor);
  }
  // _exit is bound by being referenced; it is never called here.
}

/// The Swift runtime's fatal-error message buffer, or NULL when no Swift runtime is loaded.
/// swift_getFatalErrorMessageBuffer returns the address of a `std::atomic<const char *>` that the
/// runtime sets before it traps (libswiftCore exports it on Linux); the address never changes,
/// so the handler keeps it and only loads the pointer at crash time.
static const char *const *crumbs__swift_fatal_message_buffer(void) {
  void *symbol = dlsym(RTLD_DEFAULT, "swift_getFatalErrorMessageBuffer");
  if (symbol == NULL) return NULL;
  const char *const *(*get_buffer)(void);
  memcpy(&get_buffer, &symbol, sizeof get_buffer);
  return get_buffer();
}

/// Beginnings of the base names of modules whose fault handlers are known to fix their own
/// faults and return, or to give up by putting back the action they saved (which the first
/// chance sees): HotSpot and OpenJ9 (libjvm.so), .NET (libcoreclr.so), Mono (libmono-2.0.so,
/// libmonosgen-2.0.so), the wasm engines wasmtime, Wasmer, WasmEdge and WAMR (libiwasm), and
/// libsigsegv. A runtime linked into the executable itself is not told apart: the app declares
/// it (crumbs_crash_config.first_chance_handlers or first_chance_modules).
static const char *const crumbs__recovering_runtimes[] = {
    "libjvm.so", "libcoreclr.so", "libmono",  "libwasmtime",
    "libwasmer", "libwasmedge",   "libiwasm", "libsigsegv",
};

/// Whether `name` begins with the `length` bytes at `prefix` (length > 0).
static bool crumbs__begins_with(const char *name, const char *prefix, size_t length) {
  return length > 0 && strncmp(name, prefix, length) == 0;
}

/// Whether `action`'s handler is known to fix a fault and return, so the handler gives it the
/// first chance at a fault (crumbs_crash_handler.c): one the app declared (by address, or its
/// module's name), or one in a recognised runtime's module (dladdr: the module's base name).
/// Any other — the Swift runtime's backtracer, a library's or the app's own handler that logs,
/// exits, or resets the action behind our back and raises — is called after the crash is
/// recorded, as before first chances existed: a first chance never loses a crash that would be
/// recorded without it. Not signal-safe (dladdr).
static bool crumbs__may_recover(const crumbs__crash_state *state, const struct sigaction *action) {
  if (action->sa_handler == SIG_DFL || action->sa_handler == SIG_IGN) return false;
  void *handler = (action->sa_flags & SA_SIGINFO) ? (void *)action->sa_sigaction : (void *)action->sa_handler;
  for (uint32_t index = 0; index < state->first_chance_handler_count; index++) {
    if (state->first_chance_handlers[index] == (uint64_t)(uintptr_t)handler) return true;
  }
  Dl_info module;
  if (dladdr(handler, &module) == 0 || module.dli_fname == NULL) return false;
  const char *base = strrchr(module.dli_fname, '/');
  base = base != NULL ? base + 1 : module.dli_fname;
  for (size_t index = 0; index < sizeof crumbs__recovering_runtimes / sizeof crumbs__recovering_runtimes[0];
       index++) {
    const char *runtime = crumbs__recovering_runtimes[index];
    if (crumbs__begins_with(base, runtime, strlen(runtime))) return true;
  }
  for (const char *declared = state->first_chance_modules; *declared != '\0';) {
    const char *separator = strchr(declared, ':');
    size_t length = separator != NULL ? (size_t)(separator - declared) : strlen(declared);
    if (crumbs__begins_with(base, declared, length)) return true;
    declared += length + (separator != NULL ? 1 : 0);
  }
  return false;
}

/// Keeps what the app declared in `config` (bounded copies; see crumbs_crash_config).
static void crumbs__keep_declared(crumbs__crash_state *state, const crumbs_crash_config *config) {
  uint32_t count = config->first_chance_handlers != NULL ? config->first_chance_handler_count : 0;
  if (count > CRUMBS_CRASH_MAX_FIRST_CHANCE_HANDLERS) count = CRUMBS_CRASH_MAX_FIRST_CHANCE_HANDLERS;
  for (uint32_t index = 0; index < count; index++) {
    state->first_chance_handlers[index] = config->first_chance_handlers[index];
  }
  state->first_chance_handler_count = count;
  const char *modules = config->first_chance_modules != NULL ? config->first_chance_modules : "";
  if (crumbs__format_length(modules) < sizeof state->first_chance_modules) {
    crumbs__format_copy(state->first_chance_modules, sizeof state->first_chance_modules, modules);
  } else {
    state->first_chance_modules[0] = '\0';
  }
}

/// Which chain entries of the signals we hold get the first chance (see crumbs__may_recover),
/// with what the app declares now: every install says it again.
static void crumbs__classify_chain(crumbs__crash_state *state) {
  uint64_t previous = 0, replacer = 0;
  for (int signal_number = 1; signal_number < CRUMBS__CRASH_MAX_SIGNAL; signal_number++) {
    uint64_t bit = 1ull << signal_number;
    if (!(state->installed_mask & bit)) continue;
    if (crumbs__may_recover(state, &state->previous[signal_number])) previous |= bit;
    if (crumbs__may_recover(state, &state->replacer[signal_number])) replacer |= bit;
  }
  __atomic_store_n(&state->previous_may_recover, previous, __ATOMIC_RELEASE);
  __atomic_store_n(&state->replacer_may_recover, replacer, __ATOMIC_RELEASE);
}

static const struct sigaction crumbs__no_action = {.sa_handler = SIG_DFL};

/// Registers the calling thread's stack bounds for the handler's backtrace. For the process's
/// main thread, glibc's pthread_getattr_np reads and parses all of /proc/self/maps (a few hundred
/// microseconds with many modules); the same bounds come cheaper from what the kernel put at the
/// top of the stack: the executable's name (AT_EXECFN), whose end, past its terminator and the
/// null word after it, is in the stack mapping's last page. The bottom is the stack size limit
/// below that top, as the kernel never grows the stack further (glibc does the same). A crash whose
/// stack pointer falls outside (past that limit, or any doubt) makes the handler read the maps, as
/// for any thread without registered bounds.
static void crumbs__register_stack_bounds(void) {
  if ((pid_t)syscall(SYS_gettid) == getpid()) {
    const char *name = (const char *)getauxval(AT_EXECFN);
#if defined(__GLIBC__)
    uint64_t frames_top = (uint64_t)(uintptr_t)__libc_stack_end;
#else
    // musl has no __libc_stack_end: this frame is on the same stack, below the process's first.
    uint64_t frames_top = (uint64_t)(uintptr_t)__builtin_frame_address(0);
#endif
    if (name == NULL || (uint64_t)(uintptr_t)name < frames_top) return;
    uint64_t name_end = (uint64_t)(uintptr_t)name + crumbs__format_length(name) + 1 + 8;
    long page_size = sysconf(_SC_PAGESIZE);
    uint64_t page = page_size >= 4096 && (page_size & (page_size - 1)) == 0 ? (uint64_t)page_size : 4096u;
    uint64_t top = (name_end + page - 1) & ~(page - 1); // the stack ends on a page boundary
    struct rlimit limit;
    uint64_t size = 8u << 20;
    if (getrlimit(RLIMIT_STACK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
        limit.rlim_cur < (1ull << 30)) {
      size = limit.rlim_cur;
    }
    if (top > size + page && top - frames_top < size) {
      crumbs__this_thread.stack_low = top - size;
      crumbs__this_thread.stack_high = top;
    }
    return;
  }
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

int crumbs_crash_install(const crumbs_crash_config *config) {
  if (config->record == NULL || config->record->magic != CRUMBS_CRASH_RECORD_MAGIC) {
    return CRUMBS_CRASH_INSTALL_BAD_RECORD;
  }
  uint64_t mask = config->signal_mask;
  if (mask == 0 || (mask & ((1ull << SIGKILL) | (1ull << SIGSTOP) | 1ull))) {
    return CRUMBS_CRASH_INSTALL_BAD_SIGNALS;
  }

  // Alternate stacks, once.
  if (!crumbs__altstack_reserve(config->altstack_size, config->altstack_pool_count,
                                config->eager_stack_guards)) {
    return CRUMBS_CRASH_INSTALL_ALTSTACK_FAILED;
  }

  crumbs__crash_state *state = &crumbs__crash_installed;
  if (state->swift_fatal_message == NULL) {
    state->swift_fatal_message = crumbs__swift_fatal_message_buffer();
    state->swift_runtime_address =
        (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "swift_getFatalErrorMessageBuffer");
    // Async frames are those the Swift concurrency runtime resumes (crumbs_unwind_async.c).
    crumbs__unwind_concurrency_runtime = (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "swift_job_run");
  }
  state->wait_ms = config->wait_for_first_crash_ms != 0 ? config->wait_for_first_crash_ms : 3000;
  if (crumbs__format_length(config->record_path) < sizeof state->record_path) {
    crumbs__format_copy(state->record_path, sizeof state->record_path, config->record_path);
  } else {
    state->record_path[0] = '\0';
  }
  // The pointer itself, never a copy a later install would overwrite under a running handler.
  __atomic_store_n(&state->ring, config->ring, __ATOMIC_RELEASE);
  __atomic_store_n(&state->record, config->record, __ATOMIC_RELEASE);

  // Modules: a full scan for a new record, else only if dlopen/dlclose happened.
  crumbs__module_table modules = crumbs__module_table_of(config->record);
  crumbs__modules_scan(&modules, NULL);

  // The install thread: our alternate stack unless it has a large enough one; its bounds.
  crumbs__register_stack_bounds();
  crumbs__altstack_give_install_thread();

  crumbs__resolve_handler_calls();

  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crumbs__crash_signal_handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  for (int signal_number = 1; signal_number < CRUMBS__CRASH_MAX_SIGNAL; signal_number++) {
    if (!(mask & (1ull << signal_number))) continue;
    struct sigaction current_action;
    if (sigaction(signal_number, NULL, &current_action) != 0) {
      return CRUMBS_CRASH_INSTALL_SIGACTION_FAILED;
    }
    if (crumbs__crash_is_ours(&current_action)) continue;
    // The first time: keep the previous action to chain to. A re-assert after another library
    // replaced us keeps that one too, called before the original (it came later, and may
    // recover its own faults); it probably chains to us, which the handler takes as passing
    // the signal on (crumbs_crash_handler.c). One that only put the default back is dropped.
    uint64_t bit = 1ull << signal_number;
    if (!(state->installed_mask & bit)) {
      // Not known to recover until classified below: a fault meanwhile is recorded first.
      __atomic_fetch_and(&state->previous_may_recover, ~bit, __ATOMIC_RELEASE);
      __atomic_fetch_and(&state->replacer_may_recover, ~bit, __ATOMIC_RELEASE);
      state->previous[signal_number] = current_action;
      state->replacer[signal_number] = crumbs__no_action;
    } else if (current_action.sa_handler != SIG_DFL && current_action.sa_handler != SIG_IGN) {
      __atomic_fetch_and(&state->replacer_may_recover, ~bit, __ATOMIC_RELEASE);
      state->replacer[signal_number] = current_action;
    }
    // Published before the action: the signal watch (crumbs_signal_watch.c) then sees ours
    // being set and clears the replaced mark.
    __atomic_fetch_or(&state->installed_mask, bit, __ATOMIC_RELEASE);
    if (sigaction(signal_number, &action, NULL) != 0) return CRUMBS_CRASH_INSTALL_SIGACTION_FAILED;
  }
  // Signals dropped from the mask by a re-install go back to what they were.
  for (int signal_number = 1; signal_number < CRUMBS__CRASH_MAX_SIGNAL; signal_number++) {
    uint64_t bit = 1ull << signal_number;
    if ((state->installed_mask & bit) && !(mask & bit)) {
      __atomic_fetch_and(&state->installed_mask, ~bit, __ATOMIC_RELEASE);
      struct sigaction current_action;
      if (sigaction(signal_number, NULL, &current_action) == 0 && crumbs__crash_is_ours(&current_action)) {
        sigaction(signal_number, &state->previous[signal_number], NULL);
      }
    }
  }
  // Which chained handlers get the first chance, with what the app declares now.
  crumbs__keep_declared(state, config);
  crumbs__classify_chain(state);
  // What the record says was replaced is what is still replaced now.
  config->record->replaced_signals = crumbs_crash_replaced_signals();

  crumbs__terminate_install();
  crumbs__thread_capture_install();
  crumbs__altstack_start(config->skip_new_threads == 0);
  crumbs__installed = 1;
  return CRUMBS_CRASH_INSTALL_OK;
}

const char *crumbs_crash_record_path(void) {
  return crumbs__installed ? crumbs__crash_installed.record_path : "";
}

uint64_t crumbs_crash_replaced_signals(void) {
  uint64_t replaced = 0;
  uint64_t installed = __atomic_load_n(&crumbs__crash_installed.installed_mask, __ATOMIC_ACQUIRE);
  for (int signal_number = 1; signal_number < CRUMBS__CRASH_MAX_SIGNAL; signal_number++) {
    if (!(installed & (1ull << signal_number))) continue;
    struct sigaction current;
    if (sigaction(signal_number, NULL, &current) == 0 && !crumbs__crash_is_ours(&current)) {
      replaced |= 1ull << signal_number;
    }
  }
  // Checked after the queries: a crash that began before them (or during them) lets the
  // handlers chained after the record change the actions on the way to the death (the Swift
  // runtime's backtracer puts SIG_DFL back for every signal it handles). What was replaced is
  // then what the record kept when the crash began.
  if (crumbs__crash_started()) {
    const crumbs_crash_record *record = crumbs__crash_own_record();
    if (record != NULL) return __atomic_load_n(&record->replaced_signals, __ATOMIC_RELAXED);
  }
  return replaced;
}

uint32_t crumbs_crash_refresh_modules(bool force) {
  crumbs_crash_record *record = crumbs__crash_installed.record;
  if (record == NULL) return 0;
  if (!force && (uint32_t)crumbs__modules_changes() == record->module_adds) {
    return record->module_count;
  }
  crumbs__module_table modules = crumbs__module_table_of(record);
  return crumbs__modules_scan(&modules, NULL);
}

bool crumbs_crash_uninstall(void) {
  if (!crumbs__installed) return false;
  crumbs__altstack_stop();
  crumbs__terminate_uninstall();
  crumbs__thread_capture_uninstall();
  // Cleared first: restoring the previous actions is not another library replacing ours.
  uint64_t installed = __atomic_exchange_n(&crumbs__crash_installed.installed_mask, 0, __ATOMIC_ACQ_REL);
  for (int signal_number = 1; signal_number < CRUMBS__CRASH_MAX_SIGNAL; signal_number++) {
    if (!(installed & (1ull << signal_number))) continue;
    struct sigaction current;
    // A library that replaced us keeps its handler: taking it away would break it.
    if (sigaction(signal_number, NULL, &current) == 0 && crumbs__crash_is_ours(&current)) {
      // A replacer kept by a re-install is what the signal's action would be without us.
      const struct sigaction *back = crumbs__crash_installed.replacer[signal_number].sa_handler != SIG_DFL
                                         ? &crumbs__crash_installed.replacer[signal_number]
                                         : &crumbs__crash_installed.previous[signal_number];
      sigaction(signal_number, back, NULL);
    }
    crumbs__crash_installed.replacer[signal_number] = crumbs__no_action;
  }
  crumbs__altstack_restore_install_thread();
  // Checked once no handler of ours can be entered any more: a crash that got in before is
  // recording (or has recorded) into the record, which the caller must then keep.
  crumbs_crash_record *record = __atomic_load_n(&crumbs__crash_installed.record, __ATOMIC_ACQUIRE);
  bool crashed = record != NULL && __atomic_load_n(&record->state, __ATOMIC_ACQUIRE) != CRUMBS_CRASH_ARMED;
  __atomic_store_n(&crumbs__crash_installed.ring, NULL, __ATOMIC_RELEASE);
  __atomic_store_n(&crumbs__crash_installed.record, NULL, __ATOMIC_RELEASE);
  crumbs__crash_installed.record_path[0] = '\0';
  crumbs__installed = 0;
  return crashed;
}

void crumbs_crash_guard_alternate_stacks(void) { crumbs__altstack_guard_rest(); }

bool crumbs_crash_prepare_thread(void) {
  crumbs__register_stack_bounds();
  return crumbs__altstack_give_this_thread();
}
