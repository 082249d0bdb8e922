// SignalNamesTests.swift — the one signal/si_code table (C, crumbs_signal_names.h) as Swift sees
// it: the names the crash record, signal breadcrumbs and reports all print.

import CrumbsSignalPath
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite("Signal names")
struct SignalNamesTests {
  @Test func everyStandardSignalHasItsName() {
    let expected: [Int32: String] = [
      SIGHUP: "SIGHUP", SIGINT: "SIGINT", SIGQUIT: "SIGQUIT", SIGILL: "SIGILL", SIGTRAP: "SIGTRAP",
      SIGABRT: "SIGABRT", SIGBUS: "SIGBUS", SIGFPE: "SIGFPE", SIGKILL: "SIGKILL", SIGUSR1: "SIGUSR1",
      SIGSEGV: "SIGSEGV", SIGUSR2: "SIGUSR2", SIGPIPE: "SIGPIPE", SIGALRM: "SIGALRM", SIGTERM: "SIGTERM",
      SIGSTKFLT: "SIGSTKFLT", SIGCHLD: "SIGCHLD", SIGCONT: "SIGCONT", SIGSTOP: "SIGSTOP",
      SIGTSTP: "SIGTSTP", SIGTTIN: "SIGTTIN", SIGTTOU: "SIGTTOU", SIGURG: "SIGURG", SIGXCPU: "SIGXCPU",
      SIGXFSZ: "SIGXFSZ", SIGVTALRM: "SIGVTALRM", SIGPROF: "SIGPROF", SIGWINCH: "SIGWINCH",
      SIGIO: "SIGIO", SIGPWR: "SIGPWR", SIGSYS: "SIGSYS",
    ]
    #expect(expected.count == 31)
    for (signal, name) in expected {
      #expect(SignalNames.name(signal) == name)
      #expect(crumbs_signal_name(signal).map { String(cString: $0) } == name)
    }
  }

  @Test func signalsWithoutANameAreNumbered() {
    #expect(SignalNames.name(34) == "SIG34")
    #expect(SignalNames.name(0) == "SIG0")
    #expect(SignalNames.name(-1) == "SIG-1")
    #expect(crumbs_signal_name(34) == nil)
  }

  @Test func codesSentByProcessesMeanTheSameForEverySignal() {
    for signal in [SIGSEGV, SIGTERM, SIGCHLD, 40] {
      #expect(SignalNames.codeName(signal: signal, code: 0) == "SI_USER")
      #expect(SignalNames.codeName(signal: signal, code: 0x80) == "SI_KERNEL")
      #expect(SignalNames.codeName(signal: signal, code: -1) == "SI_QUEUE")
      #expect(SignalNames.codeName(signal: signal, code: -2) == "SI_TIMER")
      #expect(SignalNames.codeName(signal: signal, code: -3) == "SI_MESGQ")
      #expect(SignalNames.codeName(signal: signal, code: -4) == "SI_ASYNCIO")
      #expect(SignalNames.codeName(signal: signal, code: -5) == "SI_SIGIO")
      #expect(SignalNames.codeName(signal: signal, code: -6) == "SI_TKILL")
    }
  }

  @Test func perSignalCodes() {
    let expected: [(Int32, [String])] = [
      (SIGSEGV, ["SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR"]),
      (SIGBUS, ["BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR", "BUS_MCEERR_AO"]),
      (
        SIGILL,
        [
          "ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP", "ILL_PRVOPC", "ILL_PRVREG", "ILL_COPROC",
          "ILL_BADSTK",
        ]
      ),
      (
        SIGFPE,
        [
          "FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF", "FPE_FLTUND", "FPE_FLTRES", "FPE_FLTINV",
          "FPE_FLTSUB",
        ]
      ),
      (SIGTRAP, ["TRAP_BRKPT", "TRAP_TRACE", "TRAP_BRANCH", "TRAP_HWBKPT"]),
      (SIGSYS, ["SYS_SECCOMP"]),
      (SIGCHLD, ["CLD_EXITED", "CLD_KILLED", "CLD_DUMPED", "CLD_TRAPPED", "CLD_STOPPED", "CLD_CONTINUED"]),
    ]
    for (signal, names) in expected {
      for (index, name) in names.enumerated() {
        #expect(SignalNames.codeName(signal: signal, code: Int32(index + 1)) == name)
      }
      let past = Int32(names.count + 1)
      #expect(SignalNames.codeName(signal: signal, code: past) == "code \(past)")
      #expect(crumbs_signal_code_name(signal, past) == nil)
    }
    #expect(SignalNames.codeName(signal: SIGTERM, code: 1) == "code 1")
  }
}
