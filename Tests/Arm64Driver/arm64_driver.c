// arm64_driver.c — the signal path proven on aarch64: Scripts/check-arm64.sh (`make check-arm64`)
// cross-compiles it with Sources/CrumbsSignalPath and Tests/CrumbsSignalPathTesting for aarch64
// (-mbranch-protection=standard: return addresses signed, as distributions build) and runs it
// under qemu-aarch64 -cpu max (pointer authentication real). Every case is a real process: the
// driver forks a child per case, the child installs the crash handler over a ring and a record
// file of its own and crashes (or records), and the driver checks what the child left.
//
//   usage: arm64-driver DIRECTORY [CASE...]   files go to DIRECTORY/<case>.ring|.crash
//
// Prints "ok <case>: …" or "FAIL <case>: …" per case; exits 0 when every case passed. The
// record of case `unwind` is the one `crumbs crash-record dump` reads on x86_64
// (CrashRecordArm64Tests).

#define _GNU_SOURCE
#include "arm64_driver.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

// crumbs_terminate.cpp is C++, and no aarch64 C++ library is installed: its two entry points
// and its message are stood in for, as in Scripts/c-portability-smoke.c.
crumbs_crash_message crumbs__crash_uncaught;
void crumbs__terminate_install(void) {}
void crumbs__terminate_uninstall(void) {}

const char *driver_directory;
volatile uint64_t *driver_shared;
static int driver_failures;

// MARK: - Files of one case

/// Creates `<directory>/<name><suffix>` of `size` zero bytes and maps it shared; NULL on failure.
static void *driver_map_file(const char *name, const char *suffix, size_t size, char *path, size_t capacity,
                             int *descriptor) {
  snprintf(path, capacity, "%s/%s%s", driver_directory, name, suffix);
  unlink(path);
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || ftruncate(fd, (off_t)size) != 0) return NULL;
  void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (descriptor != NULL) {
    *descriptor = fd;
  } else {
    close(fd);
  }
  return base == MAP_FAILED ? NULL : base;
}

/// The child's set-up: a ring `<case>.ring` (installed, tracked for fork) and its record
/// `<case>.crash`, the crash handler installed over both. Exits 90 on failure.
driver_case_files driver_install(const char *name) {
  static crumbs_ring ring;
  static crumbs_ring_file ring_file;
  driver_case_files files;
  crumbs_ring_plan_result plan;
  if (crumbs_ring_plan(256, 256, 4, 8, &plan) != CRUMBS_PLAN_OK) _exit(90);
  char ring_path[512], record_path[512];
  int ring_fd = -1;
  void *ring_base = driver_map_file(name, ".ring", plan.file_size, ring_path, sizeof ring_path, &ring_fd);
  files.record =
      driver_map_file(name, ".crash", CRUMBS_CRASH_FILE_SIZE, record_path, sizeof record_path, NULL);
  if (ring_base == NULL || files.record == NULL) _exit(90);
  crumbs_ring_identity identity;
  memset(&identity, 0, sizeof identity);
  identity.pid = (uint32_t)getpid();
  identity.session_id[0] = 0xa6;
  identity.app_name = "arm64-driver";
  identity.cgroup_oom_kills_at_start = UINT64_MAX;
  crumbs_ring_format(ring_base, &plan, &identity, true);
  crumbs_ring_attach(&ring, ring_base);
  crumbs_ring_install(&ring);
  crumbs_ring_file_init(&ring_file, &ring, plan.file_size, ring_fd, ring_path);
  if (!crumbs_fork_track(&ring_file)) _exit(90);
  files.ring = &ring;
  crumbs_crash_record_format(files.record, (uint32_t)getpid(), identity.session_id, identity.boot_id, 0);
  crumbs_crash_config config;
  memset(&config, 0, sizeof config);
  config.record = files.record;
  config.record_path = record_path;
  config.ring = &ring;
  config.signal_mask = (1ull << SIGSEGV) | (1ull << SIGBUS) | (1ull << SIGILL) | (1ull << SIGFPE) |
                       (1ull << SIGTRAP) | (1ull << SIGABRT) | (1ull << SIGSYS);
  config.altstack_pool_count = 8;
  // qemu-user 7.2 cannot send the guest's two highest signals (63, 64: tgkill fails with EINVAL,
  // no host signal is left to map them to), though sigaction accepts them: taken here, so the
  // capture signal (the highest free one) is SIGRTMAX - 2.
  signal(SIGRTMAX, SIG_IGN);
  signal(SIGRTMAX - 1, SIG_IGN);
  if (crumbs_crash_install(&config) != CRUMBS_CRASH_INSTALL_OK) _exit(90);
  // Threads of an emulated process answer slowly on a busy machine: give them seconds.
  crumbs_crash_testing_capture_deadline_ms(20000);
  return files;
}

/// Maps `<case>.crash` read-only (the file a child left), NULL when missing.
const crumbs_crash_record *driver_read_record(const char *file_name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", driver_directory, file_name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  void *base = mmap(NULL, CRUMBS_CRASH_FILE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  return base == MAP_FAILED ? NULL : base;
}

// MARK: - Reporting

void driver_report(const char *name, bool passed, const char *format, ...) {
  va_list arguments;
  va_start(arguments, format);
  printf("%s %s: ", passed ? "ok" : "FAIL", name);
  vprintf(format, arguments);
  printf("\n");
  va_end(arguments);
  fflush(stdout);
  if (!passed) driver_failures++;
}

const char *driver_symbol(uint64_t address) {
  Dl_info info;
  if (address == 0 || dladdr((void *)(uintptr_t)address, &info) == 0) return "?";
  if (info.dli_sname != NULL) return info.dli_sname;
  const char *slash = info.dli_fname != NULL ? strrchr(info.dli_fname, '/') : NULL;
  return slash != NULL ? slash + 1 : (info.dli_fname != NULL ? info.dli_fname : "?");
}

bool driver_in_libc(uint64_t address) {
  Dl_info info;
  return address != 0 && dladdr((void *)(uintptr_t)address, &info) != 0 && info.dli_fname != NULL &&
         strstr(info.dli_fname, "libc.so") != NULL;
}

/// Runs `body(name)` in a child, waits for it, and returns its wait status (-1: fork failed).
int driver_run_child(const char *name, void (*body)(const char *name)) {
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    body(name);
    _exit(0);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
  }
  return status;
}

bool driver_died_by(int status, int signal_number, char *why, size_t capacity) {
  if (WIFSIGNALED(status) && WTERMSIG(status) == signal_number) return true;
  if (WIFSIGNALED(status)) {
    snprintf(why, capacity, "died by signal %d, not %d", WTERMSIG(status), signal_number);
  } else {
    snprintf(why, capacity, "exited %d instead of dying by signal %d", WEXITSTATUS(status), signal_number);
  }
  return false;
}

/// Checks the record of a crash: COMPLETE, aarch64, its signal, the registers named (pc, sp,
/// lr, fp, fault address, ESR) consistent with each other and with the stack, frames[0] the pc.
/// `why` gets the first problem.
bool driver_check_record(const crumbs_crash_record *record, int signal_number, uint64_t fault_address,
                         char *why, size_t capacity) {
  if (record == NULL) return snprintf(why, capacity, "no record file"), false;
  if (record->state != CRUMBS_CRASH_COMPLETE || record->complete_marker != CRUMBS_CRASH_COMPLETE_MARKER) {
    return snprintf(why, capacity, "record state %u, not COMPLETE", record->state), false;
  }
  if (record->flags & CRUMBS_CRASH_FLAG_PARTIAL) return snprintf(why, capacity, "record PARTIAL"), false;
  if (record->arch != CRUMBS_CRASH_ARCH_AARCH64)
    return snprintf(why, capacity, "arch %u", record->arch), false;
  if (record->signal_number != signal_number) {
    return snprintf(why, capacity, "signal %d, not %d", record->signal_number, signal_number), false;
  }
  if (record->register_count != DRIVER_REGISTERS) {
    return snprintf(why, capacity, "%u registers, not %u", record->register_count, DRIVER_REGISTERS), false;
  }
  const uint64_t *registers = record->registers;
  uint64_t sp = registers[DRIVER_SP], pc = registers[DRIVER_PC], fp = registers[29], lr = registers[30];
  if (record->frame_count == 0 || record->frames[0] != pc) {
    return snprintf(why, capacity, "frames[0] 0x%llx is not pc 0x%llx", (unsigned long long)record->frames[0],
                    (unsigned long long)pc),
           false;
  }
  // A stack overflow leaves sp in the guard below the stack: within 64 KiB of it.
  if (record->stack_low >= record->stack_high || sp + 65536 < record->stack_low || sp >= record->stack_high) {
    return snprintf(why, capacity, "sp 0x%llx outside the stack [0x%llx, 0x%llx)", (unsigned long long)sp,
                    (unsigned long long)record->stack_low, (unsigned long long)record->stack_high),
           false;
  }
  if (fp != 0 && (fp < sp || fp >= record->stack_high)) {
    return snprintf(why, capacity, "fp 0x%llx outside the stack above sp", (unsigned long long)fp), false;
  }
  if (lr == 0) return snprintf(why, capacity, "lr is 0"), false;
  // The record's fault address is si_addr; the register is the context's fault_address, which
  // qemu-user leaves 0 for SIGBUS (a kernel writes the fault's address).
  uint64_t context_address = registers[DRIVER_FAULT_ADDRESS];
  if (fault_address != DRIVER_ANY_ADDRESS && (record->fault_address != fault_address ||
                                              (context_address != fault_address && context_address != 0))) {
    return snprintf(why, capacity, "fault address 0x%llx (register 0x%llx), not 0x%llx",
                    (unsigned long long)record->fault_address,
                    (unsigned long long)registers[DRIVER_FAULT_ADDRESS], (unsigned long long)fault_address),
           false;
  }
  return true;
}

void driver_describe_record(const crumbs_crash_record *record, char *text, size_t capacity) {
  const uint64_t *registers = record->registers;
  snprintf(text, capacity,
           "%s %s pc 0x%llx (%s) sp 0x%llx lr 0x%llx fp 0x%llx addr 0x%llx esr 0x%llx, %u frames",
           record->signal_name, record->code_name, (unsigned long long)registers[DRIVER_PC],
           driver_symbol(registers[DRIVER_PC]), (unsigned long long)registers[DRIVER_SP],
           (unsigned long long)registers[30], (unsigned long long)registers[29],
           (unsigned long long)registers[DRIVER_FAULT_ADDRESS], (unsigned long long)registers[DRIVER_ESR],
           record->frame_count);
}

// MARK: - main

static const struct {
  const char *name;
  void (*run)(const char *name);
} driver_cases[] = {
    {"ring", driver_case_ring},
    {"segv-null", driver_case_segv_null},
    {"segv-wild", driver_case_segv_wild},
    {"bad-call", driver_case_bad_call},
    {"sigbus", driver_case_sigbus},
    {"sigill", driver_case_sigill},
    {"sigtrap", driver_case_sigtrap},
    {"sigabrt", driver_case_sigabrt},
    {"divide-by-zero", driver_case_divide},
    {"esr-record", driver_case_esr_record},
    {"unwind", driver_case_unwind},
    {"frame-records", driver_case_frame_records},
    {"signal-handler", driver_case_signal_handler},
    {"stack-overflow", driver_case_stack_overflow},
    {"threads", driver_case_threads},
    {"live-capture", driver_case_live_capture},
    {"fork", driver_case_fork},
    {"page-size", driver_case_page_size},
};

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIRECTORY [CASE...]\n", argv[0]);
    return 2;
  }
  driver_directory = argv[1];
  void *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return 2;
  driver_shared = shared;
  setvbuf(stdout, NULL, _IOLBF, 0);
  size_t count = sizeof driver_cases / sizeof driver_cases[0];
  int ran = 0;
  for (size_t index = 0; index < count; index++) {
    bool chosen = argc == 2;
    for (int argument = 2; argument < argc; argument++)
      chosen |= strcmp(argv[argument], driver_cases[index].name) == 0;
    if (!chosen) continue;
    driver_cases[index].run(driver_cases[index].name);
    ran++;
  }
  if (ran == 0) {
    fprintf(stderr, "arm64-driver: no such case\n");
    return 2;
  }
  printf("%s: %d case(s), %d failed\n", driver_failures == 0 ? "ok" : "FAIL", ran, driver_failures);
  return driver_failures == 0 ? 0 : 1;
}
