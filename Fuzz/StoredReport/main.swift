// FuzzStoredReport — libFuzzer target for the parsers of a report folder's files, which the CLI
// and the uploader read back from disk (untrusted: a torn write, a hand edit, another version):
// `report.json` (ReportStore.decode), `breadcrumbs.jsonl.lz4` (LZ4Frame.decompress, liblz4's
// frame decoder with our output limit, and LZ4Frame.verify, the check before sending, which must
// agree with it) and the JSON Lines inside it (StoredReport's trail reader).
//
// Entry points, in call order:
//   main                  --make-seeds DIR writes seeds (a real report.json, a real trail, both
//                         damaged); in a -sanitize=fuzzer build crumbs_fuzz_run drives
//                         fuzzOneInput; in a normal build, files given are replayed
//   fuzzOneInput          the bytes through each parser; each must return or throw, never trap
// Not signal-safe (an ordinary program).

import CFuzzDriver
import CrumbsReports
import Foundation
import FuzzSupport

#if canImport(Glibc)
  import Glibc
#endif

func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let bytes = data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
  _ = try? ReportStore.decode(bytes)
  let decompressed = try? LZ4Frame.decompress(bytes, limit: 1 << 22)
  if let text = decompressed {
    _ = text.split(separator: UInt8(ascii: "\n")).map { try? JSONSerialization.jsonObject(with: Data($0)) }
  }
  // The check before sending (LZ4Frame.verify) and the decoder agree on the same bytes.
  let verified = (try? LZ4Frame.verify(bytes, limit: 1 << 22)) != nil
  if verified != (decompressed != nil) {
    fatalError("LZ4Frame.verify says \(verified ? "whole" : "damaged"), decompress disagrees")
  }
  return 0
}

func makeSeeds(in directory: String) throws -> Int {
  try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
  let lines = (0..<40).map {
    "{\"timestamp\":\"2026-11-22T04:10:11.123Z\",\"id\":\($0),\"seq\":\($0),\"thread\":7,\"level\":\"info\",\"type\":\"http\",\"message\":\"GET /v1/\($0)\",\"attributes\":{\"k\":\"v\"}}\n"
  }.joined()
  let trail = try LZ4Frame.compress(Array(lines.utf8))
  let report = """
    {"report.id":"6acdbf4e-718a-40c4-b194-12e38ae64caf","kind":"crash","exception.type":"SIGSEGV",\
    "exception.message":"SEGV_MAPERR at 0x0","exception.stacktrace":"#0 0x1","thread.id":7,\
    "session.id":"6acdbf4e-718a-40c4-b194-12e38ae64caf","time_unix_nano":1,"time":"2026-11-22T04:10:11.123Z",\
    "observed_time_unix_nano":2,"observed_time":"2026-11-22T04:10:12.123Z","registers":[{"name":"rip","value":"0x1"}],\
    "frames":[{"index":0,"address":"0x1","function":"f","symbolOffset":4}],"modules":[{"path":"/bin/x","loadAddress":"0x0"}],\
    "resource":{"service.name":"x"},"attributes":{},"breadcrumbs":{"attachment":"breadcrumbs.jsonl.lz4","count":40,\
    "valid":40,"torn":0,"overwritten":0,"empty":0,"timesCalibrated":true},"attachments":[],"damage":[],"evidence":[]}
    """
  let seeds: [(String, [UInt8])] = [
    ("report.json", Array(report.utf8)),
    ("report-cut.json", Array(report.utf8.prefix(200))),
    ("trail.jsonl.lz4", trail),
    ("trail-cut.jsonl.lz4", Array(trail.prefix(trail.count / 2))),
  ]
  for (name, bytes) in seeds {
    FileManager.default.createFile(atPath: directory + "/" + name, contents: Data(bytes))
  }
  return seeds.count
}

FuzzMain.run(
  name: "FuzzStoredReport", callback: { data, size in fuzzOneInput(data, size) },
  makeSeeds: { directory, _ in try makeSeeds(in: directory) },
  describe: { bytes in
    if let report = try? ReportStore.decode(bytes) { return "report \(report.id)" }
    if let text = try? LZ4Frame.decompress(bytes, limit: 1 << 22) { return "trail, \(text.count) bytes" }
    return "rejected"
  })
