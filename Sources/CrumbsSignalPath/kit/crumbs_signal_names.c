// crumbs_signal_names.c — the signal and si_code name table (see crumbs_signal_names.h).
//
// ASYNC-SIGNAL-SAFE: everything in this file. No libc calls except through crumbs_format.c
// (plain loops); the names are static strings.
//
// The positive si_codes are Linux ABI (include/uapi/asm-generic/siginfo.h), numbered from 1 in
// the order of the tables below on every architecture we build for; the _Static_asserts pin
// that order against this libc's macros wherever it defines them.

#define _GNU_SOURCE
#include "crumbs_signal_names.h"
#include "kit/crumbs_format.h"

#include <signal.h>

const char *crumbs_signal_name(int signal_number) {
  switch (signal_number) {
  case SIGHUP: return "SIGHUP";
  case SIGINT: return "SIGINT";
  case SIGQUIT: return "SIGQUIT";
  case SIGILL: return "SIGILL";
  case SIGTRAP: return "SIGTRAP";
  case SIGABRT: return "SIGABRT";
  case SIGBUS: return "SIGBUS";
  case SIGFPE: return "SIGFPE";
  case SIGKILL: return "SIGKILL";
  case SIGUSR1: return "SIGUSR1";
  case SIGSEGV: return "SIGSEGV";
  case SIGUSR2: return "SIGUSR2";
  case SIGPIPE: return "SIGPIPE";
  case SIGALRM: return "SIGALRM";
  case SIGTERM: return "SIGTERM";
#ifdef SIGSTKFLT
  case SIGSTKFLT: return "SIGSTKFLT";
#endif
  case SIGCHLD: return "SIGCHLD";
  case SIGCONT: return "SIGCONT";
  case SIGSTOP: return "SIGSTOP";
  case SIGTSTP: return "SIGTSTP";
  case SIGTTIN: return "SIGTTIN";
  case SIGTTOU: return "SIGTTOU";
  case SIGURG: return "SIGURG";
  case SIGXCPU: return "SIGXCPU";
  case SIGXFSZ: return "SIGXFSZ";
  case SIGVTALRM: return "SIGVTALRM";
  case SIGPROF: return "SIGPROF";
  case SIGWINCH: return "SIGWINCH";
  case SIGIO: return "SIGIO"; // also SIGPOLL
#ifdef SIGPWR
  case SIGPWR: return "SIGPWR";
#endif
  case SIGSYS: return "SIGSYS";
  default: return NULL;
  }
}

size_t crumbs_signal_name_text(int signal_number, char *buffer, size_t capacity) {
  const char *name = crumbs_signal_name(signal_number);
  if (name != NULL) return crumbs__format_copy(buffer, capacity, name);
  size_t length = crumbs__format_copy(buffer, capacity, "SIG");
  return crumbs__format_append_decimal(buffer, capacity, length, signal_number);
}

// MARK: - si_code

static const char *const crumbs__segv_codes[] = {"SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR"};
_Static_assert(SEGV_MAPERR == 1 && SEGV_ACCERR == 2, "SIGSEGV si_codes");

static const char *const crumbs__bus_codes[] = {"BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR",
                                                "BUS_MCEERR_AO"};
_Static_assert(BUS_ADRALN == 1 && BUS_ADRERR == 2 && BUS_OBJERR == 3, "SIGBUS si_codes");

static const char *const crumbs__ill_codes[] = {"ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP",
                                                "ILL_PRVOPC", "ILL_PRVREG", "ILL_COPROC", "ILL_BADSTK"};
_Static_assert(ILL_ILLOPC == 1 && ILL_ILLOPN == 2 && ILL_ILLADR == 3 && ILL_ILLTRP == 4 && ILL_PRVOPC == 5 &&
                   ILL_PRVREG == 6 && ILL_COPROC == 7 && ILL_BADSTK == 8,
               "SIGILL si_codes");

static const char *const crumbs__fpe_codes[] = {"FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF",
                                                "FPE_FLTUND", "FPE_FLTRES", "FPE_FLTINV", "FPE_FLTSUB"};
_Static_assert(FPE_INTDIV == 1 && FPE_INTOVF == 2 && FPE_FLTDIV == 3 && FPE_FLTOVF == 4 && FPE_FLTUND == 5 &&
                   FPE_FLTRES == 6 && FPE_FLTINV == 7 && FPE_FLTSUB == 8,
               "SIGFPE si_codes");

static const char *const crumbs__trap_codes[] = {"TRAP_BRKPT", "TRAP_TRACE", "TRAP_BRANCH", "TRAP_HWBKPT"};
_Static_assert(TRAP_BRKPT == 1 && TRAP_TRACE == 2, "SIGTRAP si_codes");

static const char *const crumbs__sys_codes[] = {"SYS_SECCOMP"};

static const char *const crumbs__chld_codes[] = {"CLD_EXITED",  "CLD_KILLED",  "CLD_DUMPED",
                                                 "CLD_TRAPPED", "CLD_STOPPED", "CLD_CONTINUED"};
_Static_assert(CLD_EXITED == 1 && CLD_KILLED == 2 && CLD_DUMPED == 3 && CLD_TRAPPED == 4 &&
                   CLD_STOPPED == 5 && CLD_CONTINUED == 6,
               "SIGCHLD si_codes");

/// table[code - 1], or NULL when `code` is outside the table.
static const char *crumbs__code_in(const char *const *table, size_t count, int code) {
  return code >= 1 && (size_t)code <= count ? table[code - 1] : NULL;
}
#define CRUMBS__CODE_IN(table, code) crumbs__code_in(table, sizeof table / sizeof table[0], code)

const char *crumbs_signal_code_name(int signal_number, int code) {
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
  case SIGSEGV: return CRUMBS__CODE_IN(crumbs__segv_codes, code);
  case SIGBUS: return CRUMBS__CODE_IN(crumbs__bus_codes, code);
  case SIGILL: return CRUMBS__CODE_IN(crumbs__ill_codes, code);
  case SIGFPE: return CRUMBS__CODE_IN(crumbs__fpe_codes, code);
  case SIGTRAP: return CRUMBS__CODE_IN(crumbs__trap_codes, code);
  case SIGSYS: return CRUMBS__CODE_IN(crumbs__sys_codes, code);
  case SIGCHLD: return CRUMBS__CODE_IN(crumbs__chld_codes, code);
  default: return NULL;
  }
}
