// EveryByteSent.swift — everything a test server received and everything a store kept, as text
// a test can search for what must never leave (redaction, issue 25): raw bodies and files, and
// what is compressed inside them decompressed (a logs request's trail by decode_otlp.py, each
// `.lz4` file by `lz4 -d`).

import CrumbsPlatform
import CrumbsTestSupport

/// Every request body as text, and the trail of each logs request as the official decoder
/// decompressed it; with `reportKind`, only the logs requests carrying a report of that kind
/// (`crumbs.report.kind`: a crash's id is its session's, which other reports carry too).
package func textsReceived(by server: LoopbackHTTPServer, reportKind: String? = nil) throws -> [String] {
  var texts: [String] = []
  for request in server.requests {
    let body = String(decoding: request.body, as: UTF8.self)
    guard request.target.hasSuffix("/v1/logs") else {
      if reportKind == nil { texts.append(body) }
      continue
    }
    let decoded = try decodeOTLP(request.body)
    if let reportKind {
      let records = decoded["records"] as? [[String: Any]] ?? []
      guard
        records.contains(where: {
          ($0["attributes"] as? [String: Any])?["crumbs.report.kind"] as? String == reportKind
        })
      else { continue }
    }
    texts.append(body)
    if let trail = decoded["trail_jsonl"] as? String { texts.append(trail) }
  }
  return texts
}

/// Every file under `path` as text, each `.lz4` file also decompressed by `lz4 -d`.
package func textsStored(under path: String) throws -> [String] {
  var texts: [String] = []
  for name in try Syscall.directoryEntries(path) {
    let file = path + "/" + name
    if Syscall.isDirectory(file) {
      texts += try textsStored(under: file)
      continue
    }
    texts.append(String(decoding: try Syscall.readFile(file), as: UTF8.self))
    if name.hasSuffix(".lz4") { texts.append(try runLZ4Decompress(file)) }
  }
  return texts
}
