// PairRedaction.swift — the pair rule (the value of a sensitive `key=value` / `key: value`
// pair, and a URL's userinfo, become `[redacted]`) for the reports: the crash handler's own C
// (Sources/CrumbsSignalPath/crash/crumbs_redact.c), so the termination line and the report
// redact alike by construction. The rule is C because the handler needs it; CrumbsReports
// reaches it here, since only the recorder imports the signal path.
//
// Entry points: PairRedaction(keys:redactsURLCredentials:) (keys prepared once),
// redaction.redacted(_:) (one text). Not signal-safe (allocates the result).

import CrumbsSignalPath

/// Sensitive pairs' values (and with `redactsURLCredentials`, URLs' userinfo) replaced in free
/// text, by the crash handler's rule.
package struct PairRedaction: Sendable {
  /// The keys as crumbs_redaction_keys_prepare left them: normalized, each NUL-ended, an empty
  /// key after the last.
  private let preparedKeys: [CChar]
  package let redactsURLCredentials: Bool
  /// Whether some key was given (without one, only URLs' userinfo can be redacted).
  package let hasKeys: Bool

  package init(keys: [String], redactsURLCredentials: Bool) {
    var list = Array(keys.filter { !$0.isEmpty }.joined(separator: "\0").utf8)
    if !list.isEmpty { list.append(0) }
    var prepared = [CChar](repeating: 0, count: list.count + 1)
    list.withUnsafeBufferPointer { bytes in
      bytes.withMemoryRebound(to: CChar.self) { keys in
        _ = crumbs_redaction_keys_prepare(keys.baseAddress, keys.count, &prepared, prepared.count)
      }
    }
    preparedKeys = prepared
    hasKeys = prepared[0] != 0
    self.redactsURLCredentials = redactsURLCredentials
  }

  /// `text` (UTF-8) with its sensitive pairs' values replaced; nil when nothing was.
  package func redacted(_ text: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
    guard !text.isEmpty, hasKeys || redactsURLCredentials else { return nil }
    // Enough for any text (crumbs_redact_pairs); doubled should that ever be wrong.
    var capacity = text.count * 6 + 16
    while true {
      var cut = false
      let output = [UInt8](unsafeUninitializedCapacity: capacity) { out, count in
        count = text.withMemoryRebound(to: CChar.self) { input in
          out.withMemoryRebound(to: CChar.self) { out in
            preparedKeys.withUnsafeBufferPointer { keys in
              crumbs_redact_pairs(
                keys.baseAddress, redactsURLCredentials, input.baseAddress, input.count, out.baseAddress,
                out.count, &cut)
            }
          }
        }
      }
      if cut {
        capacity *= 2
        continue
      }
      // A replacement changes the length but for a value of exactly the replacement's length.
      return output.count == text.count && output.elementsEqual(text) ? nil : output
    }
  }
}
