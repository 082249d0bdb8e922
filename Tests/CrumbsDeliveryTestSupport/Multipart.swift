// Multipart.swift — reading a multipart/form-data body as a server would (Backtrace
// submissions), for the delivery tests and the client's.

/// The parts of a multipart/form-data body: name and body.
package func multipartParts(_ body: [UInt8], boundary: String) -> [(name: String, body: [UInt8])] {
  let delimiter = Array("--\(boundary)".utf8)
  var parts: [(String, [UInt8])] = []
  var chunks: [ArraySlice<UInt8>] = []
  var rest = body[...]
  while let range = rest.firstRange(of: delimiter) {
    chunks.append(rest[..<range.lowerBound])
    rest = rest[range.upperBound...]
  }
  for chunk in chunks.dropFirst() {
    guard let split = chunk.firstRange(of: Array("\r\n\r\n".utf8)) else { continue }
    let head = String(decoding: chunk[..<split.lowerBound], as: UTF8.self)
    guard let nameStart = head.range(of: "name=\"") else { continue }
    let name = String(head[nameStart.upperBound...].prefix { $0 != "\"" })
    var content = Array(chunk[split.upperBound...])
    if content.suffix(2) == [13, 10] { content.removeLast(2) }
    parts.append((name, content))
  }
  return parts
}
