#if canImport(Glibc)
  import Glibc
#endif

/// Names of signals and of their `si_code` values, as reports and the CLI print them.
public enum SignalNames {
  /// `SIGSEGV`, `SIGILL`, … or `SIG<n>`.
  public static func name(_ signal: Int32) -> String {
    switch signal {
    case SIGHUP: "SIGHUP"
    case SIGINT: "SIGINT"
    case SIGQUIT: "SIGQUIT"
    case SIGILL: "SIGILL"
    case SIGTRAP: "SIGTRAP"
    case SIGABRT: "SIGABRT"
    case SIGBUS: "SIGBUS"
    case SIGFPE: "SIGFPE"
    case SIGKILL: "SIGKILL"
    case SIGUSR1: "SIGUSR1"
    case SIGSEGV: "SIGSEGV"
    case SIGUSR2: "SIGUSR2"
    case SIGPIPE: "SIGPIPE"
    case SIGALRM: "SIGALRM"
    case SIGTERM: "SIGTERM"
    case SIGCHLD: "SIGCHLD"
    case SIGSYS: "SIGSYS"
    default: "SIG\(signal)"
    }
  }

  /// The name of `code` for `signal` (`SEGV_MAPERR`, `ILL_ILLOPN`, `SI_USER`, …).
  public static func codeName(signal: Int32, code: Int32) -> String {
    switch code {
    case 0: return "SI_USER"
    case 0x80: return "SI_KERNEL"
    case -1: return "SI_QUEUE"
    case -6: return "SI_TKILL"
    case -2: return "SI_TIMER"
    case -3: return "SI_MESGQ"
    case -4: return "SI_ASYNCIO"
    default: break
    }
    let table: [String]
    switch signal {
    case SIGSEGV: table = ["SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR"]
    case SIGBUS: table = ["BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR", "BUS_MCEERR_AO"]
    case SIGILL:
      table = [
        "ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP", "ILL_PRVOPC", "ILL_PRVREG", "ILL_COPROC",
        "ILL_BADSTK",
      ]
    case SIGFPE:
      table = [
        "FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF", "FPE_FLTUND", "FPE_FLTRES", "FPE_FLTINV",
        "FPE_FLTSUB",
      ]
    case SIGTRAP: table = ["TRAP_BRKPT", "TRAP_TRACE", "TRAP_BRANCH", "TRAP_HWBKPT"]
    case SIGSYS: table = ["SYS_SECCOMP"]
    default: table = []
    }
    if code >= 1 && Int(code) <= table.count { return table[Int(code) - 1] }
    return "code \(code)"
  }

  /// Whether `code` means another process (or the process itself) sent the signal.
  public static func isSentByProcess(code: Int32) -> Bool {
    code <= 0
  }
}
