// FuzzCrashLoopTally — libFuzzer target for `crash-loop.json` (CrashLoopTally.decode), which
// `CrumbsClient.start` reads on the caller's thread: another process of the app (or a collector)
// wrote it, and a torn disk or a hand edit may have damaged it.
//
// Entry points, in call order:
//   main                  --make-seeds DIR writes seeds (what JSONEncoder writes today: empty,
//                         a loop, a folded count, escapes, nulls, unknown keys; damaged ones);
//                         in a -sanitize=fuzzer build crumbs_fuzz_run drives fuzzOneInput; in a
//                         normal build, files given are replayed
//   fuzzOneInput          the bytes through the parser: it must return or throw, never trap,
//                         and a tally it returns must come back from JSONEncoder's bytes unchanged
// Regressions replay in CrumbsTests (CrashLoopTallyJSONTests): the tally is the client's.
// Not signal-safe (an ordinary program).

import CFuzzDriver
import Crumbs
import FoundationEssentials
import FuzzSupport

#if canImport(Glibc)
  import Glibc
#endif

func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let bytes = data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
  guard let stored = try? CrashLoopTally.decode(bytes) else { return 0 }
  _ = stored.damage
  // What the writer makes of it reads back the same.
  guard let encoded = try? JSONEncoder().encode(stored) else { fatalError("not encodable: \(stored)") }
  let again = try? CrashLoopTally.decode(Array(encoded))
  if again != stored {
    fatalError("\(stored) → \(String(decoding: encoded, as: UTF8.self)) → \(String(describing: again))")
  }
  return 0
}

func makeSeeds(in directory: String) throws -> Int {
  let seeds: [(String, String)] = [
    ("empty", #"{"loop":[],"version":1}"#),
    ("reset", #"{"loop":[],"version":1,"resetStarted":1795750388058997930}"#),
    (
      "loop",
      #"{"version":1,"resetStarted":10,"loop":[{"session":"096a77ed-24f3-46a0-96a4-15b69b62a8ae","started":20,"signature":"SIGSEGV App+0x1c2f0"},{"session":"196a77ed-24f3-46a0-96a4-15b69b62a8ae","started":30,"signature":"abnormal termination"}]}"#
    ),
    (
      "earlier",
      #"{"earlier":{"count":136,"first":1,"last":9,"signature":null},"loop":[],"version":1}"#
    ),
    (
      "escapes",
      #"{ "loop" : [ {"session":"a\/b","started":1,"signature":"\u00e9\ud83d\ude00\"\\\n"} ] , "version" : 1 }"#
    ),
    ("unknown-keys", #"{"loop":[],"version":1,"extra":{"a":[1,-2.5e3,true,false,null,"x"]}}"#),
    ("truncated", #"{"version": 1, "loop": ["#),
    ("negative-count", #"{"earlier":{"count":-1,"first":1,"last":9},"loop":[],"version":1}"#),
    ("fraction", #"{"loop":[],"version":1.0}"#),
    ("version-2", #"{"loop":[],"version":2}"#),
  ]
  return try FuzzMain.writeSeeds(seeds, in: directory)
}

FuzzMain.run(
  name: "FuzzCrashLoopTally", callback: { data, size in fuzzOneInput(data, size) },
  makeSeeds: { directory, _ in try makeSeeds(in: directory) },
  describe: { bytes in
    do {
      let stored = try CrashLoopTally.decode(bytes)
      return "\(stored.loop.count) entries, damage: \(stored.damage ?? "none")"
    } catch {
      return "refused: \(error)"
    }
  })
