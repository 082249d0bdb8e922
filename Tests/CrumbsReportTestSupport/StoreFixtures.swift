// StoreFixtures.swift — report store contents for tests: a small crash report, and report
// folders written directly (as an earlier version, another process or a tamperer would leave
// them), without ReportStore.store and so without its limits.

import CrumbsPlatform
import CrumbsRecorder

@testable import CrumbsReports

extension CrashReport {
  /// A small crash report (no frames, one module) observed at `observed` ns.
  package static func sample(
    id: String = SessionID().description, observed: UInt64 = 1_000, type: String = "SIGSEGV"
  ) -> CrashReport {
    CrashReport(
      id: id, kind: .crash, exceptionType: type, exceptionMessage: "SEGV_MAPERR at 0x0",
      exceptionStacktrace: "#0  0x1", threadID: 7, threadName: "main", sessionID: id, reportingSessionID: nil,
      timeUnixNano: observed - 1, time: ISO8601.string(nanoseconds: observed - 1),
      observedTimeUnixNano: observed, observedTime: ISO8601.string(nanoseconds: observed), signal: nil,
      registers: [], frames: [],
      modules: [
        LoadedModule(path: "/bin/app", loadBias: 0x1000, buildID: [1, 2], start: 0x1000, end: 0x2000)
      ],
      resource: ["service.name": "app"], attributes: [:],
      breadcrumbs: CrashReport.Trail(
        attachment: nil, count: 0, valid: 0, torn: 0, overwritten: 0, empty: 0, lastMessage: nil,
        timesCalibrated: true),
      attachments: [], damage: [], evidence: [], handlerDurationNanoseconds: nil)
  }
}

extension ReportStore {
  /// Writes `report` as a folder in `state` directly: report.json, `blobBytes` bytes as
  /// `blob.bin` (listed as an attachment) and, in dropped/, a reason. Returns the folder.
  @discardableResult
  package func plant(_ report: CrashReport, in state: ReportState, blobBytes: Int = 0) throws -> String {
    var report = report
    let folder = self.folder(state) + "/" + report.id
    try Syscall.makeDirectory(folder)
    if blobBytes > 0 {
      report.attachments.append(
        .init(name: "blob.bin", contentType: "application/octet-stream", size: blobBytes))
      try Syscall.writeFileAtomically(
        folder + "/blob.bin", [UInt8](repeating: 0x5a, count: blobBytes), durable: false)
    }
    if state == .dropped {
      try Syscall.writeFileAtomically(folder + "/dropped.reason", Array("HTTP 400\n".utf8), durable: false)
    }
    try Syscall.writeFileAtomically(folder + "/report.json", try ReportStore.encode(report), durable: false)
    return folder
  }
}
