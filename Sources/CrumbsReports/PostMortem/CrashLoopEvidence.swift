// CrashLoopEvidence.swift — what one ended session says about a crash loop, decided the same way
// whether the session was processed (PostMortemProcessor, on any launch or by a collector) or
// still waits in rings/ unprocessed (read at the next start, from its ring header and crash
// record only). The client's CrashLoop (Crumbs) puts the two together.
//
// Entry points, in call order:
//   CrashLoopEvidence.waiting(in:excluding:)   at start, on the caller's thread: every session
//                                   waiting in rings/ (the few ring header fields of
//                                   RingHeaderSummary + crash record; no slot decoded, nothing
//                                   symbolicated, no lock taken), with its step
//   CrashLoopStep(end:record:bootID:parentSessionID:)   one session's step, from how it ended;
//                                   PostMortemProcessor sets `PreviousSession.crashLoopStep` with
//                                   it, so the processed path stores the same step and signature
//   CrashLoopStep.signature(of:)    the crash's signature, without symbolication (so it is the
//                                   same before and after the session is processed)
//
// A session's step: crashed or ended abnormally → it counts, with its signature; clean → it
// resets the loop; stopped by an unhandled SIGTERM-like signal, ended by a machine restart (its
// ring's boot is not this one, no crash record), or a forked child's session → it passes: it says
// nothing about whether the app can start, so it neither counts nor ends a loop (an orchestrator
// that stops a crash-looping pod must not hide the loop from the next start). Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder

/// How one ended session bears on a crash loop (`CrumbsClient.crashLoop`).
public enum CrashLoopStep: Sendable, Equatable, Codable {
  /// Crashed, or ended abnormally: one more session in the loop, with its signature
  /// (`CrashLoopStep.signature(of:)`).
  case counts(signature: String)
  /// Ended clean: a loop, if any, ended before it.
  case resets
  /// Says nothing about the app (a SIGTERM-like stop, a machine restart, a forked child's
  /// session): neither counts nor resets.
  case passes
}

extension CrashLoopStep {
  /// The report attribute that carries a crash loop's count (see CrumbsClient.crashLoop).
  public static let attributeKey = "crumbs.crash_loop.count"
  /// The signature of a session that ended abnormally (no crash record: killed, OOM…).
  public static let abnormalSignature = "abnormal termination"
  /// The signature of a crash that left no crash record (ring marked crashed).
  public static let unrecordedCrashSignature = "crash without a crash record"

  /// The step of a session that ended as `end`. `bootID`: the session's (ring header or crash
  /// record); an abnormal end in another boot is the machine's restart, not the app's failure.
  package init(end: SessionEnd, record: CrashRecord?, bootID: [UInt8]?, parentSessionID: SessionID?) {
    guard parentSessionID == nil else {
      self = .passes
      return
    }
    switch end {
    case .clean: self = .resets
    case .terminatedBySignal: self = .passes
    case .crash:
      self = .counts(signature: record.map(Self.signature(of:)) ?? Self.unrecordedCrashSignature)
    case .abnormalTermination:
      // The same rule as the report's "the machine restarted" (RingHeaderInfo.isFromAnotherBoot).
      if let bootID, SystemFacts.isAnotherBoot(bootID) {
        self = .passes
      } else {
        self = .counts(signature: Self.abnormalSignature)
      }
    }
  }

  /// A crash's signature from its record alone (no symbol read, so the same string whether the
  /// session was processed or not, and cheap at start): the signal's name and the first frame
  /// of the crashing thread in the executable (the first module) as `name+0xOFFSET` (offset in
  /// the ELF file's address space: the same in every launch of that build, whatever ASLR did),
  /// else the top frame in any module not Crumbs' own (`libCrumbs…`), else the signal alone.
  /// Code of Crumbs linked into the executable is not told apart (that needs its symbols).
  public static func signature(of record: CrashRecord) -> String {
    let signal = record.signal.name.isEmpty ? "signal \(record.signal.number)" : record.signal.name
    let located = record.frames.enumerated().compactMap { index, address -> (LoadedModule, UInt64)? in
      // Return addresses point after the call: look up the call itself.
      let lookup = index == 0 || address == 0 ? address : address - 1
      return record.module(containing: lookup).map { ($0, address) }
    }
    let executable = record.modules.first
    let own: (LoadedModule) -> Bool = { Syscall.baseName(of: $0.path).hasPrefix("libCrumbs") }
    let chosen =
      located.first { module, _ in module == executable }
      ?? located.first { module, _ in !own(module) } ?? located.first
    guard let (module, address) = chosen else { return signal }
    let (offset, overflow) = address.subtractingReportingOverflow(module.loadBias)
    let name = Syscall.baseName(of: module.path)
    return "\(signal) \(name)+0x\(String(overflow ? address : offset, radix: 16))"
  }
}

/// The sessions that wait in rings/ unprocessed, as a crash loop sees them.
package enum CrashLoopEvidence {
  /// One waiting session.
  package struct Waiting: Sendable, Equatable {
    package var sessionID: SessionID
    /// Its ring's creation (ns since the epoch): the order of the loop.
    package var startedWallNanoseconds: UInt64
    package var step: CrashLoopStep
  }

  /// Every ended session waiting in `directory`'s rings/ (claimed ones included: their claimer
  /// has not finished them, so they are not in the tally yet), except `excluding`, with its step;
  /// and how many ring files it listed (ended or still written, `excluding`'s left out: what
  /// `RingDirectory.waitingRingCount` counts), so that `start` decides whether it has a backlog
  /// to process without listing rings/ again. Reads each ring's header (one small read) and,
  /// when the crash record is not untouched, the record; takes no lock (a lock taken even
  /// briefly could make a claimer skip a ring). Sessions still running, unreadable ones and
  /// forked children's are left out of `sessions`.
  package static func waiting(in directory: RingDirectory, excluding: SessionID?)
    -> (sessions: [Waiting], rings: Int)
  {
    var rings = 0
    let folder = directory.ringsPath
    guard let names = try? Syscall.directoryEntries(folder) else { return ([], 0) }
    var found: [Waiting] = []
    for name in names where name.hasSuffix(".ring") || name.hasSuffix(".ring.claimed") {
      let stem = String(name.prefix { $0 != "." })
      if let excluding, stem == excluding.description { continue }
      rings += 1
      // The few header fields a step needs, without building RingHeaderInfo (RingHeaderSummary).
      let header = RingHeaderSummary.read(file: folder + "/" + name)
      let recordPath = folder + "/" + stem + ".crash"
      var record: CrashRecord?
      if Syscall.fileExists(recordPath), !CrashRecord.isUntouched(file: recordPath),
        let read = try? CrashRecord.read(file: recordPath), read.status != .noCrash
      {
        record = read
      }
      guard header != nil || record != nil, header?.isForkedChild != true,
        let end = end(header: header, hasRecord: record != nil)
      else { continue }
      guard let sessionID = header?.sessionID ?? record?.sessionID else { continue }
      let step = CrashLoopStep(
        end: end, record: record, bootID: header?.bootID ?? record?.bootID, parentSessionID: nil)
      found.append(
        Waiting(
          sessionID: sessionID,
          startedWallNanoseconds: header?.createdWallNanoseconds ?? record?.installWallNanoseconds ?? 0,
          step: step))
    }
    return (found, rings)
  }

  /// How the processor will judge the session (PostMortemProcessor.process), from its header
  /// and whether a crash record was written; nil while its writer may still run.
  static func end(header: RingHeaderSummary?, hasRecord: Bool) -> SessionEnd? {
    if hasRecord { return .crash }
    guard let header else { return nil }
    switch header.state {
    case .clean: return .clean
    case .terminatedBySignal: return header.hadOngoingHang ? .abnormalTermination : .terminatedBySignal
    case .crashed: return .crash
    case .running, .unknown:
      // A live writer (another process of the app, or a writer we cannot tell about) has not ended.
      return header.writer.liveness == .gone ? .abnormalTermination : nil
    }
  }
}
