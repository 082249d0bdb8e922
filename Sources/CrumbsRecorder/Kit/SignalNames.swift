import CrumbsSignalPath

/// Names of signals and of their `si_code` values, as reports and the CLI print them: the C
/// table the crash handler and signal breadcrumbs use (`crumbs_signal_names.h`), so a report
/// and a breadcrumb always agree.
public enum SignalNames {
  /// `SIGSEGV`, `SIGILL`, … or `SIG<n>`.
  public static func name(_ signal: Int32) -> String {
    withUnsafeTemporaryAllocation(of: CChar.self, capacity: 32) { buffer in
      _ = crumbs_signal_name_text(signal, buffer.baseAddress, buffer.count)
      return String(cString: buffer.baseAddress!)
    }
  }

  /// The name of `code` for `signal` (`SEGV_MAPERR`, `ILL_ILLOPN`, `SI_USER`, …) or `code <n>`.
  public static func codeName(signal: Int32, code: Int32) -> String {
    crumbs_signal_code_name(signal, code).map { String(cString: $0) } ?? "code \(code)"
  }

  /// The signals of a mask with a bit per signal (`1 << signal`), in order.
  public static func signals(inMask mask: UInt64) -> [Int32] {
    (1..<64).filter { mask & (1 << UInt64($0)) != 0 }.map { Int32($0) }
  }

  /// Whether `code` means another process (or the process itself) sent the signal.
  public static func isSentByProcess(code: Int32) -> Bool {
    code <= 0
  }
}
