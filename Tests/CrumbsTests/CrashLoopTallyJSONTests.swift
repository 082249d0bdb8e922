import CrumbsPlatform
import CrumbsTestSupport
import FoundationEssentials
import Testing

@testable import Crumbs
@testable import CrumbsRecorder

/// `crash-loop.json` read by CrashLoopTally.decode (CrashLoopTallyJSON.swift) instead of
/// JSONDecoder: what JSONEncoder writes reads back the same; what the decoder refused is refused
/// with a reason; nothing traps; the fuzz corpus and any fuzz regressions replay here (the tally
/// is the client's, above what CrumbsFuzzRegressionTests may link).
@Suite struct CrashLoopTallyJSONTests {
  static func tally(_ build: (inout CrashLoopTally.Stored) -> Void) -> CrashLoopTally.Stored {
    var stored = CrashLoopTally.Stored()
    build(&stored)
    return stored
  }

  static let samples: [CrashLoopTally.Stored] = [
    CrashLoopTally.Stored(),
    tally { $0.resetStarted = 1_795_750_388_058_997_930 },
    tally {
      $0.resetStarted = 10
      $0.loop = [
        .init(session: SessionID().description, started: 20, signature: "SIGSEGV App+0x1c2f0"),
        .init(session: "a/b \"c\" \\ é 😀 \u{1}\n\t", started: UInt64.max, signature: ""),
      ]
      $0.earlier = .init(count: Int.max, first: 0, last: 9, signature: nil)
    },
    tally { $0.earlier = .init(count: -3, first: 5, last: 1, signature: "abnormal termination") },
    tally { $0.version = 2 },
  ]

  @Test func whatJSONEncoderWritesReadsBackTheSame() throws {
    for sample in Self.samples {
      let encoded = Array(try JSONEncoder().encode(sample))
      #expect(try CrashLoopTally.decode(encoded) == sample, "\(String(decoding: encoded, as: UTF8.self))")
      // And what JSONDecoder made of the same bytes (the reader it replaces).
      #expect(try JSONDecoder().decode(CrashLoopTally.Stored.self, from: Data(encoded)) == sample)
    }
  }

  @Test func anyOrderWhitespaceNullsAndUnknownKeysRead() throws {
    let text = """
       { "extra" : {"a": [1, -2.5e3, true, false, null, "x", {}]}, "earlier" : null ,
      "loop": [ { "signature": "S\\u00e9\\ud83d\\ude00", "started": 7, "session": "s", "more": [] } ],
      "resetStarted": null, "version": 1 }\r\n
      """
    let stored = try CrashLoopTally.decode(Array(text.utf8))
    #expect(stored.version == 1 && stored.resetStarted == nil && stored.earlier == nil)
    #expect(stored.loop == [.init(session: "s", started: 7, signature: "Sé😀")])
  }

  @Test func whatTheDecoderRefusedIsRefusedWithAReason() {
    let refused: [String] = [
      "", "{", "[]", "null", #"{"version": 1, "loop": ["#, #"{"loop":[]}"#, #"{"version":1}"#,
      #"{"version":1.0,"loop":[]}"#, #"{"version":1,"loop":[],"resetStarted":-1}"#,
      #"{"version":1,"loop":[],"resetStarted":18446744073709551616}"#,
      #"{"version":1,"loop":[{"session":"s","started":1}]}"#,
      #"{"version":1,"loop":[{"session":1,"started":1,"signature":"x"}]}"#,
      #"{"version":1,"loop":[],"earlier":{"count":1,"first":1}}"#,
      #"{"version":1,"loop":[]} x"#, #"{"version":1,"loop":[],}"#, #"{"version":1 "loop":[]}"#,
      "{\"version\":1,\"loop\":[],\"x\":\"\u{1}\"}", #"{"version":1,"loop":[],"x":"\ud800"}"#,
      #"{"version":1,"loop":[],"x":"\q"}"#, #"{"version":1,"loop":[],"x":tru}"#,
      #"{"version":1,"loop":[],"x":-}"#,
      #"{"version":1,"loop":[],"x":"#, #"{"version":1,"loop":[],"x":"\u12"}"#,
      "{\"version\":1,\"loop\":[],\"x\":" + String(repeating: "[", count: 100)
        + String(repeating: "]", count: 100)
        + "}",
    ]
    for text in refused {
      #expect(throws: PersistedFileError.self, "\(text)") { try CrashLoopTally.decode(Array(text.utf8)) }
    }
    var invalid = Array(#"{"version":1,"loop":[],"x":"ab"}"#.utf8)
    invalid[invalid.count - 3] = 0xFF
    #expect(throws: PersistedFileError.self) { try CrashLoopTally.decode(invalid) }
    do {
      _ = try CrashLoopTally.decode(Array(#"{"version": 1, "loop": ["#.utf8))
    } catch {
      #expect(error.kind == .corrupt && error.reason.contains("at byte"), "\(error)")
    }
  }

  @Test func tooManyEntriesAreDamageNotWork() throws {
    let entry = #"{"session":"s","started":1,"signature":"x"}"#
    let text =
      #"{"version":1,"loop":["# + Array(repeating: entry, count: 10_000).joined(separator: ",") + "]}"
    #expect(throws: PersistedFileError.self) { try CrashLoopTally.decode(Array(text.utf8)) }
    let directory = TestDirectory()
    try Syscall.writeFileAtomically(CrumbsDirectory(directory.path).path(.crashLoopTally), Array(text.utf8))
    let (stored, problem) = CrashLoopTally.read(directory: directory.path)
    #expect(stored == CrashLoopTally.Stored())
    #expect(problem?.contains("damaged") == true, "\(problem ?? "")")
  }

  /// Fuzz/Corpus/loop-tally and Fuzz/Regressions/loop-tally: each input is read or
  /// refused, never trapped on, and a tally read comes back from JSONEncoder's bytes unchanged.
  @Test func fuzzInputsReplay() throws {
    var root = #filePath
    for _ in 0..<3 { root = String(root[..<(root.lastIndex(of: "/") ?? root.startIndex)]) }
    var replayed = 0
    for folder in ["Fuzz/Corpus/loop-tally", "Fuzz/Regressions/loop-tally"] {
      let path = root + "/" + folder
      guard let names = try? Syscall.directoryEntries(path) else { continue }
      for name in names where !name.hasPrefix(".") {
        let bytes = try Syscall.readFile(path + "/" + name, limit: 1 << 20)
        replayed += 1
        guard let stored = try? CrashLoopTally.decode(bytes) else { continue }
        let encoded = Array(try JSONEncoder().encode(stored))
        #expect(try CrashLoopTally.decode(encoded) == stored, "\(name)")
      }
    }
    #expect(replayed >= 10, "the seeds are in Fuzz/Corpus/loop-tally")
  }
}
