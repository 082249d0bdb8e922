// FuzzSessionFile — libFuzzer target for a session file (`rings/<session>.session.json`,
// SessionMetadata.decode) and the value patterns its redaction rules carry (ValuePattern):
// the app writes both, and every processor of its end reads them — `crumbs collect` under
// another uid included — and runs the patterns on text the app wrote.
//
// Entry points, in call order:
//   main                  --make-seeds DIR writes seeds (session files as the client writes
//                         them, with and without rules; patterns and texts, hostile ones too);
//                         in a -sanitize=fuzzer build crumbs_fuzz_run drives fuzzOneInput; in a
//                         normal build, files given are replayed
//   fuzzOneInput          SessionMetadata.fuzzViolation: decoding must return or throw, never
//                         trap; rules apply to the bytes as text; a pattern compiles or is
//                         refused, and its matches are in order, non-empty and inside the text
// Not signal-safe (an ordinary program).

import CFuzzDriver
import CrumbsRecorder
import CrumbsReports
import FuzzSupport

func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let bytes = data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
  if let violation = SessionMetadata.fuzzViolation(bytes) { fatalError(violation) }
  return 0
}

func makeSeeds(in directory: String) throws -> Int {
  // Session files as the client writes them (SessionMetadata.encoded), then damaged and hostile ones.
  func written(_ redaction: Redaction?, attributes: [String: AttributeValue] = [:]) -> String {
    var metadata = SessionMetadata(sessionID: SessionID(), appVersion: "1.4.2", redaction: redaction)
    metadata.attributes = attributes
    metadata.attachments = ["/var/log/app.log", "/proc/self/environ"]
    return String(decoding: metadata.encoded(), as: UTF8.self)
  }
  let rules = Redaction(valuePatterns: [Redaction.emailAddresses, "card [0-9]{4}"])
  let hostile = Redaction(keys: [], valuePatterns: ["(.*.*)*Q$", "(a{1000}){1000}", "(?=x)"])
  let plain = written(nil)
  let seeds: [(String, String)] = [
    ("plain", plain),
    ("rules", written(rules, attributes: ["user": .string("alice@example.com password=hunter2")])),
    ("hostile-rules", written(hostile)),
    ("newer", "{\"format\":2" + plain.dropFirst("{\"format\":1".count)),
    ("truncated", String(written(rules).prefix(90))),
    ("pattern-email", Redaction.emailAddresses + "\nmail alice@example.com and bob@x.org"),
    ("pattern-hostile", "(.*.*)*Q$\n" + String(repeating: "a", count: 200)),
    ("pattern-lazy", "(?i)secret\\s*[:=]\\s*\\S+?\\b\nSECRET = abc def; secret:xyz"),
    ("pattern-nested-empty", "((.*?|$)+x)?\nxxyx"),
    ("pattern-classes", "[^\\d\\s-]{2,5}|\\bword\\B\n12 ab-cd wordy word"),
  ]
  return try FuzzMain.writeSeeds(seeds, in: directory)
}

FuzzMain.run(
  name: "FuzzSessionFile", callback: { data, size in fuzzOneInput(data, size) },
  makeSeeds: { directory, _ in try makeSeeds(in: directory) },
  describe: { bytes in
    let session: String
    do throws(SessionMetadata.ReadError) {
      let metadata = try SessionMetadata.decode(bytes)
      session = "session file, \(metadata.redaction?.valuePatterns.count ?? 0) patterns"
    } catch {
      session = "not a session file"
    }
    let cut = bytes.firstIndex(of: 0x0A) ?? bytes.endIndex
    let pattern: String
    do throws(ValuePattern.SyntaxError) {
      _ = try ValuePattern(String(decoding: bytes[..<cut], as: UTF8.self))
      pattern = "first line compiles"
    } catch {
      pattern = "first line refused: \(error)"
    }
    return session + "; " + pattern
  })
